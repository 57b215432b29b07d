//! The item store: key → item, shared by every core.
//!
//! Every core reads the table without locks (an RCU hash map from
//! `ebb-event`); writers lock one stripe of buckets. LRU bookkeeping is a
//! per-item last-access time that a read updates only when it is more than
//! a second old, so reads of hot keys do not all write the same cache line;
//! eviction samples a few items and evicts the least recently used one
//! (approximated LRU, as Redis does), which needs no shared list that every
//! read would have to relink.
//!
//! Semantics follow memcached 1.6: expiry times up to 30 days are relative,
//! larger ones are Unix times, negative ones mean "already expired";
//! `flush_all` invalidates items stored at or before its time; every
//! successful store gets a fresh CAS value.

use alloc::boxed::Box;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ebb_event::rcu::try_read;
use ebb_event::rcu_map::{MapUpdate, RcuHashMap};
use ebb_iobuf::IoBuf;

/// memcached's boundary between relative and absolute expiry times.
pub const RELATIVE_EXPIRY_MAX: i64 = 60 * 60 * 24 * 30;

/// Bytes memcached charges per item beyond key and value (its item header);
/// used for `-m` accounting and `stats bytes`.
pub const ITEM_OVERHEAD: usize = 48;

/// A stored item. Cloning it clones a reference to the value (no copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The client's opaque flags.
    pub flags: u32,
    /// Unix time it expires at; 0: never.
    pub expires: u32,
    /// Compare-and-swap value.
    pub cas: u64,
    /// When it was stored (Unix time), for `flush_all`.
    pub stored: u32,
    /// The data.
    pub value: IoBuf,
}

/// How `set` and friends treat an existing item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetMode {
    /// Store unconditionally.
    Set,
    /// Store only if absent.
    Add,
    /// Store only if present.
    Replace,
    /// Add the data after the existing value (flags and expiry kept).
    Append,
    /// Add the data before the existing value.
    Prepend,
    /// Store only if present with this CAS value.
    Cas(u64),
}

/// What a store command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetResult {
    /// Stored, with its new CAS value.
    Stored(u64),
    /// The mode's condition failed (add of a present key, replace/append of
    /// an absent one).
    NotStored,
    /// `cas` found a different CAS value.
    Exists,
    /// `cas` found no item.
    NotFound,
    /// The value is larger than `-I`.
    TooLarge,
    /// The item cannot fit in `-m` even after eviction.
    OutOfMemory,
}

/// What a delete did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteResult {
    /// Removed.
    Deleted,
    /// No such item.
    NotFound,
    /// The CAS value given did not match.
    Exists,
}

/// Why incr/decr failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithError {
    /// No such item (and no initial value to create it with).
    NotFound,
    /// The value is not a decimal number below 2^64.
    NonNumeric,
    /// `cas` given and different.
    Exists,
}

/// What an `update` closure decides.
pub enum Update<R> {
    /// Leave the item as it is.
    Keep(R),
    /// Store this item (its `cas` and `stored` are assigned by the store).
    Put(Item, R),
    /// Remove the item.
    Remove(R),
}

/// Counters the `stats` command reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Items now.
    pub curr_items: u64,
    /// Items ever stored.
    pub total_items: u64,
    /// Bytes charged now.
    pub bytes: u64,
    /// Items evicted to make room.
    pub evictions: u64,
    /// Items found expired.
    pub expired: u64,
}

/// Converts a client's expiry time to a Unix time (0: never).
pub fn expiry(exptime: i64, now: u32) -> u32 {
    if exptime == 0 {
        0
    } else if exptime < 0 {
        // Already expired.
        1
    } else if exptime > RELATIVE_EXPIRY_MAX {
        u32::try_from(exptime).unwrap_or(u32::MAX).max(1)
    } else {
        now.saturating_add(u32::try_from(exptime).unwrap_or(u32::MAX))
    }
}

/// What the table holds per key.
struct Entry {
    item: Item,
    /// Unix time of the last read or write (for LRU eviction).
    last_access: AtomicU32,
}

/// How many items eviction looks at to pick the least recently used.
const EVICTION_SAMPLE: usize = 16;

/// How many evictions one store may do before giving up.
const EVICTION_ATTEMPTS: usize = 64;

/// The store. Thread-safe; shared by all cores.
pub struct Store {
    map: RcuHashMap<Box<[u8]>, Entry>,
    memory_limit: usize,
    item_size_max: usize,
    next_cas: AtomicU64,
    /// `flush_all` with a delay: items stored at or before this Unix time
    /// are invalid once it has come (memcached's `oldest_live`); 0: none.
    oldest_live: AtomicU64,
    /// `flush_all` now: items with a CAS value up to this are invalid
    /// (memcached's `oldest_cas`, so that sets in the same second as the
    /// flush survive it).
    oldest_cas: AtomicU64,
    bytes: AtomicU64,
    total_items: AtomicU64,
    evictions: AtomicU64,
    expired: AtomicU64,
    /// Where the next eviction sample starts.
    sample_cursor: AtomicUsize,
}

fn charge(key: &[u8], item: &Item) -> u64 {
    u64::try_from(key.len() + item.value.len() + ITEM_OVERHEAD).unwrap_or(u64::MAX)
}

impl Store {
    /// An empty store for `memory_limit` bytes of items, each value at
    /// most `item_size_max` bytes. The table has a bucket per 256 bytes of
    /// memory limit (short chains for small items, no resizing).
    pub fn new(memory_limit: usize, item_size_max: usize) -> Self {
        Store {
            map: RcuHashMap::with_buckets((memory_limit / 256).clamp(1024, 1 << 24)),
            memory_limit,
            item_size_max,
            next_cas: AtomicU64::new(1),
            oldest_live: AtomicU64::new(0),
            oldest_cas: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            total_items: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            sample_cursor: AtomicUsize::new(0),
        }
    }

    /// The largest value accepted.
    pub fn item_size_max(&self) -> usize {
        self.item_size_max
    }

    /// The memory limit (`-m`), in bytes.
    pub fn memory_limit(&self) -> usize {
        self.memory_limit
    }

    fn live(&self, item: &Item, now: u32) -> bool {
        let expired = item.expires != 0 && item.expires <= now;
        let oldest_live = self.oldest_live.load(Ordering::Relaxed);
        let flushed_later = oldest_live != 0
            && u64::from(item.stored) <= oldest_live
            && oldest_live <= u64::from(now);
        let flushed_now = item.cas <= self.oldest_cas.load(Ordering::Relaxed);
        !expired && !flushed_later && !flushed_now
    }

    fn next_cas(&self) -> u64 {
        self.next_cas.fetch_add(1, Ordering::Relaxed)
    }

    /// The live item under `key` (a reference to its value, not a copy).
    pub fn get(&self, key: &[u8], now: u32) -> Option<Item> {
        let found = |entry: Option<&Entry>| {
            let entry = entry?;
            if !self.live(&entry.item, now) {
                return None;
            }
            // A write only when the recorded time is stale: hot keys read
            // many times a second do not bounce their cache line.
            if entry.last_access.load(Ordering::Relaxed) != now {
                entry.last_access.store(now, Ordering::Relaxed);
            }
            Some(entry.item.clone())
        };
        match try_read(|guard| found(self.map.get(key, guard))) {
            Some(result) => result,
            None => self.map.read_locked(key, found),
        }
    }

    /// Reads, and maybe replaces or removes, the item under `key` in one
    /// atomic step. `f` sees the live item (expired ones are gone). Returns
    /// `f`'s result and, if an item was put, its new CAS value.
    pub fn update<R>(
        &self,
        key: &[u8],
        now: u32,
        f: impl FnOnce(Option<&Item>) -> Update<R>,
    ) -> (R, Option<u64>) {
        let mut added: Option<(u64, u64)> = None;
        let mut removed: u64 = 0;
        let mut expired = false;
        let result = self.map.update(
            key,
            || Box::from(key),
            |current| {
                let live = current.filter(|entry| self.live(&entry.item, now));
                expired = current.is_some() && live.is_none();
                if let Some(old) = current {
                    removed = charge(key, &old.item);
                }
                match f(live.map(|entry| &entry.item)) {
                    Update::Keep(result) if expired => MapUpdate::Remove((result, None)),
                    Update::Keep(result) => {
                        removed = 0;
                        MapUpdate::Keep((result, None))
                    }
                    Update::Remove(result) => MapUpdate::Remove((result, None)),
                    Update::Put(mut item, result) => {
                        let cas = self.next_cas();
                        item.cas = cas;
                        item.stored = now;
                        added = Some((charge(key, &item), cas));
                        MapUpdate::Put(
                            Entry {
                                item,
                                last_access: AtomicU32::new(now),
                            },
                            (result, Some(cas)),
                        )
                    }
                }
            },
        );
        if expired {
            self.expired.fetch_add(1, Ordering::Relaxed);
        }
        if removed > 0 {
            self.bytes.fetch_sub(removed, Ordering::Relaxed);
        }
        if let Some((charged, _)) = added {
            self.total_items.fetch_add(1, Ordering::Relaxed);
            let bytes = self.bytes.fetch_add(charged, Ordering::Relaxed) + charged;
            if bytes > self.memory_limit as u64 {
                self.evict(key, now);
            }
        }
        result
    }

    /// Evicts least recently used items (never `keep`, the one just stored)
    /// until the store fits its memory limit again.
    fn evict(&self, keep: &[u8], now: u32) {
        for _ in 0..EVICTION_ATTEMPTS {
            if self.bytes.load(Ordering::Relaxed) <= self.memory_limit as u64 {
                return;
            }
            let Some(victim) = self.pick_victim(keep, now) else {
                return;
            };
            let (evicted, _) = self.update(&victim.0, now, |current| match current {
                Some(item) if item.cas == victim.1 => Update::Remove(true),
                _ => Update::Keep(false),
            });
            if evicted {
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The key and CAS of the least recently used of a sample of items.
    fn pick_victim(&self, keep: &[u8], now: u32) -> Option<(Box<[u8]>, u64)> {
        let buckets = self.map.bucket_count();
        let start = self.sample_cursor.fetch_add(97, Ordering::Relaxed);
        let mut best: Option<(u32, Box<[u8]>, u64)> = None;
        let seen = core::cell::Cell::new(0);
        // The map hands out `&K`, and `K` is `Box<[u8]>`.
        #[allow(clippy::borrowed_box)]
        let mut sample = |key: &Box<[u8]>, entry: &Entry| {
            if &**key != keep {
                seen.set(seen.get() + 1);
                // Expired items go first.
                let age = if self.live(&entry.item, now) {
                    entry.last_access.load(Ordering::Relaxed)
                } else {
                    0
                };
                if best.as_ref().is_none_or(|(oldest, _, _)| age < *oldest) {
                    best = Some((age, key.clone(), entry.item.cas));
                }
            }
            seen.get() < EVICTION_SAMPLE
        };
        for step in 0..buckets {
            let bucket = start.wrapping_add(step);
            let scanned = try_read(|guard| {
                self.map.for_each_in_bucket(bucket, guard, &mut sample);
            });
            if scanned.is_none() || seen.get() >= EVICTION_SAMPLE {
                break;
            }
        }
        best.map(|(_, key, cas)| (key, cas))
    }

    /// `set`, `add`, `replace`, `append`, `prepend` and `cas`.
    pub fn set(
        &self,
        mode: SetMode,
        key: &[u8],
        flags: u32,
        expires: u32,
        value: IoBuf,
        now: u32,
    ) -> SetResult {
        if value.len() > self.item_size_max {
            // memcached drops the old item when a set is too large.
            if mode == SetMode::Set {
                self.delete(key, None, now);
            }
            return SetResult::TooLarge;
        }
        if key.len() + value.len() + ITEM_OVERHEAD > self.memory_limit {
            return SetResult::OutOfMemory;
        }
        let (result, cas) = self.update(key, now, |current| {
            let put = |value: IoBuf, flags, expires| {
                Update::Put(
                    Item {
                        flags,
                        expires,
                        cas: 0,
                        stored: 0,
                        value,
                    },
                    SetResult::Stored(0),
                )
            };
            match (mode, current) {
                (SetMode::Set, _) | (SetMode::Add, None) | (SetMode::Replace, Some(_)) => {
                    put(value, flags, expires)
                }
                (SetMode::Add, Some(_))
                | (SetMode::Replace | SetMode::Append | SetMode::Prepend, None) => {
                    Update::Keep(SetResult::NotStored)
                }
                (SetMode::Cas(_), None) => Update::Keep(SetResult::NotFound),
                (SetMode::Cas(expected), Some(item)) => {
                    if item.cas == expected {
                        put(value, flags, expires)
                    } else {
                        Update::Keep(SetResult::Exists)
                    }
                }
                (SetMode::Append | SetMode::Prepend, Some(item)) => {
                    let (first, second) = if mode == SetMode::Append {
                        (item.value.as_slice(), value.as_slice())
                    } else {
                        (value.as_slice(), item.value.as_slice())
                    };
                    let mut joined = alloc::vec::Vec::with_capacity(first.len() + second.len());
                    joined.extend_from_slice(first);
                    joined.extend_from_slice(second);
                    if joined.len() > self.item_size_max {
                        Update::Keep(SetResult::TooLarge)
                    } else {
                        put(IoBuf::from_vec(joined), item.flags, item.expires)
                    }
                }
            }
        });
        match (result, cas) {
            (SetResult::Stored(_), Some(cas)) => SetResult::Stored(cas),
            (other, _) => other,
        }
    }

    /// `delete`, optionally only if the CAS value matches.
    pub fn delete(&self, key: &[u8], cas: Option<u64>, now: u32) -> DeleteResult {
        self.update(key, now, |current| match (current, cas) {
            (None, _) => Update::Keep(DeleteResult::NotFound),
            (Some(item), Some(cas)) if item.cas != cas => Update::Keep(DeleteResult::Exists),
            (Some(_), _) => Update::Remove(DeleteResult::Deleted),
        })
        .0
    }

    /// Sets a new expiry time on a live item and returns it. The item keeps
    /// its CAS value, as in memcached.
    pub fn touch(&self, key: &[u8], expires: u32, now: u32) -> Option<Item> {
        let mut touched = None;
        self.map.update(
            key,
            || Box::from(key),
            |current| match current.filter(|entry| self.live(&entry.item, now)) {
                None => MapUpdate::Keep(()),
                Some(entry) => {
                    let mut item = entry.item.clone();
                    item.expires = expires;
                    touched = Some(item.clone());
                    MapUpdate::Put(
                        Entry {
                            item,
                            last_access: AtomicU32::new(now),
                        },
                        (),
                    )
                }
            },
        );
        touched
    }

    /// `flush_all`: with `at` (a Unix time in the future), every item
    /// stored before `at` becomes invalid when `at` comes; without, every
    /// item stored so far is invalid now.
    pub fn flush_all(&self, at: Option<u32>, now: u32) {
        match at {
            Some(at) if at > now => self.oldest_live.store(u64::from(at - 1), Ordering::Relaxed),
            _ => {
                // As memcached: a pending delayed flush becomes "now" too.
                self.oldest_live
                    .store(u64::from(now.saturating_sub(1)), Ordering::Relaxed);
                let newest = self.next_cas.load(Ordering::Relaxed).saturating_sub(1);
                self.oldest_cas.store(newest, Ordering::Relaxed);
            }
        }
    }

    /// Current counters. `curr_items` counts entries in the table, which
    /// includes expired and flushed items not yet reclaimed (memcached too
    /// reclaims lazily).
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            curr_items: self.map.len() as u64,
            total_items: self.total_items.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
        }
    }
}
