//! incr/decr arithmetic as memcached 1.6 does it (the stored value is
//! parsed by [`crate::protocol::common::parse_stored_number`]): a result
//! no longer than the old value is written in place, padded with spaces to
//! the old length.

use alloc::vec::Vec;

/// Applies incr (`incr`) or decr of `delta` to `current`.
pub fn apply(current: u64, incr: bool, delta: u64) -> u64 {
    if incr {
        current.wrapping_add(delta)
    } else {
        current.saturating_sub(delta)
    }
}

/// The decimal digits of `n`.
pub fn decimal(n: u64) -> Vec<u8> {
    let mut digits = Vec::with_capacity(20);
    crate::protocol::common::push_u64(&mut digits, n);
    digits
}

/// The new data of an item whose old data was `old_len` bytes long after
/// incr/decr produced `result`: in place (space-padded) when it fits.
pub fn new_value(result: u64, old_len: usize) -> Vec<u8> {
    let mut value = decimal(result);
    if value.len() <= old_len {
        value.resize(old_len, b' ');
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_padded_in_place() {
        assert_eq!(new_value(9, 2), b"9 ");
        assert_eq!(new_value(109, 2), b"109");
        assert_eq!(new_value(0, 1), b"0");
        assert_eq!(decimal(u64::MAX), b"18446744073709551615");
        assert_eq!(apply(3, false, 5), 0);
        assert_eq!(apply(u64::MAX, true, 2), 1);
    }
}
