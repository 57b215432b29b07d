//! The shard map a node goes by, read by every core without locks, and
//! its adoption (`docs/distributed-memcached.md`, "Epochs: never a wrong
//! value").
//!
//! Invariant: a map is adopted only if its epoch is newer than the one in
//! force, then (1) published, (2) a grace period awaited, so that every
//! request checked against the old map, its store operation included,
//! has ended (events run to completion), and (3) the keys it gives to
//! other nodes are swept from the store. One writer: the node's adoption
//! task calls [`CurrentMap::adopt`], one map at a time, so step 3 of one
//! map ends before step 1 of the next.
//!
//! A node that skips epochs (its map was `E`, the next it sees is `E+2`
//! or later: it read the stored map after several changes, or was cut
//! off) does not know whom the maps in between gave its keys to, and so
//! whether a key it still holds was written elsewhere meanwhile. It
//! drops every key instead: misses, never a wrong value.

use core::sync::atomic::{AtomicU64, Ordering};

use ebb_core::NodeId;
use ebb_event::rcu::{self, RcuCell};
use ebb_event::{oneshot, EventError};

use super::shard_map::ShardMap;
use super::sweep::drop_unowned;
use crate::Store;

/// Buckets the sweep reads per read section.
const SWEEP_BATCH: usize = 256;

/// The map in force on this node.
pub struct CurrentMap {
    me: NodeId,
    map: RcuCell<ShardMap>,
    /// The map's epoch, for readers outside a read section.
    epoch: AtomicU64,
}

/// What [`CurrentMap::adopt`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adopted {
    /// The map was not newer than the one in force: nothing changed.
    NotNewer {
        /// The epoch in force.
        in_force: u64,
    },
    /// Adopted; this many keys were swept.
    Swept(usize),
}

impl CurrentMap {
    /// Node `me` with no map yet (epoch 0, no members: no key has an
    /// owner, so nothing is served from the store as a member's).
    #[must_use]
    pub fn new(me: NodeId) -> CurrentMap {
        CurrentMap {
            me,
            map: RcuCell::new(ShardMap::empty()),
            epoch: AtomicU64::new(0),
        }
    }

    /// This node.
    #[must_use]
    pub fn me(&self) -> NodeId {
        self.me
    }

    /// The epoch in force.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Runs `body` with the map in force (on a core: an RCU read section,
    /// so `body` must not wait).
    ///
    /// # Panics
    ///
    /// Off a core.
    pub fn read<R>(&self, body: impl FnOnce(&ShardMap) -> R) -> R {
        rcu::read(|guard| body(self.map.load(guard)))
    }

    /// Adopts `next` if it is newer: publishes it, waits for a grace
    /// period, and sweeps from `store` the keys it gives to other nodes,
    /// or every key when epochs were skipped (`now`: Unix time, for what
    /// is dead).
    ///
    /// # Errors
    ///
    /// Not on a core.
    pub async fn adopt(
        &self,
        store: &Store,
        next: ShardMap,
        now: impl Fn() -> u32,
    ) -> Result<Adopted, EventError> {
        let in_force = self.epoch();
        if next.epoch() <= in_force {
            return Ok(Adopted::NotNewer { in_force });
        }
        let epoch = next.epoch();
        // After a gap, keep nothing (see the module's documentation): the
        // empty map owns no key, so the sweep drops them all.
        let swept_with = if in_force == 0 || epoch == in_force + 1 {
            next.clone()
        } else {
            ShardMap::empty()
        };
        self.map.replace(next)?;
        self.epoch.store(epoch, Ordering::Release);
        grace_period().await?;
        Ok(Adopted::Swept(drop_unowned(
            store,
            &swept_with,
            self.me,
            now(),
            SWEEP_BATCH,
        )))
    }
}

/// Resolves once every core of the node has passed a quiescent point
/// since the call (`ebb_event::rcu::call_rcu`).
///
/// # Errors
///
/// Not on a core.
pub async fn grace_period() -> Result<(), EventError> {
    let (passed, wait) = oneshot();
    rcu::call_rcu(move || passed.send(()))?;
    // The sender is dropped unsent only if the core stops first.
    wait.await.map_err(|_| EventError::AlreadyStopping)
}
