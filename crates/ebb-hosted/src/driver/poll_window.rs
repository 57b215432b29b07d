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

/// The default maximum window and cost of a sleep (`--poll-max-us`): what
/// a sleep-and-wake costs here (see the module comment).
pub const DEFAULT_MAX_NS: u64 = 25_000;

/// How a halt with a gap ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Work came while the core polled.
    Polling,
    /// The core slept (its thread was switched out).
    Asleep,
    /// The core entered the kernel to sleep, but work came first.
    BeforeSleeping,
}

/// One core's polling window.
#[derive(Clone, Debug)]
pub struct PollWindow {
    window_ns: u64,
    /// The cost of a sleep, and the longest window.
    max_ns: u64,
    /// Recent gaps per bucket, halved after each choice.
    gaps: [u32; BUCKETS],
    /// Of the gaps the window did not cover, per bucket: how many, and
    /// how many of those slept. Halved after each choice.
    uncovered: [u32; BUCKETS],
    slept: [u32; BUCKETS],
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
    /// `0` turns polling off.
    pub fn new(max_ns: u64) -> Self {
        PollWindow {
            window_ns: 0,
            max_ns,
            gaps: [0; BUCKETS],
            uncovered: [0; BUCKETS],
            slept: [0; BUCKETS],
            since_choice: 0,
        }
    }

    /// Whether gaps are worth recording (polling is not turned off): the
    /// driver then asks the kernel whether each blocking halt slept.
    pub fn is_tuning(&self) -> bool {
        self.max_ns > 0
    }

    /// How long to poll before the next sleep, in nanoseconds.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }

    /// A halt found nothing waiting, and work (or its deadline) came
    /// `gap_ns` after it began; `ended` says how.
    pub fn record_gap(&mut self, gap_ns: u64, ended: Ended) {
        if self.max_ns == 0 {
            return;
        }
        let bucket = bucket_of(gap_ns);
        self.gaps[bucket] = self.gaps[bucket].saturating_add(1);
        if ended != Ended::Polling {
            self.uncovered[bucket] = self.uncovered[bucket].saturating_add(1);
            if ended == Ended::Asleep {
                self.slept[bucket] = self.slept[bucket].saturating_add(1);
            }
        }
        self.since_choice += 1;
        if self.since_choice >= RETUNE_EVERY {
            self.window_ns = self.best_window();
            self.since_choice = 0;
            for count in self
                .gaps
                .iter_mut()
                .chain(&mut self.uncovered)
                .chain(&mut self.slept)
            {
                *count /= 2;
            }
        }
    }

    /// The chance, in parts per `u16::MAX`, that a gap in `bucket` sleeps:
    /// learned, or 1 when nothing is known.
    fn sleep_chance(&self, bucket: usize) -> i128 {
        let scale = i128::from(u16::MAX);
        match self.uncovered[bucket] {
            0 => scale,
            seen => i128::from(self.slept[bucket]) * scale / i128::from(seen),
        }
    }

    /// The candidate window with the best expected gain over the counted
    /// gaps, in ns (0 if none gains).
    fn best_window(&self) -> u64 {
        let mut best = (0i128, 0u64);
        // A window ending at bucket `edge`'s top catches buckets 0..=edge.
        for edge in 1..BUCKETS - 1 {
            let window = bounds_of(edge).1;
            if window > self.max_ns {
                break;
            }
            let gain: i128 = self
                .gaps
                .iter()
                .enumerate()
                .map(|(bucket, &count)| {
                    let (low, high) = bounds_of(bucket);
                    let count = i128::from(count);
                    let scale = i128::from(u16::MAX);
                    if bucket <= edge {
                        // Caught after about the bucket's middle, where it
                        // would have slept with the learned chance; a gap
                        // that would not have slept costs about what
                        // polling for it does.
                        let saved = i128::from(self.max_ns) * self.sleep_chance(bucket) / scale;
                        count * (saved - i128::from(low / 2 + high / 2))
                    } else {
                        -count * i128::from(window)
                    }
                })
                .sum();
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

    /// Records `gaps` `times` times, each ending as a sleep would have
    /// ended (asleep, or caught if the window covers it).
    fn after(poll: &mut PollWindow, gaps: &[u64], times: u32) {
        after_ending(poll, gaps, times, Ended::Asleep);
    }

    fn after_ending(poll: &mut PollWindow, gaps: &[u64], times: u32, uncovered: Ended) {
        for _ in 0..times {
            for &gap in gaps {
                let ended = if gap < poll.window_ns() {
                    Ended::Polling
                } else {
                    uncovered
                };
                poll.record_gap(gap, ended);
            }
        }
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
    fn gaps_longer_than_a_sleep_costs_keep_it_closed() {
        let mut poll = PollWindow::new(25 * US);
        after(&mut poll, &[40 * US, 300 * US, 5_000 * US], RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 0);
    }

    #[test]
    fn a_mix_polls_only_where_the_short_gaps_pay_for_the_long() {
        let mut poll = PollWindow::new(25 * US);
        // Most gaps short: polling 4 µs catches them, and the long one
        // wastes only 4 µs.
        after(&mut poll, &[3 * US, 3 * US, 3 * US, 900 * US], RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 4 * US);
        // Mostly long gaps: a 4 µs window would waste 4 µs three times for
        // each 22 µs it saves, still a gain; at one in ten it is not.
        let mut poll = PollWindow::new(25 * US);
        let mut mostly_long = vec![900 * US; 9];
        mostly_long.push(3 * US);
        after(&mut poll, &mostly_long, RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 0);
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
    fn gaps_that_never_sleep_keep_it_closed() {
        let mut poll = PollWindow::new(25 * US);
        after_ending(
            &mut poll,
            &[3 * US],
            RETUNE_EVERY * 4,
            Ended::BeforeSleeping,
        );
        assert_eq!(poll.window_ns(), 0);
    }

    #[test]
    fn caught_gaps_keep_the_chance_learned_before() {
        let mut poll = PollWindow::new(25 * US);
        after(&mut poll, &[3 * US], RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 4 * US);
        // Now every such gap is caught while polling: the window stays,
        // on the chance learned while it was closed.
        after(&mut poll, &[3 * US], RETUNE_EVERY * 3);
        assert_eq!(poll.window_ns(), 4 * US);
    }

    #[test]
    fn a_zero_maximum_never_polls() {
        let mut poll = PollWindow::new(0);
        after(&mut poll, &[0, US, 3 * US], RETUNE_EVERY);
        assert_eq!(poll.window_ns(), 0);
    }

    proptest! {
        /// Whatever the gaps, the window is 0 or a power-of-two number of
        /// µs no longer than the maximum, and a spell of gaps longer than
        /// the maximum closes it (within as many choices as halvings
        /// empty a bucket, plus one).
        #[test]
        fn the_window_stays_bounded_and_idling_closes_it(
            max_us in 0u64..1_000,
            gaps in proptest::collection::vec(0u64..2_000_000, 0..600),
        ) {
            let mut poll = PollWindow::new(max_us * US);
            for gap in gaps {
                let ended = if gap < poll.window_ns() { Ended::Polling } else { Ended::Asleep };
                poll.record_gap(gap, ended);
                let window = poll.window_ns();
                prop_assert!(window <= max_us * US);
                prop_assert!(window == 0 || (window / US).is_power_of_two());
            }
            after(&mut poll, &[max_us * US + 1], RETUNE_EVERY * 12);
            prop_assert_eq!(poll.window_ns(), 0);
        }
    }
}
