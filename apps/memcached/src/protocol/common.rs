//! Helpers the request protocols share: key limits, memcached's number
//! parsing (`safe_strtoul` and friends, including their quirks), number
//! formatting, slab classes as memcached computes them, and base64 keys.
//! What a command does to the store is the store's to decide
//! ([`crate::store`]).
//!
//! The text and meta protocols use everything here; the binary protocol
//! may too. The functions are stable: callers rely on their exact
//! behaviour, which mirrors memcached 1.6.18.

use alloc::vec::Vec;

use crate::store::{expiry, ITEM_OVERHEAD};

/// The longest key memcached accepts.
pub const KEY_MAX_LENGTH: usize = 250;

/// Values up to this many bytes are copied into a reply's own buffer,
/// beside their header; longer ones are chained as the stored buffer
/// itself. Each segment of a reply costs the chain and the send path more
/// instructions (pushed, sent, acknowledged, trimmed) than copying a
/// kilobyte does: a text get of a small value was three segments and
/// END, now one; a binary GET two, now one (issue 20, `./ebb bench
/// insns`).
pub const COPIED_VALUE_LIMIT: usize = 1024;

/// Whether `key` is a valid length for memcached (1 to 250 bytes).
pub fn key_ok(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= KEY_MAX_LENGTH
}

/// C's `isspace` in the "C" locale.
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// What C's `strtoull` family read: the magnitude (before applying a
/// minus sign), whether there was a minus sign, whether it overflowed
/// 64 bits, and where it stopped.
struct Scanned {
    magnitude: u64,
    negative: bool,
    overflow: bool,
    end: usize,
}

/// Scans like C's `strto*` in base 10: leading white space, an optional
/// sign, digits. `None` if no digit was found.
fn scan(text: &[u8]) -> Option<Scanned> {
    let mut i = text.iter().take_while(|&&b| is_c_space(b)).count();
    let mut negative = false;
    if let Some(&sign @ (b'+' | b'-')) = text.get(i) {
        negative = sign == b'-';
        i += 1;
    }
    let start = i;
    let mut magnitude: u64 = 0;
    let mut overflow = false;
    while let Some(digit) = text.get(i).filter(|b| b.is_ascii_digit()) {
        match magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(digit - b'0')))
        {
            Some(m) => magnitude = m,
            None => overflow = true,
        }
        i += 1;
    }
    (i > start).then_some(Scanned {
        magnitude,
        negative,
        overflow,
        end: i,
    })
}

/// memcached accepts a number only if it is followed by the end of the
/// token (C's terminating NUL) or by white space.
fn ends_well(text: &[u8], end: usize) -> bool {
    text.get(end).is_none_or(|&b| b == 0 || is_c_space(b))
}

/// memcached's `safe_strtoull`: a 64-bit unsigned decimal. Like C, a
/// minus sign negates modulo 2^64, and the result is refused only if it
/// then looks negative as a signed number.
pub fn parse_u64(text: &[u8]) -> Option<u64> {
    let scanned = scan(text)?;
    if scanned.overflow || !ends_well(text, scanned.end) {
        return None;
    }
    let value = if scanned.negative {
        scanned.magnitude.wrapping_neg()
    } else {
        scanned.magnitude
    };
    if value > u64::MAX >> 1 && text.contains(&b'-') {
        return None;
    }
    Some(value)
}

/// memcached's `safe_strtoul` on 64-bit Linux: parsed as an unsigned
/// long (64 bits), then stored in 32 bits (truncated, as C does).
pub fn parse_u32(text: &[u8]) -> Option<u32> {
    parse_u64(text).map(low_u32)
}

/// memcached's `safe_strtol` on 64-bit Linux: parsed as a long (64 bits,
/// refused if out of range), then stored in 32 bits (truncated).
pub fn parse_i32(text: &[u8]) -> Option<i32> {
    let scanned = scan(text)?;
    if scanned.overflow || !ends_well(text, scanned.end) {
        return None;
    }
    let limit = if scanned.negative {
        1 << 63
    } else {
        u64::MAX >> 1
    };
    if scanned.magnitude > limit {
        return None;
    }
    let bits = if scanned.negative {
        scanned.magnitude.wrapping_neg()
    } else {
        scanned.magnitude
    };
    Some(i32::from_ne_bytes(low_u32(bits).to_ne_bytes()))
}

fn low_u32(value: u64) -> u32 {
    u32::try_from(value & u64::from(u32::MAX)).unwrap_or(u32::MAX)
}

/// Appends `value` in decimal.
pub fn push_u64(out: &mut Vec<u8>, value: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = value;
    loop {
        at -= 1;
        // `rest % 10` is below 10, so it fits in a byte.
        digits[at] = b'0' + u8::try_from(rest % 10).unwrap_or(0);
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `value` in decimal, with a minus sign if negative.
pub fn push_i64(out: &mut Vec<u8>, value: i64) {
    if value < 0 {
        out.push(b'-');
    }
    push_u64(out, value.unsigned_abs());
}

/// A client's 32-bit expiry time (negative: already expired; up to 30
/// days: relative; otherwise a Unix time) as the store's Unix time.
pub fn expires_at(exptime: i32, now: u32) -> u32 {
    expiry(i64::from(exptime), now)
}

/// The slab class memcached would store an item of `total` bytes in,
/// with its default growth factor (1.25) and the largest slab chunk
/// `min(item_size_max, 512 KiB)`.
pub fn slab_class(total: usize, item_size_max: usize) -> u32 {
    let chunk_max = item_size_max.min(512 * 1024);
    let mut size = ITEM_OVERHEAD + 48;
    let mut class = 1;
    // Sizes grow by 5/4, aligned to 8, up to chunk_max / 1.25.
    while size.saturating_mul(5) <= chunk_max.saturating_mul(4) {
        if total <= size {
            return class;
        }
        class += 1;
        size = (size * 5 / 4).next_multiple_of(8);
    }
    class
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Encodes `data` in standard base64 with padding (as memcached prints
/// binary keys).
pub fn base64_encode(data: &[u8], out: &mut Vec<u8>) {
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                let index = usize::try_from((n >> (18 - 6 * i)) & 63).unwrap_or(0);
                out.push(BASE64[index]);
            } else {
                out.push(b'=');
            }
        }
    }
}

fn base64_value(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        b'=' => Some(0),
        _ => None,
    }
}

/// Decodes base64 as memcached does: bytes outside the alphabet are
/// skipped, the count of the others must be a multiple of 4, and `=`
/// ends the data. `None` where memcached's decoder returns 0 (failure).
pub fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    let count = text.iter().filter(|&&b| base64_value(b).is_some()).count();
    if count == 0 || count % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(count / 4 * 3);
    let mut block = [0u8; 4];
    let mut filled = 0;
    let mut pad = 0;
    for &b in text {
        let Some(v) = base64_value(b) else { continue };
        if b == b'=' {
            pad += 1;
        }
        block[filled] = v;
        filled += 1;
        if filled == 4 {
            out.push((block[0] << 2) | (block[1] >> 4));
            out.push((block[1] << 4) | (block[2] >> 2));
            out.push((block[2] << 6) | block[3]);
            filled = 0;
            if pad > 0 {
                if pad > 2 {
                    return None;
                }
                out.truncate(out.len() - pad);
                break;
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_parse_like_memcached() {
        assert_eq!(parse_u32(b"4294967296"), Some(0));
        assert_eq!(parse_u32(b"-1"), None);
        assert_eq!(parse_u32(b"-0"), Some(0));
        assert_eq!(parse_u32(b"5\t"), Some(5));
        assert_eq!(parse_u32(b"5x"), None);
        assert_eq!(parse_u32(b""), None);
        assert_eq!(parse_i32(b"4294967297"), Some(1));
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"9223372036854775808"), None);
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-18446744073709551615"), Some(1));
        assert_eq!(parse_u64(b" +7"), Some(7));
    }

    #[test]
    fn base64_round_trips_and_skips_junk() {
        let mut out = Vec::new();
        base64_encode(b"foobar", &mut out);
        assert_eq!(out, b"Zm9vYmFy");
        out.clear();
        base64_encode(b"fo", &mut out);
        assert_eq!(out, b"Zm8=");
        assert_eq!(base64_decode(b"Zm9v!").as_deref(), Some(&b"foo"[..]));
        assert_eq!(base64_decode(b"Zm8=").as_deref(), Some(&b"fo"[..]));
        assert_eq!(base64_decode(b"foo"), None);
        assert_eq!(base64_decode(b"===="), None);
    }

    #[test]
    fn slab_classes_match_memcached() {
        assert_eq!(slab_class(65, 1 << 20), 1);
        assert_eq!(slab_class(97, 1 << 20), 2);
    }
}
