//! How long a hosted core polls its completion ring before it sleeps
//! (DESIGN §4's adaptive polling, for the hosted loop).
//!
//! Going to sleep in `io_uring_enter` and being woken costs the core CPU
//! time of its own: the scheduler's switch out and in, and on a virtual
//! machine the idle exit and the wake-up's IPI. Measured with `./ebb
//! bench memcached` on this machine's VMs (CPU per request against
//! sleeps per request at three loads), one sleep costs the server about
//! 25 µs, against about 2 µs of work per request. Polling instead costs
//! the time spent polling. So polling for a window `W` pays when the next
//! completion usually comes sooner than a sleep costs, and costs when it
//! usually comes later.
//!
//! The window therefore tunes itself against the gaps the core actually
//! sees, not by a rule of thumb: each halt that found nothing waiting
//! records how long it was until work came, in power-of-two buckets, and
//! whether the core really slept (a blocking `io_uring_enter` may return
//! before the thread is switched out, if work comes while it gets ready
//! to sleep: then there was no sleep to save). Every [`RETUNE_EVERY`]
//! such halts, the window becomes the candidate (0, 2, 4, 8 … µs, up to
//! the maximum) with the best expected gain over those gaps: a gap shorter
//! than the window saves a sleep's cost minus the time polled for it,
//! times the chance that a gap of that length sleeps; a longer one wastes
//! the whole window. Then the counts are halved, so the choice follows the
//! load. The chance is learned from the gaps the window did not cover
//! (a gap caught by polling says nothing about whether it would have
//! slept); once its counts have decayed, a bucket is assumed to sleep, so
//! the core tries polling again. The maximum doubles as the cost of a
//! sleep (`--poll-max-us`): polling longer than a sleep costs never pays.
//!
//! An idle core sees only long gaps, so its window is 0 and it sleeps at
//! once. Pure logic, no clock of its own: the driver reports each gap.

/// Gaps are counted in buckets `[2^(i-1), 2^i)` µs (bucket 0: under
/// 1 µs), the last one open-ended.
const BUCKETS: usize = 12;

/// Halts with a gap between two choices of the window.
pub const RETUNE_EVERY: u32 = 64;

/// The shortest maximum that polls: a window must cover at least the
/// bucket of gaps under 2 µs.
pub const MIN_WINDOW_NS: u64 = 2_000;

/// The default maximum window and cost of a sleep (`--poll-max-us`): what
/// a sleep-and-wake costs here (see the module comment).
pub const DEFAULT_MAX_NS: u64 = 25_000;

/// How a halt with a gap ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Work came while the core polled.
    Polling,
    /// The core entered the kernel to sleep `after_ns` into the gap (when
    /// its window ended), and did or did not sleep: `None` where that was
    /// not measured (the driver asks the kernel on a sample of halts).
    Entered { after_ns: u64, slept: Option<bool> },
}

/// One core's polling window.
#[derive(Clone, Debug)]
pub struct PollWindow {
    window_ns: u64,
    /// The cost of a sleep, and the longest window.
    max_ns: u64,
    /// Recent gaps per bucket, halved after each choice.
    gaps: [u32; BUCKETS],
    /// By how long the kernel had to wait (the gap's part after the
    /// window): how many such waits were measured, and how many of them
    /// slept. Halved after a choice only where new ones came, so a chance
    /// learned before a window covered the bucket is kept.
    measured: [u32; BUCKETS],
    slept: [u32; BUCKETS],
    measured_since_choice: [bool; BUCKETS],
    since_choice: u32,
}

/// The bucket of a gap of `gap_ns`.
fn bucket_of(gap_ns: u64) -> usize {
    let us = gap_ns / 1_000;
    // 0 → 0, 1 → 1, 2..3 → 2, 4..7 → 3, …
    let bucket = (u64::BITS - us.leading_zeros()) as usize;
    bucket.min(BUCKETS - 1)
}

/// Bucket `i`'s bounds in ns: `[low, high)`, `high` = `u64::MAX` for the
/// last.
fn bounds_of(bucket: usize) -> (u64, u64) {
    let low = if bucket == 0 {
        0
    } else {
        (1u64 << (bucket - 1)) * 1_000
    };
    let high = if bucket == BUCKETS - 1 {
        u64::MAX
    } else {
        (1u64 << bucket) * 1_000
    };
    (low, high)
}

impl PollWindow {
    /// A core whose sleeps cost `max_ns` and that never polls longer;
    /// below [`MIN_WINDOW_NS`] polling is off.
    pub fn new(max_ns: u64) -> Self {
        PollWindow {
            window_ns: 0,
            max_ns: if max_ns < MIN_WINDOW_NS { 0 } else { max_ns },
            gaps: [0; BUCKETS],
            measured: [0; BUCKETS],
            slept: [0; BUCKETS],
            measured_since_choice: [false; BUCKETS],
            since_choice: 0,
        }
    }

    /// Whether gaps are worth recording (polling is not turned off).
    pub fn is_tuning(&self) -> bool {
        self.max_ns > 0
    }

    /// How long to poll before the next sleep, in nanoseconds.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// A halt found nothing waiting, and work came `gap_ns` after it
    /// began; `ended` says how.
    pub fn record_gap(&mut self, gap_ns: u64, ended: Ended) {
        if self.max_ns == 0 {
            return;
        }
        let bucket = bucket_of(gap_ns);
        self.gaps[bucket] = self.gaps[bucket].saturating_add(1);
        if let Ended::Entered {
            after_ns,
            slept: Some(slept),
        } = ended
        {
            let waited = bucket_of(gap_ns.saturating_sub(after_ns));
            self.measured[waited] = self.measured[waited].saturating_add(1);
            self.slept[waited] = self.slept[waited].saturating_add(u32::from(slept));
            self.measured_since_choice[waited] = true;
        }
        self.since_choice += 1;
        if self.since_choice >= RETUNE_EVERY {
            self.window_ns = self.best_window();
            self.since_choice = 0;
            for count in &mut self.gaps {
                *count /= 2;
            }
            for bucket in 0..BUCKETS {
                if std::mem::take(&mut self.measured_since_choice[bucket]) {
                    self.measured[bucket] /= 2;
                    self.slept[bucket] /= 2;
                }
            }
        }
    }

    /// The chance, in parts per `u16::MAX`, that the kernel sleeps when it
    /// has a wait in `bucket` ahead of it: learned, or 1 when nothing is
    /// known.
    fn sleep_chance(&self, bucket: usize) -> i128 {
        let scale = i128::from(u16::MAX);
        match self.measured[bucket] {
            0 => scale,
            seen => i128::from(self.slept[bucket]) * scale / i128::from(seen),
        }
    }

    /// The windows worth weighing: each power of two µs from 2 below the
    /// maximum, and the maximum.
    fn candidates(&self) -> impl Iterator<Item = u64> + '_ {
        (1..BUCKETS - 1)
            .map(|edge| bounds_of(edge).1)
            .filter(|&window| window < self.max_ns)
            .chain(core::iter::once(self.max_ns))
    }

    /// The expected gain of polling for `window` over the counted gaps.
    fn gain(&self, window: u64) -> i128 {
        let scale = i128::from(u16::MAX);
        self.gaps
            .iter()
            .enumerate()
            .map(|(bucket, &count)| {
                let (low, high) = bounds_of(bucket);
                let count = i128::from(count);
                if high <= window {
                    // Caught after about the bucket's middle; unpolled, the
                    // kernel would have waited that long and slept with
                    // the learned chance. A gap that would not have slept
                    // costs about what polling for it does.
                    let saved = i128::from(self.max_ns) * self.sleep_chance(bucket) / scale;
                    count * (saved - i128::from(low / 2 + high / 2))
                } else {
                    -count * i128::from(window)
                }
            })
            .sum()
    }

    /// The candidate window with the best expected gain, in ns (0 if none
    /// gains).
    fn best_window(&self) -> u64 {
        let mut best = (0i128, 0u64);
        for window in self.candidates() {
            let gain = self.gain(window);
            if gain > best.0 {
                best = (gain, window);
            }
        }
        best.1
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const US: u64 = 1_000;

    /// Records `gaps` `times` times: a gap the window covers is caught
    /// polling; one it does not enters the kernel after the window, which
    /// sleeps if `sleeps` says so for what is left of the gap.
    fn after_with(poll: &mut PollWindow, gaps: &[u64], times: u32, sleeps: impl Fn(u64) -> bool) {
        for _ in 0..times {
            for &gap in gaps {
                let window = poll.window_ns();
                let ended = if gap < window {
                    Ended::Polling
                } else {
                    Ended::Entered {
                        after_ns: window,
                        slept: Some(sleeps(gap - window)),
                    }
                };
                poll.record_gap(gap, ended);
            }
        }
    }

    /// As [`after_with`], every entry sleeping.
    fn after(poll: &mut PollWindow, gaps: &[u64], times: u32) {
        after_with(poll, gaps, times, |_| true);
    }

    #[test]
    fn gaps_fall_in_power_of_two_buckets() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(999), 0);
        assert_eq!(bucket_of(US), 1);
        assert_eq!(bucket_of(3 * US), 2);
        assert_eq!(bucket_of(4 * US), 3);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bounds_of(3), (4 * US, 8 * US));
        for gap in [0, 1, 999, US, 5 * US, 1_000 * US, 1 << 40] {
            let (low, high) = bounds_of(bucket_of(gap));
            assert!(low <= gap && gap < high, "{gap} in [{low}, {high})");
        }
    }

    #[test]
    fn short_gaps_open_a_window_that_covers_them() {
        let mut poll = PollWindow::new(25 * US);
        assert_eq!(poll.window_ns(), 0);
        after(&mut poll, &[3 * US], RETUNE_EVERY);
        // 3 µs is in [2, 4) µs: a 4 µs window catches it.
        assert_eq!(poll.window_ns(), 4 * US);
    }

    #[test]
    fn the_maximum_itself_is_a_window() {
        let mut poll = PollWindow::new(25 * US);
        // 20 µs gaps: only the 25 µs maximum covers their [16, 32) µs
        // bucket... which it does not wholly, so no window pays.
        after(&mut poll, &[20 * US], RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 0);
        let mut poll = PollWindow::new(32 * US);
        after(&mut poll, &[20 * US], RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 32 * US);
        assert_eq!(
            PollWindow::new(25 * US).candidates().collect::<Vec<_>>(),
            [2 * US, 4 * US, 8 * US, 16 * US, 25 * US]
        );
    }

    #[test]
    fn gaps_longer_than_a_sleep_costs_keep_it_closed() {
        let mut poll = PollWindow::new(25 * US);
        after(&mut poll, &[40 * US, 300 * US, 5_000 * US], RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 0);
    }

    #[test]
    fn short_gaps_pay_for_up_to_five_long_ones_each() {
        // A 3 µs gap caught by a 4 µs window saves 25 - 3 = 22 µs; each
        // long gap wastes the 4 µs: break-even at 5.5 long per short.
        for (long_per_short, opens) in [(5, true), (6, false)] {
            let mut poll = PollWindow::new(25 * US);
            let mut gaps = vec![900 * US; long_per_short];
            gaps.push(3 * US);
            after(&mut poll, &gaps, RETUNE_EVERY);
            assert_eq!(poll.window_ns() == 4 * US, opens, "{long_per_short} to 1");
        }
    }

    #[test]
    fn gaps_that_never_sleep_keep_it_closed() {
        let mut poll = PollWindow::new(25 * US);
        after_with(&mut poll, &[3 * US], RETUNE_EVERY * 4, |_| false);
        assert_eq!(poll.window_ns(), 0);
    }

    #[test]
    fn the_chance_of_sleeping_is_learned_by_the_wait_left() {
        let mut poll = PollWindow::new(25 * US);
        // Waits of 3 µs sleep one time in two.
        let mut sleeps = std::cell::Cell::new(false);
        after_with(&mut poll, &[3 * US], RETUNE_EVERY, |_| {
            sleeps.set(!sleeps.get());
            sleeps.get()
        });
        let half = i128::from(u16::MAX) / 2;
        assert!(
            (poll.sleep_chance(2) - half).abs() <= 1,
            "{}",
            poll.sleep_chance(2)
        );
        // Half of 22 µs saved still pays for a 4 µs window.
        assert_eq!(poll.window_ns(), 4 * US);
        // Now caught polling, they teach nothing: the chance stays, and so
        // does the window, however long this goes on.
        sleeps = std::cell::Cell::new(true);
        after_with(&mut poll, &[3 * US], RETUNE_EVERY * 20, |_| sleeps.get());
        assert!(
            (poll.sleep_chance(2) - half).abs() <= 1,
            "{}",
            poll.sleep_chance(2)
        );
        assert_eq!(poll.window_ns(), 4 * US);
    }

    #[test]
    fn a_wait_is_learned_by_what_was_left_after_the_window() {
        let mut poll = PollWindow::new(25 * US);
        poll.record_gap(
            20 * US,
            Ended::Entered {
                after_ns: 16 * US,
                slept: Some(false),
            },
        );
        // 4 µs left: bucket [4, 8) µs, not the gap's [16, 32).
        assert_eq!((poll.measured[3], poll.measured[5]), (1, 0));
        // Unmeasured entries count as gaps only.
        poll.record_gap(
            20 * US,
            Ended::Entered {
                after_ns: 0,
                slept: None,
            },
        );
        assert_eq!((poll.gaps[5], poll.measured[5]), (2, 0));
    }

    #[test]
    fn an_idle_spell_closes_an_open_window() {
        let mut poll = PollWindow::new(25 * US);
        after(&mut poll, &[3 * US], RETUNE_EVERY * 4);
        assert_eq!(poll.window_ns(), 4 * US);
        // The short gaps' count halves at each choice: three choices on.
        after(&mut poll, &[10_000 * US], RETUNE_EVERY * 2);
        assert_eq!(poll.window_ns(), 4 * US);
        after(&mut poll, &[10_000 * US], RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 0);
    }

    #[test]
    fn a_maximum_under_two_microseconds_never_polls() {
        for max in [0, 1, US, MIN_WINDOW_NS - 1] {
            let mut poll = PollWindow::new(max);
            assert!(!poll.is_tuning());
            after(&mut poll, &[0, US, 3 * US], RETUNE_EVERY);
            assert_eq!(poll.window_ns(), 0);
        }
    }

    proptest! {
        /// Whatever the gaps and however they end, the window is 0, a
        /// power-of-two number of µs under the maximum, or the maximum;
        /// and a spell of gaps longer than the maximum closes it (the
        /// short buckets' counts, at most 128, halve to 0 in 8 choices;
        /// one more choice sees them gone).
        #[test]
        fn the_window_stays_bounded_and_idling_closes_it(
            max_us in 0u64..=1_000,
            gaps in proptest::collection::vec((0u64..2_000_000, any::<bool>()), 0..600),
        ) {
            let mut poll = PollWindow::new(max_us * US);
            for (gap, slept) in gaps {
                let window = poll.window_ns();
                let ended = if gap < window {
                    Ended::Polling
                } else {
                    Ended::Entered { after_ns: window, slept: Some(slept) }
                };
                poll.record_gap(gap, ended);
                let window = poll.window_ns();
                prop_assert!(window <= max_us * US);
                prop_assert!(
                    window == 0 || window == max_us * US || (window / US).is_power_of_two()
                );
            }
            after(&mut poll, &[max_us * US + 1], RETUNE_EVERY * 9);
            prop_assert_eq!(poll.window_ns(), 0);
        }
    }
}
