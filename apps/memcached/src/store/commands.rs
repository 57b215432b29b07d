//! The store commands' outcomes (see the parent module's "Store outcomes"
//! and "The size rule"): set, add, replace, append, prepend and cas as
//! memcached 1.6.18's `do_store_item` decides them, incr and decr as its
//! `do_add_delta` does.

use alloc::vec::Vec;

use ebb_iobuf::IoBuf;

use super::{ArithError, Item, SetMode, SetResult, Store, Update};
use crate::protocol::common::{parse_u64, push_u64};

/// What a store command asks to store.
#[derive(Clone, Debug)]
pub struct NewItem {
    /// The client's flags (append and prepend keep the old item's).
    pub flags: u32,
    /// Unix expiry time, 0: never (append and prepend keep the old one).
    pub expires: u32,
    /// The data.
    pub value: IoBuf,
    /// The client's CAS value, 0: none. Compared by [`SetMode::Cas`],
    /// [`SetMode::Append`] and [`SetMode::Prepend`]; ignored with CAS
    /// disabled.
    pub cas: u64,
    /// Meta set's `I`: a [`SetMode::Cas`] store with a CAS value older
    /// than the item's still stores, as a stale item that keeps the old
    /// expiry (memcached's `CAS_STALE`, for a recache that lost the race
    /// with an invalidation).
    pub allow_stale: bool,
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
/// data, which is followed by CRLF in memcached's memory): an empty value
/// is not a number.
pub fn parse_stored_number(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    parse_u64(value)
}

/// The data of an item after incr/decr wrote `number` over `old_len`
/// bytes of data: in place, padded with spaces, when it fits (memcached
/// writes it into the old item); otherwise just the digits (a new item).
/// Says which.
fn delta_value(number: u64, old_len: usize) -> (Vec<u8>, bool) {
    let mut text = Vec::with_capacity(old_len.max(20));
    push_u64(&mut text, number);
    let in_place = text.len() <= old_len;
    if in_place {
        text.resize(old_len, b' ');
    }
    (text, in_place)
}

impl Store {
    /// `set`, `add`, `replace`, `append`, `prepend` and `cas`: stores
    /// `new` under `key` as `mode` asks, or says why not. An item the
    /// size rule refuses is `TooLarge` or `OutOfMemory`, and a refused
    /// `set` also drops the old item (memcached: "avoid stale data
    /// persisting in cache because we failed alloc").
    pub fn set(&self, mode: SetMode, key: &[u8], new: NewItem, now: u32) -> SetResult {
        if let Err(refused) = self.admit(key.len(), new.flags, new.value.len()) {
            if mode == SetMode::Set {
                self.delete(key, None, now);
            }
            return match refused {
                super::Refused::TooLarge => SetResult::TooLarge,
                super::Refused::NoMemory => SetResult::OutOfMemory,
            };
        }
        let client_cas = self.shown_cas(new.cas);
        let matches = |item: &Item| client_cas != 0 && client_cas == self.shown_cas(item.cas);
        let put = |value: IoBuf, flags, expires, stale| {
            let item = Item {
                flags,
                expires,
                cas: 0,
                stored: 0,
                value,
                stale,
            };
            Update::Put(item, SetResult::Stored(0))
        };
        let older = |item: &Item| {
            new.allow_stale && client_cas != 0 && client_cas < self.shown_cas(item.cas)
        };
        let (result, cas) = self.update(key, now, |current| match (mode, current) {
            (SetMode::Set, _) | (SetMode::Add, None) | (SetMode::Replace, Some(_)) => {
                put(new.value, new.flags, new.expires, false)
            }
            (SetMode::Add, Some(_))
            | (SetMode::Replace | SetMode::Append | SetMode::Prepend, None) => {
                Update::Keep(SetResult::NotStored)
            }
            (SetMode::Cas, None) => Update::Keep(SetResult::NotFound),
            (SetMode::Cas, Some(item)) if matches(item) => {
                put(new.value, new.flags, new.expires, false)
            }
            (SetMode::Cas, Some(item)) if older(item) => {
                put(new.value, new.flags, item.expires, true)
            }
            (SetMode::Cas, Some(_)) => Update::Keep(SetResult::Exists),
            (SetMode::Append | SetMode::Prepend, Some(item)) => {
                if client_cas != 0 && !matches(item) {
                    return Update::Keep(SetResult::Exists);
                }
                let len = item.value.len() + new.value.len();
                if self.admit(key.len(), item.flags, len).is_err() {
                    // memcached cannot allocate the joined item: NOT_STORED.
                    return Update::Keep(SetResult::NotStored);
                }
                let (first, second) = if mode == SetMode::Append {
                    (item.value.as_slice(), new.value.as_slice())
                } else {
                    (new.value.as_slice(), item.value.as_slice())
                };
                let mut joined = Vec::new();
                if joined.try_reserve_exact(len).is_err() {
                    // As above: memcached's `do_item_alloc` failed.
                    return Update::Keep(SetResult::NotStored);
                }
                joined.extend_from_slice(first);
                joined.extend_from_slice(second);
                put(IoBuf::from_vec(joined), item.flags, item.expires, false)
            }
        });
        match (result, cas) {
            (SetResult::Stored(_), Some(cas)) => SetResult::Stored(cas),
            (other, _) => other,
        }
    }

    /// incr (`incr`) or decr of `delta` on the number stored under `key`:
    /// incr wraps at 2^64, decr stops at 0. A result no longer than the
    /// old value is written in place, padded with spaces to the old length
    /// (not a new item); a longer one makes a new item of just the digits.
    /// Flags and expiry are kept; the CAS value changes. A non-zero `cas`
    /// must match. A missing item is `NotFound`: creating it (binary
    /// incr's initial value, meta's `N`) is an `add`, as in memcached.
    pub fn add_delta(
        &self,
        key: &[u8],
        incr: bool,
        delta: u64,
        cas: u64,
        now: u32,
    ) -> Result<Delta, ArithError> {
        let (result, new_cas) = self.update(key, now, |current| {
            let Some(item) = current else {
                return Update::Keep(Err(ArithError::NotFound));
            };
            if item.value.is_empty() {
                return Update::Keep(Err(ArithError::NonNumeric));
            }
            if cas != 0 && cas != self.shown_cas(item.cas) {
                return Update::Keep(Err(ArithError::Exists));
            }
            let Some(old) = parse_stored_number(&item.value) else {
                return Update::Keep(Err(ArithError::NonNumeric));
            };
            let number = if incr {
                old.wrapping_add(delta)
            } else {
                old.saturating_sub(delta)
            };
            let (value, in_place) = delta_value(number, item.value.len());
            let new = Item {
                flags: item.flags,
                expires: item.expires,
                cas: 0,
                stored: 0,
                value: IoBuf::from_vec(value),
                // memcached writes a result that fits into the old item,
                // which stays stale if it was.
                stale: in_place && item.stale,
            };
            let result = Ok((number, item.expires));
            if in_place {
                Update::Modify(new, result)
            } else {
                Update::Put(new, result)
            }
        });
        let (value, expires) = result?;
        Ok(Delta {
            value,
            cas: new_cas.unwrap_or(0),
            expires,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_results_are_padded_in_place_when_they_fit() {
        assert_eq!(delta_value(9, 2), (b"9 ".to_vec(), true));
        assert_eq!(delta_value(109, 2), (b"109".to_vec(), false));
        assert_eq!(delta_value(0, 1), (b"0".to_vec(), true));
        assert_eq!(parse_stored_number(b""), None);
        assert_eq!(parse_stored_number(b"12 "), Some(12));
    }
}
