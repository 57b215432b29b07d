//! What to ask: key space, key and value sizes, the get/set mix.
//!
//! The Facebook ETC workload follows mutilate (`--keysize=fb_key
//! --valuesize=fb_value --update=0.033`): see the crate README for the
//! exact distributions and how they relate to the ETC paper.

use std::fmt;
use std::str::FromStr;

use crate::protocol::Op;

/// A small, fast pseudo-random generator (SplitMix64): no allocation, no
/// dependency, and good enough for workload choices.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in the open interval (0, 1): never 0, never 1.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (`n > 0`; Lemire's multiply-shift, bias < 2^-32
    /// for the key spaces used here).
    pub fn below(&mut self, n: u64) -> u64 {
        let wide = u128::from(self.next_u64()) * u128::from(n);
        u64::try_from(wide >> 64).unwrap_or(0)
    }

    /// Exponentially distributed with mean `mean`.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -self.unit().ln() * mean
    }
}

/// `x` rounded to the nearest integer and clamped to `lo..=hi`.
pub fn round_clamp(x: f64, lo: usize, hi: usize) -> usize {
    if x.is_nan() {
        return lo;
    }
    let r = x.round();
    if r <= lo as f64 {
        lo
    } else if r >= hi as f64 {
        hi
    } else {
        // `r` is a whole number strictly between two `usize`s.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let v = r as usize;
        v
    }
}

/// mutilate's ETC key-size distribution: a generalized extreme value
/// distribution (location, scale, shape).
pub const ETC_KEY_GEV: (f64, f64, f64) = (30.7984, 8.20449, 0.078688);

/// mutilate's ETC value-size table for values of 0..=14 bytes: (probability,
/// size). Values not chosen here come from [`ETC_VALUE_TAIL`].
pub const ETC_VALUE_TABLE: [(f64, usize); 15] = [
    (0.00536, 0),
    (0.00047, 1),
    (0.17820, 2),
    (0.09239, 3),
    (0.00018, 4),
    (0.02740, 5),
    (0.00065, 6),
    (0.00606, 7),
    (0.00023, 8),
    (0.00837, 9),
    (0.00837, 10),
    (0.08989, 11),
    (0.00092, 12),
    (0.00326, 13),
    (0.01980, 14),
];

/// The tail of mutilate's ETC value sizes as mutilate computes it: a
/// generalized Pareto with (location, scale, shape). mutilate writes
/// `GPareto(214.476, 0.348238)`, whose constructor takes (location, scale,
/// shape = 1), so the ETC paper's scale and shape become location and
/// scale; we reproduce what mutilate sends (see the README).
pub const ETC_VALUE_TAIL: (f64, f64, f64) = (214.476, 0.348238, 1.0);

/// The ETC paper's value tail (Atikoglu et al., SIGMETRICS 2012): generalized
/// Pareto with location 0, scale 214.476, shape 0.348238 (`--value-size
/// etc-paper`).
pub const ETC_PAPER_VALUE_TAIL: (f64, f64, f64) = (0.0, 214.476, 0.348238);

/// Largest value a size distribution may produce: below memcached's default
/// 1 MiB item limit with room for the key and item header. The ETC tails are
/// unbounded (mutilate's has an infinite mean); about 1 set in 10^6 is cut
/// here.
pub const MAX_VALUE_SIZE: usize = 500_000;

/// Largest memcached key.
pub const MAX_KEY_SIZE: usize = 250;

/// A size distribution for keys or values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeDist {
    /// Always this many bytes.
    Fixed(usize),
    /// Facebook ETC as mutilate implements it (`fb_key` / `fb_value`).
    Etc,
    /// Values only: the ETC paper's generalized Pareto tail (see
    /// [`ETC_PAPER_VALUE_TAIL`]).
    EtcPaper,
}

impl FromStr for SizeDist {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "etc" => Ok(SizeDist::Etc),
            "etc-paper" => Ok(SizeDist::EtcPaper),
            _ => s.parse::<usize>().map(SizeDist::Fixed).map_err(|_| {
                format!("'{s}' is not a size: give a number of bytes, 'etc' or 'etc-paper'")
            }),
        }
    }
}

impl fmt::Display for SizeDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeDist::Fixed(n) => write!(f, "{n}"),
            SizeDist::Etc => f.write_str("etc"),
            SizeDist::EtcPaper => f.write_str("etc-paper"),
        }
    }
}

/// A generalized extreme value sample for uniform `u` in (0, 1), as mutilate
/// computes it: `loc + scale * ((-ln u)^(-shape) - 1) / shape`.
pub fn gev(u: f64, (loc, scale, shape): (f64, f64, f64)) -> f64 {
    loc + scale * ((-u.ln()).powf(-shape) - 1.0) / shape
}

/// A generalized Pareto sample for uniform `u` in (0, 1):
/// `loc + scale * (u^(-shape) - 1) / shape`.
pub fn gpareto(u: f64, (loc, scale, shape): (f64, f64, f64)) -> f64 {
    loc + scale * (u.powf(-shape) - 1.0) / shape
}

/// FNV-1a over the 8 little-endian bytes of `x` (mutilate's `fnv_64`).
pub fn fnv64(x: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in x.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Number of decimal digits of `n` (1 for 0).
pub fn digits(n: u64) -> usize {
    let mut d = 1;
    let mut n = n / 10;
    while n > 0 {
        d += 1;
        n /= 10;
    }
    d
}

impl SizeDist {
    /// A value size drawn from this distribution.
    pub fn value_size(self, rng: &mut Rng) -> usize {
        match self {
            SizeDist::Fixed(n) => n.min(MAX_VALUE_SIZE),
            SizeDist::Etc | SizeDist::EtcPaper => {
                let u = rng.unit();
                let mut sum = 0.0;
                for &(p, size) in &ETC_VALUE_TABLE {
                    sum += p;
                    if u < sum {
                        return size;
                    }
                }
                let tail = if self == SizeDist::Etc {
                    ETC_VALUE_TAIL
                } else {
                    ETC_PAPER_VALUE_TAIL
                };
                // mutilate draws the tail with a fresh uniform.
                round_clamp(gpareto(rng.unit(), tail), 0, MAX_VALUE_SIZE)
            }
        }
    }

    /// The largest value size this distribution produces.
    pub fn max_value_size(self) -> usize {
        match self {
            SizeDist::Fixed(n) => n.min(MAX_VALUE_SIZE),
            SizeDist::Etc | SizeDist::EtcPaper => MAX_VALUE_SIZE,
        }
    }
}

/// Every key of the key space, built once: key `i` is `i` in decimal,
/// zero-padded to its length (as mutilate does), stored back to back.
#[derive(Debug, Clone)]
pub struct KeySpace {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl KeySpace {
    /// `count` keys with sizes from `dist`. For ETC the size of key `i` is
    /// drawn from the GEV with the uniform `fnv64(i) / 2^64` (so a key keeps
    /// its size across runs), at least as long as the digits of `count`, at
    /// most 250. A fixed size shorter than those digits is an error: the
    /// keys would not be distinct.
    pub fn new(count: u64, dist: SizeDist) -> Result<Self, String> {
        if count == 0 {
            return Err("the key space needs at least one key (--keys)".into());
        }
        let min = digits(count - 1);
        if let SizeDist::Fixed(n) = dist {
            if n < min || n > MAX_KEY_SIZE {
                return Err(format!(
                    "key size {n} cannot hold {count} distinct keys: give {min}..={MAX_KEY_SIZE}"
                ));
            }
        }
        if dist == SizeDist::EtcPaper {
            return Err("etc-paper is a value size distribution; use etc for keys".into());
        }
        let n = usize::try_from(count).map_err(|_| format!("{count} keys is too many"))?;
        let mut bytes = Vec::new();
        let mut ends = Vec::with_capacity(n);
        let mut scratch = Vec::with_capacity(24);
        for i in 0..count {
            let len = match dist {
                SizeDist::Fixed(n) => n,
                _ => {
                    let u = ((fnv64(i) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                    round_clamp(gev(u, ETC_KEY_GEV), min, MAX_KEY_SIZE)
                }
            };
            scratch.clear();
            crate::protocol::push_decimal(&mut scratch, i);
            bytes.resize(bytes.len() + len.saturating_sub(scratch.len()), b'0');
            bytes.extend_from_slice(&scratch);
            ends.push(bytes.len());
        }
        Ok(KeySpace { bytes, ends })
    }

    /// Key `i` (`i < len()`).
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no keys (never, once built).
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// The bytes every value is cut from (printable, so text dumps stay
/// readable).
pub fn value_bytes(max: usize) -> Vec<u8> {
    (0..max)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz0123456789"[i % 36])
        .collect()
}

/// The request stream of one thread: which operation, which key, how large
/// a value.
#[derive(Debug, Clone)]
pub struct OpGen {
    rng: Rng,
    keys: u64,
    only: Option<std::sync::Arc<[u64]>>,
    update: f64,
    values: SizeDist,
}

impl OpGen {
    /// Keys uniform in `0..keys`, a set with probability `update`, value
    /// sizes from `values`.
    pub fn new(seed: u64, keys: u64, update: f64, values: SizeDist) -> Self {
        OpGen {
            rng: Rng::new(seed),
            keys: keys.max(1),
            only: None,
            update,
            values,
        }
    }

    /// Keys uniform among `only` instead (a non-empty subset of the key
    /// space), when given.
    pub fn only(mut self, only: Option<std::sync::Arc<[u64]>>) -> Self {
        self.only = only.filter(|o| !o.is_empty());
        self
    }

    /// The next request: (operation, key index, value size; 0 for gets).
    pub fn next_op(&mut self) -> (Op, usize, usize) {
        let key = match &self.only {
            Some(only) => {
                let at = self.rng.below(crate::u64_of(only.len()));
                only[usize::try_from(at).unwrap_or(0)]
            }
            None => self.rng.below(self.keys),
        };
        let key = usize::try_from(key).unwrap_or(0);
        if self.update > 0.0 && self.rng.unit() < self.update {
            (Op::Set, key, self.values.value_size(&mut self.rng))
        } else {
            (Op::Get, key, 0)
        }
    }

    /// A value size for a preload set.
    pub fn value_size(&mut self) -> usize {
        self.values.value_size(&mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_is_open_and_below_is_in_range() {
        let mut r = Rng::new(1);
        for _ in 0..100_000 {
            let u = r.unit();
            assert!(u > 0.0 && u < 1.0);
            assert!(r.below(7) < 7);
        }
    }

    #[test]
    fn etc_keys_are_mostly_20_to_70_bytes_and_distinct() {
        let ks = KeySpace::new(10_000, SizeDist::Etc).expect("keys");
        let lens: Vec<usize> = (0..ks.len()).map(|i| ks.key(i).len()).collect();
        let in_range = lens.iter().filter(|&&l| (20..=70).contains(&l)).count();
        assert!(in_range > 9_600, "{in_range}");
        let mean = lens.iter().sum::<usize>() as f64 / lens.len() as f64;
        assert!((33.0..40.0).contains(&mean), "{mean}");
        let set: std::collections::HashSet<&[u8]> = (0..ks.len()).map(|i| ks.key(i)).collect();
        assert_eq!(set.len(), 10_000);
        assert!(ks.key(42).ends_with(b"42") && ks.key(42).iter().all(u8::is_ascii_digit));
        // Same sizes every time.
        let again = KeySpace::new(10_000, SizeDist::Etc).expect("keys");
        assert_eq!(again.key(9_999), ks.key(9_999));
    }

    #[test]
    fn fixed_keys() {
        let ks = KeySpace::new(100, SizeDist::Fixed(8)).expect("keys");
        assert_eq!(ks.key(7), b"00000007");
        assert!(
            matches!(KeySpace::new(1000, SizeDist::Fixed(2)), Err(e) if e.contains("cannot hold 1000 distinct keys"))
        );
        assert!(
            matches!(KeySpace::new(0, SizeDist::Fixed(8)), Err(e) if e.contains("needs at least one key"))
        );
    }

    #[test]
    fn etc_values_are_mostly_small() {
        let mut r = Rng::new(7);
        let n = 200_000;
        let sizes: Vec<usize> = (0..n).map(|_| SizeDist::Etc.value_size(&mut r)).collect();
        let tiny = sizes.iter().filter(|&&s| s <= 14).count() as f64 / n as f64;
        // The table's probabilities add up to 0.44155.
        assert!((tiny - 0.44155).abs() < 0.01, "{tiny}");
        let upto_1k = sizes.iter().filter(|&&s| s <= 1024).count() as f64 / n as f64;
        assert!(upto_1k > 0.99, "{upto_1k}");
        assert!(sizes.iter().all(|&s| s <= MAX_VALUE_SIZE));
        let paper: Vec<usize> = (0..n)
            .map(|_| SizeDist::EtcPaper.value_size(&mut r))
            .collect();
        let big = paper.iter().filter(|&&s| s > 1024).count() as f64 / n as f64;
        assert!(big > 0.01 && big < 0.06, "{big}");
    }

    #[test]
    fn a_key_subset_is_all_the_generator_picks() {
        let only: std::sync::Arc<[u64]> = vec![3, 17, 99].into();
        let mut g = OpGen::new(5, 100, 0.1, SizeDist::Fixed(10)).only(Some(only));
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..10_000 {
            seen.insert(g.next_op().1);
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [3, 17, 99]);
    }

    #[test]
    fn update_ratio_is_respected() {
        let mut g = OpGen::new(3, 100, 0.033, SizeDist::Fixed(10));
        let n = 300_000;
        let sets = (0..n).filter(|_| g.next_op().0 == Op::Set).count() as f64;
        assert!((sets / n as f64 - 0.033).abs() < 0.002);
        let mut g = OpGen::new(3, 100, 0.0, SizeDist::Fixed(10));
        assert!((0..1000).all(|_| g.next_op().0 == Op::Get));
    }

    #[test]
    fn size_parsing() {
        assert_eq!("etc".parse::<SizeDist>(), Ok(SizeDist::Etc));
        assert_eq!("32".parse::<SizeDist>(), Ok(SizeDist::Fixed(32)));
        assert!(matches!("big".parse::<SizeDist>(), Err(e) if e.contains("is not a size")));
        assert_eq!(SizeDist::Fixed(5).to_string(), "5");
    }
}
