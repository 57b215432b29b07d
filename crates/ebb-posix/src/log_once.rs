//! "Once per call number": which unserved system calls have been logged.
//! A C program that calls something unserved in a loop must not flood
//! the console, and the first time must be said (issue 18).
//!
//! One bit per number below [`TRACKED`] (x86_64's highest is 450); every
//! number at or above it (none is a real x86_64 call: the x32 ABI's set
//! bit 30) shares one more bit, so the first such call is logged and the
//! rest are answered silently.

use core::sync::atomic::{AtomicU64, Ordering};

/// Numbers with a bit of their own.
pub const TRACKED: usize = 512;

const WORDS: usize = TRACKED / 64 + 1;

/// Which numbers have been logged: one bit each, and bit 0 of the extra
/// last word for every number at or above [`TRACKED`].
pub struct LoggedCalls {
    bits: [AtomicU64; WORDS],
}

impl LoggedCalls {
    /// None logged yet.
    #[must_use]
    pub const fn new() -> LoggedCalls {
        LoggedCalls {
            bits: [const { AtomicU64::new(0) }; WORDS],
        }
    }

    /// Whether `number` is logged now for the first time (marks it):
    /// exactly one caller gets `true` per number, even when threads race.
    pub fn first_time(&self, number: usize) -> bool {
        let index = number.min(TRACKED);
        let mask = 1u64 << (index % 64);
        let previous = self.bits[index / 64].fetch_or(mask, Ordering::Relaxed);
        previous & mask == 0
    }
}

impl Default for LoggedCalls {
    fn default() -> Self {
        LoggedCalls::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_number_is_first_once() {
        let logged = LoggedCalls::new();
        assert!(logged.first_time(163));
        assert!(!logged.first_time(163));
        assert!(logged.first_time(0));
        assert!(logged.first_time(511));
        assert!(!logged.first_time(511));
    }

    #[test]
    fn numbers_past_the_table_share_one_bit() {
        let logged = LoggedCalls::new();
        assert!(logged.first_time(TRACKED));
        assert!(!logged.first_time(0x4000_0000));
        assert!(!logged.first_time(usize::MAX));
        assert!(logged.first_time(TRACKED - 1));
    }
}
