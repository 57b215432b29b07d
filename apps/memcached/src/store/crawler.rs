//! Walking the whole store a few buckets at a time, for `lru_crawler`:
//! `metadump` lists the live items, `crawl` removes the dead ones
//! (memcached's LRU crawler reclaims expired and flushed items before a
//! lookup or an eviction would find them).

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use ebb_event::rcu::try_read;

use super::{Store, Update};

/// What `lru_crawler metadump` shows of one live item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemMeta {
    /// The key.
    pub key: Box<[u8]>,
    /// Unix expiry time, 0: never.
    pub expires: u32,
    /// Unix time of the last access the LRU recorded.
    pub last_access: u32,
    /// CAS value.
    pub cas: u64,
    /// Fetched since it was stored.
    pub fetched: bool,
    /// memcached's item size (what `stats` counts as `bytes`).
    pub size: usize,
}

impl Store {
    /// How many buckets a walk visits in all.
    pub fn walk_len(&self) -> usize {
        self.map.bucket_count()
    }

    /// Calls `visit` with each live item of buckets `from..from + count`.
    /// Outside a core (no read section) it visits nothing.
    pub fn live_items(&self, from: usize, count: usize, now: u32, mut visit: impl FnMut(ItemMeta)) {
        let end = from.saturating_add(count).min(self.map.bucket_count());
        try_read(|guard| {
            for bucket in from..end {
                self.map.for_each_in_bucket(bucket, guard, |key, entry| {
                    if self.dead(&entry.item, now).is_none() {
                        visit(ItemMeta {
                            key: key.clone(),
                            expires: entry.item.expires,
                            last_access: entry.last_access.load(Ordering::Relaxed),
                            cas: entry.item.cas,
                            fetched: entry.fetched.load(Ordering::Relaxed),
                            size: self.item_size(
                                key.len(),
                                entry.item.flags,
                                entry.item.value.len(),
                            ),
                        });
                    }
                    true
                });
            }
        });
    }

    /// Calls `visit` with the key of every entry of buckets
    /// `from..from + count`, live or dead. Outside a core (no read
    /// section) it visits nothing.
    pub fn every_key(&self, from: usize, count: usize, mut visit: impl FnMut(&[u8])) {
        let end = from.saturating_add(count).min(self.map.bucket_count());
        try_read(|guard| {
            for bucket in from..end {
                self.map.for_each_in_bucket(bucket, guard, |key, _| {
                    visit(key);
                    true
                });
            }
        });
    }

    /// Removes the dead items of buckets `from..from + count`, counted as
    /// a lookup that finds them counts them; returns how many items the
    /// buckets held.
    pub fn reclaim_dead(&self, from: usize, count: usize, now: u32) -> usize {
        let end = from.saturating_add(count).min(self.map.bucket_count());
        let mut seen = 0;
        let mut dead: Vec<Box<[u8]>> = Vec::new();
        try_read(|guard| {
            for bucket in from..end {
                self.map.for_each_in_bucket(bucket, guard, |key, entry| {
                    seen += 1;
                    if self.dead(&entry.item, now).is_some() {
                        dead.push(key.clone());
                    }
                    true
                });
            }
        });
        for key in dead {
            // The update removes the item only if it is still dead.
            self.update(&key, now, |_| Update::Keep(()));
        }
        seen
    }
}
