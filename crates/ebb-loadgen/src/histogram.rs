//! Latency histogram: log-linear buckets (HDR style) in nanoseconds.
//!
//! A value keeps its top 8 significant bits: values below 256 ns are exact,
//! and above that a bucket is at most 1/128 of its value wide, so any
//! reported percentile is within 0.4 % of a recorded value (the bucket's
//! middle is reported). The range reaches 60 s; longer values land in the
//! last bucket and are counted in [`Histogram::overflows`]. Exact minimum,
//! maximum and sum are kept beside the buckets.

/// Sub-bucket bits: 2^7 = 128 linear steps per power of two.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Largest value with its own bucket: 60 s in nanoseconds.
pub const MAX_NS: u64 = 60_000_000_000;

/// The bucket of `v` (ns).
fn index(v: u64) -> usize {
    let i = if v < 2 * SUB {
        v
    } else {
        let shift = u64::from(63 - v.leading_zeros() - SUB_BITS);
        shift * SUB + (v >> shift)
    };
    // At most index(MAX_NS) (a few thousand).
    usize::try_from(i).unwrap_or(usize::MAX)
}

/// The lowest value of bucket `i` and its width.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB {
        (i, 1)
    } else {
        let shift = i / SUB - 1;
        let top = i - shift * SUB;
        (top << shift, 1 << shift)
    }
}

/// A latency histogram; see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    overflows: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram (about 30 KiB).
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; index(MAX_NS) + 1],
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
            overflows: 0,
        }
    }

    /// Records one value in nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let i = if ns > MAX_NS {
            self.overflows += 1;
            self.counts.len() - 1
        } else {
            index(ns)
        };
        self.counts[i] += 1;
        self.count += 1;
        self.sum += u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.overflows += other.overflows;
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Values above 60 s (counted in the last bucket).
    pub fn overflows(&self) -> u64 {
        self.overflows
    }

    /// The exact mean (ns); 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The exact smallest value (ns); 0 when empty.
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// The exact largest value (ns); 0 when empty.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value at percentile `p` (0..=100): the middle of the bucket
    /// holding the ceil(p/100 * count)-th smallest value, clamped to the
    /// exact min and max (exact for the first and last values); 0 when empty.
    pub fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let p = if p.is_nan() {
            100.0
        } else {
            p.clamp(0.0, 100.0)
        };
        let rank_f = (p / 100.0 * self.count as f64).ceil().max(1.0);
        // `rank_f` is in 1..=count.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rank = (rank_f as u64).min(self.count);
        if rank == self.count {
            return self.max;
        }
        if rank == 1 {
            return self.min;
        }
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = bucket_range(i);
                return (lo + width / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_with_bounded_error() {
        let mut prev = 0;
        for v in (0..5000u64).chain((1..4000).map(|i| i * 15_000_017)) {
            let v = v.min(MAX_NS);
            let i = index(v);
            assert!(i >= prev || v < 5000, "monotone at {v}");
            prev = i;
            let (lo, width) = bucket_range(i);
            assert!(lo <= v && v < lo + width, "{v} in [{lo}, +{width})");
            assert!(width == 1 || (width as f64) / (lo as f64) <= 1.0 / 128.0 + 1e-12);
        }
        assert!(index(MAX_NS) < 4000);
    }

    #[test]
    fn percentiles_of_a_known_set() {
        let mut h = Histogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000); // 1 µs .. 10 ms
        }
        assert_eq!(h.count(), 10_000);
        let near = |got: u64, want: f64| (got as f64 - want).abs() / want < 0.01;
        assert!(
            near(h.percentile(50.0), 5_000_000.0),
            "{}",
            h.percentile(50.0)
        );
        assert!(
            near(h.percentile(99.0), 9_900_000.0),
            "{}",
            h.percentile(99.0)
        );
        assert!(near(h.percentile(99.9), 9_990_000.0));
        assert_eq!(h.percentile(100.0), 10_000_000);
        assert_eq!(h.percentile(0.0), 1000);
        assert!((h.mean() - 5_000_500.0).abs() < 1.0);
        assert_eq!((h.min(), h.max()), (1000, 10_000_000));
    }

    #[test]
    fn merge_overflow_and_empty() {
        let mut a = Histogram::new();
        assert_eq!(
            (a.percentile(99.0), a.mean(), a.min(), a.max()),
            (0, 0.0, 0, 0)
        );
        a.record(5);
        let mut b = Histogram::new();
        b.record(MAX_NS * 2);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.overflows(), 1);
        assert_eq!(a.max(), MAX_NS * 2);
        assert_eq!(a.percentile(50.0), 5);
    }
}
