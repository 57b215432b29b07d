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
//!
//! Every entry goes, live or dead: a flushed item the table still holds
//! comes back to life when a later `flush_all` with a delay replaces the
//! flush that killed it (`Store::forget`).
//!
//! The walk yields to the event loop between batches: a table has up to
//! 16M buckets, and the core serves its clients meanwhile. That keeps
//! the grace argument: the new map is published before the sweep starts,
//! so a request arriving while it runs is checked against the new map,
//! and one for a key the sweep drops is forwarded to its new owner (or
//! refused by `serve.rs` as not this node's), never stored here. After a
//! gap in epochs the sweep drops every key, also ones this node owns
//! under the new map and stored while the sweep ran: they become misses,
//! never wrong values.

use alloc::boxed::Box;
use alloc::vec::Vec;

use ebb_core::NodeId;

use super::shard_map::ShardMap;
use crate::Store;

/// Deletes from `store` every key, live or dead, that `map` gives to
/// another node than `me`; returns how many. Must run on a core (the walk
/// reads the store in a read section); it walks `batch` buckets at a
/// time, deletes between batches, and lets the core's other events run
/// before the next batch, so no read section or event spans the whole
/// store.
pub async fn drop_unowned(store: &Store, map: &ShardMap, me: NodeId, batch: usize) -> usize {
    let batch = batch.max(1);
    let mut dropped = 0;
    let mut from = 0;
    while from < store.walk_len() {
        let mut foreign: Vec<Box<[u8]>> = Vec::new();
        store.every_key(from, batch, |key| {
            if map.owner(key).is_none_or(|owner| owner.node != me) {
                foreign.push(Box::from(key));
            }
        });
        for key in foreign {
            // A key deleted meanwhile is simply not found.
            if store.forget(&key) {
                dropped += 1;
            }
        }
        from += batch;
        ebb_event::yield_now().await;
    }
    dropped
}
