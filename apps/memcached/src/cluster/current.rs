//! The shard map a node goes by, read by every core without locks, its
//! adoption, and the fences that keep two nodes from serving one key at
//! once (`docs/distributed-memcached.md`, "Epochs: never a wrong value").
//!
//! Invariant: a map is adopted only if its epoch is newer than the one in
//! force, then (1) published, (2) a grace period awaited, so that every
//! request checked against the old map, its store operation included,
//! has ended (events run to completion), and (3) the keys it gives to
//! other nodes are swept from the store. One writer: the node's adoption
//! task calls [`CurrentMap::adopt`] and [`CurrentMap::settle`], one at a
//! time, so step 3 of one map ends before step 1 of the next.
//!
//! A node that skips epochs (its map was `E`, the next it sees is `E+2`
//! or later: it read the stored map after several changes, or was cut
//! off) does not know whom the maps in between gave its keys to, and so
//! whether a key it still holds was written elsewhere meanwhile. It
//! drops every key instead: misses, never a wrong value.
//!
//! The handover fence: a node serves a key it owns at epoch `X` only if
//! no registered node can still serve it under an older epoch, that is
//! only if it owned the key in every map from the settled epoch `S`
//! (every registered node has adopted `S` or later, [`CurrentMap::settle`])
//! to `X`. It keeps the maps it adopted one after another since `S` to
//! know. The self-fence: it serves no key at all unless its lease is
//! surely alive (kept alive less than its time to live, minus a margin,
//! ago) and, after it registered again, its map is at least the one
//! stored then.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use ebb_core::NodeId;
use ebb_event::rcu::{self, RcuCell};
use ebb_event::{oneshot, EventError, Instant};

use super::shard_map::ShardMap;
use super::sweep::drop_unowned;
use crate::Store;

/// Buckets the sweep reads per read section, and per event: it yields
/// to the core's other events between batches (`sweep.rs`).
const SWEEP_BATCH: usize = 256;

/// The most maps a node keeps from before the one in force, for the
/// handover fence: with more changes than this unsettled, it serves
/// nothing it cannot vouch for until the others catch up.
pub const HISTORY: usize = 16;

/// The least epoch a node may serve under while it registers (again):
/// none (it serves nothing until it read the stored map).
const REGISTERING: u64 = u64::MAX;

/// The map in force, the maps adopted one after another before it, and
/// how far every registered node got.
#[derive(Clone)]
struct Standing {
    map: ShardMap,
    /// Oldest first; `earlier[i + 1]` has the epoch after `earlier[i]`,
    /// and the last the epoch before `map`'s.
    earlier: Vec<ShardMap>,
    /// Every registered node has adopted this epoch or a later one.
    settled: u64,
}

/// The map in force on this node.
pub struct CurrentMap {
    me: NodeId,
    standing: RcuCell<Standing>,
    /// The map's epoch, for readers outside a read section.
    epoch: AtomicU64,
    /// The epoch whose adoption (publication, grace period, sweep) ended.
    adopted: AtomicU64,
    /// The settled epoch, for readers outside a read section.
    settled: AtomicU64,
    /// Until when (the event loop's clock, nanoseconds) the node's lease
    /// is surely alive.
    lease_until: AtomicU64,
    /// The least epoch the node may serve under ([`REGISTERING`]: none).
    required: AtomicU64,
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

/// The map in force as one request sees it, with the fences: what
/// decides whether this node serves a key from its store.
#[derive(Clone, Copy)]
pub struct View<'a> {
    map: &'a ShardMap,
    earlier: &'a [ShardMap],
    settled: u64,
    me: NodeId,
    lease_live: bool,
}

impl<'a> View<'a> {
    /// `map` as node `me` sees it when every registered node has adopted
    /// it and `me`'s lease is alive: it serves exactly the keys `map`
    /// gives it.
    #[must_use]
    pub fn agreed(map: &'a ShardMap, me: NodeId) -> View<'a> {
        View {
            map,
            earlier: &[],
            settled: map.epoch(),
            me,
            lease_live: true,
        }
    }

    /// The map in force.
    #[must_use]
    pub fn map(&self) -> &'a ShardMap {
        self.map
    }

    /// This node.
    #[must_use]
    pub fn me(&self) -> NodeId {
        self.me
    }

    /// Whether the node's lease is surely alive and its map new enough
    /// since it registered (else it serves no key: self-fenced).
    #[must_use]
    pub fn lease_live(&self) -> bool {
        self.lease_live
    }

    /// Whether the map in force gives `key` to this node.
    #[must_use]
    pub fn owns(&self, key: &[u8]) -> bool {
        self.map
            .owner(key)
            .is_some_and(|owner| owner.node == self.me)
    }

    /// Whether this node serves `key` from its store now: it owns it, it
    /// is not self-fenced, and no registered node can still serve it
    /// under an older map (it owned `key` in every map since the settled
    /// epoch).
    #[must_use]
    pub fn serves(&self, key: &[u8]) -> bool {
        self.lease_live && self.owns(key) && self.handed_over(key)
    }

    /// Whether this node owned `key` in every map from the settled epoch
    /// to the one in force (`owns` checked by the caller).
    fn handed_over(&self, key: &[u8]) -> bool {
        let from = self.settled.min(self.map.epoch());
        if from == self.map.epoch() {
            return true;
        }
        // The maps since `from` must all be known, else nothing is vouched for.
        let Some(oldest) = self.earlier.first() else {
            return false;
        };
        oldest.epoch() <= from
            && self
                .earlier
                .iter()
                .filter(|map| map.epoch() >= from)
                .all(|map| map.owner(key).is_some_and(|owner| owner.node == self.me))
    }
}

impl CurrentMap {
    /// Node `me` with no map yet (epoch 0, no members: no key has an
    /// owner, so nothing is served from the store as a member's), no
    /// lease yet and not registered.
    #[must_use]
    pub fn new(me: NodeId) -> CurrentMap {
        CurrentMap {
            me,
            standing: RcuCell::new(Standing {
                map: ShardMap::empty(),
                earlier: Vec::new(),
                settled: 0,
            }),
            epoch: AtomicU64::new(0),
            adopted: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            lease_until: AtomicU64::new(0),
            required: AtomicU64::new(REGISTERING),
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

    /// The epoch every registered node has adopted, as last settled.
    #[must_use]
    pub fn settled(&self) -> u64 {
        self.settled.load(Ordering::Acquire)
    }

    /// Runs `body` with the map in force (on a core: an RCU read section,
    /// so `body` must not wait).
    ///
    /// # Panics
    ///
    /// Off a core.
    pub fn read<R>(&self, body: impl FnOnce(&ShardMap) -> R) -> R {
        rcu::read(|guard| body(&self.standing.load(guard).map))
    }

    /// Runs `body` with the map in force and the fences as of now (the
    /// event loop's clock), in an RCU read section.
    ///
    /// # Panics
    ///
    /// Off a core.
    pub fn view<R>(&self, body: impl FnOnce(&View<'_>) -> R) -> R {
        let now = ebb_event::now().0;
        rcu::read(|guard| {
            let standing = self.standing.load(guard);
            let caught_up = standing.map.epoch() >= self.required.load(Ordering::Acquire);
            body(&View {
                map: &standing.map,
                earlier: &standing.earlier,
                settled: standing.settled,
                me: self.me,
                lease_live: caught_up && now < self.lease_until.load(Ordering::Acquire),
            })
        })
    }

    /// Whether this node serves `key` from its store now ([`View::serves`]).
    ///
    /// # Panics
    ///
    /// Off a core.
    #[must_use]
    pub fn serves(&self, key: &[u8]) -> bool {
        self.view(|view| view.serves(key))
    }

    /// The node's lease is surely alive until `until` (a keep-alive sent
    /// at `t` succeeded: `t` + time to live − margin); never moves back.
    pub fn lease_kept(&self, until: Instant) {
        self.lease_until.fetch_max(until.0, Ordering::AcqRel);
    }

    /// The node's lease ended (or may have): it serves nothing until
    /// [`CurrentMap::lease_kept`] again.
    pub fn lease_lapsed(&self) {
        self.lease_until.store(0, Ordering::Release);
    }

    /// The node is (re)registering: it serves nothing until
    /// [`CurrentMap::registered`].
    pub fn registering(&self) {
        self.required.store(REGISTERING, Ordering::Release);
    }

    /// The node registered and then read the stored map's epoch `stored`:
    /// it serves nothing under an older map (one it held from before a
    /// lapse, which the others may have moved past without it).
    pub fn registered(&self, stored: u64) {
        self.required
            .store(stored.min(REGISTERING - 1), Ordering::Release);
    }

    /// What the node publishes as `memcached/adopted/N`: the least epoch
    /// it may still serve under, never to go down (the epoch it finished
    /// adopting, or the stored epoch it must reach first); `None` while it
    /// registers.
    #[must_use]
    pub fn promise(&self) -> Option<u64> {
        let required = self.required.load(Ordering::Acquire);
        (required != REGISTERING).then(|| required.max(self.adopted.load(Ordering::Acquire)))
    }

    /// Every registered node has adopted `settled` or a later epoch:
    /// keys gained since then may be served; maps from before it are
    /// forgotten.
    ///
    /// # Errors
    ///
    /// Not on a core.
    pub fn settle(&self, settled: u64) -> Result<(), EventError> {
        let mut next = rcu::read(|guard| self.standing.load(guard).clone());
        // Never past the map in force: what is settled is said of maps
        // this node adopted. A settled epoch read as "every registered
        // node" of none (`u64::MAX`, every lease gone at once) must not
        // open the fence of a map adopted later, which other nodes may
        // not have adopted yet.
        let settled = settled.min(next.map.epoch());
        if next.settled == settled {
            return Ok(());
        }
        next.settled = settled;
        next.earlier.retain(|map| map.epoch() >= settled);
        self.standing.replace(next)?;
        self.settled.store(settled, Ordering::Release);
        Ok(())
    }

    /// Adopts `next` if it is newer: publishes it, waits for a grace
    /// period, and sweeps from `store` the keys it gives to other nodes,
    /// or every key when epochs were skipped.
    ///
    /// # Errors
    ///
    /// Not on a core.
    pub async fn adopt(&self, store: &Store, next: ShardMap) -> Result<Adopted, EventError> {
        let in_force = self.epoch();
        if next.epoch() <= in_force {
            return Ok(Adopted::NotNewer { in_force });
        }
        let epoch = next.epoch();
        let consecutive = in_force != 0 && epoch == in_force + 1;
        // After a gap, keep nothing (see the module's documentation): the
        // empty map owns no key, so the sweep drops them all.
        let swept_with = if in_force == 0 || consecutive {
            next.clone()
        } else {
            ShardMap::empty()
        };
        let old = rcu::read(|guard| self.standing.load(guard).clone());
        let mut earlier = Vec::new();
        if consecutive {
            earlier = old.earlier;
            earlier.push(old.map);
            // Only what the handover fence may still ask about.
            earlier.retain(|map| map.epoch() >= old.settled);
            let excess = earlier.len().saturating_sub(HISTORY);
            earlier.drain(..excess);
        }
        // At most the epoch left behind (see `settle`): the new map's
        // gained keys wait until it is settled.
        let settled = old.settled.min(in_force);
        self.standing.replace(Standing {
            map: next,
            earlier,
            settled,
        })?;
        self.settled.store(settled, Ordering::Release);
        self.epoch.store(epoch, Ordering::Release);
        grace_period().await?;
        // Requests arriving while the sweep yields are checked against
        // `next`, already published: see `sweep.rs`.
        let swept = drop_unowned(store, &swept_with, self.me, SWEEP_BATCH).await;
        self.adopted.store(epoch, Ordering::Release);
        Ok(Adopted::Swept(swept))
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
