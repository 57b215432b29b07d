//! Sequence number arithmetic modulo 2^32 (RFC 9293 §3.4).
//!
//! Sequence numbers wrap, so `a < b` means "b is less than 2^31 ahead of
//! a", computed from the signed difference (RFC 9293 §3.4: "all arithmetic
//! dealing with sequence numbers must be performed modulo 2**32").

use core::cmp::Ordering;
use core::fmt;

/// A TCP sequence (or acknowledgment) number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Seq(pub u32);

impl Seq {
    /// `self + n` modulo 2^32 (`n` is at most 2^31 in any valid use).
    #[must_use]
    pub fn wrapping_add(self, n: usize) -> Seq {
        Seq(self.0.wrapping_add(truncate(n)))
    }

    /// Bytes from `earlier` to `self`; zero if `earlier` is ahead.
    #[must_use]
    pub fn since(self, earlier: Seq) -> usize {
        let diff = self.0.wrapping_sub(earlier.0);
        if diff > 0x7fff_ffff {
            0
        } else {
            usize::try_from(diff).unwrap_or(0)
        }
    }

    /// The signed distance from `other` to `self`.
    fn diff(self, other: Seq) -> i32 {
        // Reinterpreting the wrapped difference as signed is the RFC's
        // comparison modulo 2^32.
        i32::from_ne_bytes(self.0.wrapping_sub(other.0).to_ne_bytes())
    }

    /// `self < other` modulo 2^32.
    #[must_use]
    pub fn lt(self, other: Seq) -> bool {
        self.diff(other) < 0
    }

    /// `self <= other` modulo 2^32.
    #[must_use]
    pub fn le(self, other: Seq) -> bool {
        self.diff(other) <= 0
    }

    /// `self > other` modulo 2^32.
    #[must_use]
    pub fn gt(self, other: Seq) -> bool {
        self.diff(other) > 0
    }

    /// `self >= other` modulo 2^32.
    #[must_use]
    pub fn ge(self, other: Seq) -> bool {
        self.diff(other) >= 0
    }

    /// The later of two sequence numbers.
    #[must_use]
    pub fn max(self, other: Seq) -> Seq {
        if self.ge(other) {
            self
        } else {
            other
        }
    }

    /// Compares modulo 2^32 (only meaningful within 2^31 of each other).
    #[must_use]
    pub fn cmp_wrapping(self, other: Seq) -> Ordering {
        self.diff(other).cmp(&0)
    }
}

/// The low 32 bits of a length (segment lengths and windows fit in 31).
fn truncate(n: usize) -> u32 {
    u32::try_from(n & 0xffff_ffff).unwrap_or(u32::MAX)
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::Seq;

    #[test]
    fn comparisons_wrap_around() {
        let near_end = Seq(u32::MAX - 10);
        let wrapped = near_end.wrapping_add(20);
        assert_eq!(wrapped, Seq(9));
        assert!(near_end.lt(wrapped));
        assert!(wrapped.gt(near_end));
        assert_eq!(wrapped.since(near_end), 20);
        assert_eq!(near_end.since(wrapped), 0);
        assert!(wrapped.le(wrapped) && wrapped.ge(wrapped));
        assert_eq!(near_end.max(wrapped), wrapped);
    }
}
