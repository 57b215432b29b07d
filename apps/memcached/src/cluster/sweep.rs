//! Dropping the keys a node no longer owns, after it adopted a new shard
//! map (`docs/distributed-memcached.md`, "Epochs: never a wrong value",
//! step 3).
//!
//! Why it is not optional: a node that kept a key another node took
//! would, should it own the key again later (the other node lost), answer
//! the value from before every write that went to the other node. The
//! caller runs it after publishing the new map and waiting for an RCU
//! grace period, so that no request checked against the old map is still
//! storing.

use alloc::boxed::Box;
use alloc::vec::Vec;

use ebb_core::NodeId;

use super::shard_map::ShardMap;
use crate::Store;

/// Deletes from `store` every live key that `map` gives to another node
/// than `me`; returns how many. Must run on a core (the walk reads the
/// store in a read section); it walks `batch` buckets at a time and
/// deletes between batches, so no read section spans the whole store.
pub fn drop_unowned(store: &Store, map: &ShardMap, me: NodeId, now: u32, batch: usize) -> usize {
    let batch = batch.max(1);
    let mut dropped = 0;
    let mut from = 0;
    while from < store.walk_len() {
        let mut foreign: Vec<Box<[u8]>> = Vec::new();
        store.live_items(from, batch, now, |item| {
            if map.owner(&item.key).is_none_or(|owner| owner.node != me) {
                foreign.push(item.key);
            }
        });
        for key in foreign {
            // A key deleted meanwhile is simply not found.
            if store.delete(&key, None, now) == crate::DeleteResult::Deleted {
                dropped += 1;
            }
        }
        from += batch;
    }
    dropped
}
