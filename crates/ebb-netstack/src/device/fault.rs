//! A device wrapper that injects faults — loss, duplication, reordering,
//! delay and corruption — deterministically from a seed. The simulated wire
//! ([`crate::sim`]) applies the same faults with the same code.

use alloc::vec::Vec;
use core::time::Duration;

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};

use super::{Device, DeviceCapabilities};
use crate::rng::Rng;

/// Which faults to inject, in percent of frames (each drawn independently).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// Seed of the pseudo-random choices: the same seed, frames and times
    /// give the same faults.
    pub seed: u64,
    /// Frames dropped.
    pub loss_pct: u8,
    /// Frames delivered twice.
    pub duplicate_pct: u8,
    /// Frames held back by `reorder_delay` so that later frames overtake
    /// them.
    pub reorder_pct: u8,
    /// Frames with one bit flipped.
    pub corrupt_pct: u8,
    /// Every frame is delayed by a uniformly random time up to this.
    pub max_delay: Duration,
    /// How long a reordered frame is held back.
    pub reorder_delay: Duration,
    /// At most this many frames are held (delayed) at once; more are
    /// dropped, so memory stays bounded. 0 means 1024.
    pub max_held: usize,
}

/// What the faults did, per direction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    /// Frames offered.
    pub offered: u64,
    /// Frames dropped by `loss_pct`.
    pub lost: u64,
    /// Extra copies made by `duplicate_pct`.
    pub duplicated: u64,
    /// Frames held back by `reorder_pct`.
    pub reordered: u64,
    /// Frames corrupted.
    pub corrupted: u64,
    /// Frames dropped because `max_held` frames were already held.
    pub overflowed: u64,
}

struct Held {
    release: Instant,
    seq: u64,
    frame: IoChain,
}

/// The fault logic for one direction: frames go in with [`admit`] and come
/// out of [`release`] when their time has come.
///
/// [`admit`]: Faults::admit
/// [`release`]: Faults::release
pub(crate) struct Faults {
    config: FaultConfig,
    rng: Rng,
    held: Vec<Held>,
    seq: u64,
    pub(crate) stats: FaultStats,
}

impl Faults {
    pub(crate) fn new(config: FaultConfig) -> Self {
        Faults {
            config,
            rng: Rng::new(config.seed),
            held: Vec::new(),
            seq: 0,
            stats: FaultStats::default(),
        }
    }

    fn max_held(&self) -> usize {
        if self.config.max_held == 0 {
            1024
        } else {
            self.config.max_held
        }
    }

    fn random_delay(&mut self, max: Duration) -> Duration {
        let max = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.rng.below(max.saturating_add(1)))
    }

    /// Applies the faults to `frame`, offered at `now`; `extra` is added to
    /// its delay (the simulated wire's latency and serialization time).
    pub(crate) fn admit(&mut self, now: Instant, frame: IoChain, extra: Duration) {
        self.stats.offered += 1;
        if self.rng.chance(self.config.loss_pct) {
            self.stats.lost += 1;
            return;
        }
        let frame = if self.rng.chance(self.config.corrupt_pct) && !frame.is_empty() {
            self.stats.corrupted += 1;
            let mut bytes = frame.to_vec();
            let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            let at = usize::try_from(self.rng.below(len)).unwrap_or(0);
            let bit = self.rng.below(8);
            bytes[at] ^= 1 << bit;
            IoChain::from(IoBuf::from_vec(bytes))
        } else {
            frame
        };
        let copies = if self.rng.chance(self.config.duplicate_pct) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut delay = extra + self.random_delay(self.config.max_delay);
            if self.rng.chance(self.config.reorder_pct) {
                self.stats.reordered += 1;
                delay += self.config.reorder_delay;
            }
            if self.held.len() >= self.max_held() {
                self.stats.overflowed += 1;
                continue;
            }
            self.seq += 1;
            self.held.push(Held {
                release: now + delay,
                seq: self.seq,
                frame: frame.clone(),
            });
        }
    }

    /// The frame due earliest, if it is due at `now` (frames due at the same
    /// time come out in the order they went in).
    pub(crate) fn release(&mut self, now: Instant) -> Option<IoChain> {
        let (index, _) = self
            .held
            .iter()
            .enumerate()
            .filter(|(_, h)| h.release <= now)
            .min_by_key(|(_, h)| (h.release, h.seq))?;
        Some(self.held.remove(index).frame)
    }

    /// When the next held frame is due.
    pub(crate) fn next_release(&self) -> Option<Instant> {
        self.held.iter().map(|h| h.release).min()
    }
}

/// Wraps a device and applies [`FaultConfig`] to the frames it receives
/// and to those it sends (each direction with its own random stream).
/// Delayed frames are released by later calls to `receive` or `transmit`
/// with a `now` past their time.
pub struct FaultInjector<D> {
    inner: D,
    rx: Faults,
    tx: Faults,
}

impl<D: Device> FaultInjector<D> {
    /// Wraps `inner`.
    pub fn new(inner: D, config: FaultConfig) -> Self {
        let tx_config = FaultConfig {
            seed: config.seed ^ 0x5a5a_5a5a_5a5a_5a5a,
            ..config
        };
        FaultInjector {
            inner,
            rx: Faults::new(config),
            tx: Faults::new(tx_config),
        }
    }

    /// What was done to received frames.
    pub fn rx_stats(&self) -> FaultStats {
        self.rx.stats
    }

    /// What was done to sent frames.
    pub fn tx_stats(&self) -> FaultStats {
        self.tx.stats
    }

    /// The wrapped device.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    fn flush_tx(&mut self, now: Instant) {
        while let Some(frame) = self.tx.release(now) {
            self.inner.transmit(now, frame);
        }
    }
}

impl<D: Device> Device for FaultInjector<D> {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        self.flush_tx(now);
        while let Some((frame, checksum)) = self.inner.receive_checked(now) {
            // The stack will verify what comes out of here (nothing is
            // vouched for), so a frame the host left with a partial
            // checksum is completed first, as a device without receive
            // offload would hand it over.
            let frame = if checksum == super::RxChecksum::Partial {
                let mut bytes = frame.to_vec();
                crate::checksum::complete_partial(&mut bytes);
                IoBuf::copy_from_slice(&bytes)
            } else {
                frame
            };
            self.rx.admit(now, IoChain::from(frame), Duration::ZERO);
        }
        // A frame is one segment unless corruption rebuilt it (then too).
        self.rx.release(now).map(IoChain::into_iobuf)
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        self.tx.admit(now, frame, Duration::ZERO);
        self.flush_tx(now);
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = self.inner.capabilities();
        // Corruption happens after the device checked: vouch for nothing
        // received (the default `receive_checked` flags no frame either).
        // Transmit offload is the inner device's business and stays.
        if self.rx.config.corrupt_pct > 0 {
            caps.checksum = super::ChecksumCapabilities {
                tx_partial: caps.checksum.tx_partial,
                ..super::ChecksumCapabilities::default()
            };
        }
        caps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::VecDeque;

    /// A device whose received frames are a fixed list and whose sent
    /// frames are kept.
    #[derive(Default)]
    struct Fixed {
        rx: VecDeque<IoBuf>,
        tx: Vec<IoChain>,
    }

    impl Device for Fixed {
        fn receive(&mut self, _now: Instant) -> Option<IoBuf> {
            self.rx.pop_front()
        }
        fn transmit(&mut self, _now: Instant, frame: IoChain) {
            self.tx.push(frame);
        }
        fn capabilities(&self) -> DeviceCapabilities {
            DeviceCapabilities::default()
        }
    }

    fn run(config: FaultConfig) -> Vec<u8> {
        let mut dev = FaultInjector::new(Fixed::default(), config);
        for i in 0..200u8 {
            dev.transmit(
                Instant(u64::from(i) * 1_000),
                IoChain::from(IoBuf::from_vec(alloc::vec![i; 4])),
            );
        }
        dev.receive(Instant(10_000_000_000));
        dev.inner_mut().tx.iter().map(|f| f.to_vec()[0]).collect()
    }

    #[test]
    fn no_faults_passes_everything_in_order() {
        let out = run(FaultConfig::default());
        assert_eq!(out, (0..200u8).collect::<Vec<_>>());
    }

    #[test]
    fn faults_are_deterministic_and_do_what_they_say() {
        let config = FaultConfig {
            seed: 9,
            loss_pct: 10,
            duplicate_pct: 10,
            reorder_pct: 10,
            max_delay: Duration::from_micros(1),
            reorder_delay: Duration::from_micros(20),
            max_held: 1000,
            ..FaultConfig::default()
        };
        let a = run(config);
        assert_eq!(a, run(config), "same seed, same result");
        assert_ne!(a, run(FaultConfig { seed: 10, ..config }));
        let unique: alloc::collections::BTreeSet<u8> = a.iter().copied().collect();
        assert!(unique.len() < 200, "some frames were lost");
        assert!(a.len() > unique.len(), "some frames were duplicated");
        assert!(
            a.windows(2).any(|w| w[0] > w[1]),
            "some frames were reordered"
        );
    }

    #[test]
    fn corruption_flips_one_bit() {
        let mut dev = FaultInjector::new(
            Fixed::default(),
            FaultConfig {
                seed: 1,
                corrupt_pct: 100,
                ..FaultConfig::default()
            },
        );
        dev.transmit(
            Instant(0),
            IoChain::from(IoBuf::from_vec(alloc::vec![0u8; 64])),
        );
        let out = dev.inner_mut().tx[0].to_vec();
        assert_eq!(out.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
    }

    #[test]
    fn held_frames_are_bounded() {
        let mut dev = FaultInjector::new(
            Fixed::default(),
            FaultConfig {
                seed: 1,
                max_delay: Duration::from_secs(1),
                max_held: 8,
                ..FaultConfig::default()
            },
        );
        for _ in 0..100 {
            dev.transmit(
                Instant(0),
                IoChain::from(IoBuf::from_vec(alloc::vec![1u8; 4])),
            );
        }
        assert_eq!(dev.tx_stats().overflowed, 92);
    }
}
