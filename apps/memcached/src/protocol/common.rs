//! Helpers the request protocols share: key limits, memcached's number
//! parsing (`safe_strtoul` and friends, including their quirks), number
//! formatting, item sizing as memcached computes it, base64 keys, and
//! memcached's incr/decr.
//!
//! The text and meta protocols use everything here; the binary protocol
//! may too. The functions are stable: callers rely on their exact
//! behaviour, which mirrors memcached 1.6.18.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use crate::store::{expiry, Item, Store, Update, ITEM_OVERHEAD};

/// The longest key memcached accepts.
pub const KEY_MAX_LENGTH: usize = 250;

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

/// The size memcached's slab allocator charges for an item (its
/// `ITEM_ntotal`): header, key and its NUL, the flags if not zero, the
/// value and its CRLF, and the CAS value unless CAS is disabled.
pub fn item_total(key_len: usize, flags: u32, value_len: usize, cas_enabled: bool) -> usize {
    let suffix = if flags == 0 { 0 } else { 4 };
    let cas = if cas_enabled { 8 } else { 0 };
    ITEM_OVERHEAD
        .saturating_add(key_len + 1 + suffix + cas)
        .saturating_add(value_len)
        .saturating_add(2)
}

/// Whether memcached refuses an item as "too large for cache" with `-I`
/// set to `item_size_max`.
pub fn too_large(
    key_len: usize,
    flags: u32,
    value_len: usize,
    item_size_max: usize,
    cas_enabled: bool,
) -> bool {
    item_total(key_len, flags, value_len, cas_enabled) > item_size_max
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

/// Why an incr/decr did not apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeltaError {
    /// No live item.
    NotFound,
    /// The value is empty or not a decimal number below 2^64.
    NonNumeric,
    /// A CAS value was given and differs.
    Exists,
}

/// A successful incr/decr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delta {
    /// The new number.
    pub value: u64,
    /// The item's new CAS value.
    pub cas: u64,
    /// The item's expiry (Unix time, 0: never).
    pub expires: u32,
}

/// Parses a stored value as memcached's incr does (`safe_strtoull` on the
/// data, which is followed by CRLF in memcached's memory).
pub fn parse_stored_number(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    parse_u64(value)
}

/// memcached's `do_add_delta`: adds or subtracts `delta` (incr wraps at
/// 2^64, decr stops at 0). If the new number is not longer than the old
/// value, the value keeps its length, padded with spaces, as memcached's
/// in-place update does; otherwise the value is the number. Flags and
/// expiry are kept; the CAS value changes. `cas` (non-zero) must match.
pub fn add_delta(
    store: &Store,
    key: &[u8],
    now: u32,
    incr: bool,
    delta: u64,
    cas: u64,
) -> Result<Delta, DeltaError> {
    let (result, new_cas) = store.update(key, now, |current| {
        let Some(item) = current else {
            return Update::Keep(Err(DeltaError::NotFound));
        };
        if item.value.is_empty() {
            return Update::Keep(Err(DeltaError::NonNumeric));
        }
        if cas != 0 && item.cas != cas {
            return Update::Keep(Err(DeltaError::Exists));
        }
        let Some(old) = parse_stored_number(&item.value) else {
            return Update::Keep(Err(DeltaError::NonNumeric));
        };
        let value = if incr {
            old.wrapping_add(delta)
        } else {
            old.saturating_sub(delta)
        };
        let mut text = Vec::with_capacity(item.value.len().max(20));
        push_u64(&mut text, value);
        if text.len() <= item.value.len() {
            text.resize(item.value.len(), b' ');
        }
        let new = Item {
            flags: item.flags,
            expires: item.expires,
            cas: 0,
            stored: 0,
            value: IoBuf::from_vec(text),
        };
        Update::Put(new, Ok((value, item.expires)))
    });
    let (value, expires) = result?;
    Ok(Delta {
        value,
        cas: new_cas.unwrap_or(0),
        expires,
    })
}

/// What an append or prepend did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConcatResult {
    /// Stored, with this new CAS value.
    Stored(u64),
    /// No live item, or the joined item would be too large (memcached
    /// answers NOT_STORED for both).
    NotStored,
    /// A CAS value was given and differs.
    Exists,
}

/// memcached's append/prepend (`do_store_item`): joins `data` after (or
/// before) the live item's value, keeping its flags and expiry. A
/// non-zero `cas` must match. The joined item must fit in `-I` as
/// memcached sizes items.
pub fn concat(
    store: &Store,
    key: &[u8],
    data: &[u8],
    prepend: bool,
    cas: u64,
    now: u32,
    cas_enabled: bool,
) -> ConcatResult {
    let item_size_max = store.item_size_max();
    let (result, new_cas) = store.update(key, now, |current| {
        let Some(item) = current else {
            return Update::Keep(ConcatResult::NotStored);
        };
        if cas != 0 && item.cas != cas {
            return Update::Keep(ConcatResult::Exists);
        }
        let len = item.value.len() + data.len();
        if too_large(key.len(), item.flags, len, item_size_max, cas_enabled) {
            return Update::Keep(ConcatResult::NotStored);
        }
        let mut joined = Vec::with_capacity(len);
        let (first, second) = if prepend {
            (data, item.value.as_slice())
        } else {
            (item.value.as_slice(), data)
        };
        joined.extend_from_slice(first);
        joined.extend_from_slice(second);
        let new = Item {
            flags: item.flags,
            expires: item.expires,
            cas: 0,
            stored: 0,
            value: IoBuf::from_vec(joined),
        };
        Update::Put(new, ConcatResult::Stored(0))
    });
    match (result, new_cas) {
        (ConcatResult::Stored(_), Some(cas)) => ConcatResult::Stored(cas),
        (other, _) => other,
    }
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
    fn sizes_match_memcached() {
        // -I 1k: "k" with flags 0 fits up to 964 bytes.
        assert!(!too_large(1, 0, 964, 1024, true));
        assert!(too_large(1, 0, 965, 1024, true));
        assert!(too_large(1, 1, 961, 1024, true));
        assert_eq!(item_total(3, 0, 3, true), 65);
        assert_eq!(slab_class(65, 1 << 20), 1);
        assert_eq!(slab_class(97, 1 << 20), 2);
    }
}
