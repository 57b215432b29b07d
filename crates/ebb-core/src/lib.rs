//! Ebbflow's component model: Elastic Building Blocks.
//!
//! An *Ebb* is a component with a system-wide [`EbbId`] and a representative
//! (a "rep") on every core that uses it. An [`EbbRef<T>`] is a `Copy` handle of
//! four bytes; [`EbbRef::get`] resolves the calling core's representative with
//! one load from a per-core table and one branch on null. On a miss the Ebb
//! type's fault handler ([`Ebb::fault`]) builds or finds the representative,
//! which is then cached in the table, or fails with an [`EbbError`].
//!
//! Representatives are used through `&self` (with `Cell`/`RefCell` inside):
//! events are never preempted, so a representative is only touched by its own
//! core, yet a call may re-enter the same Ebb on that core.
//!
//! Helper kinds: [`Shared`] (one representative, the root itself, for all
//! cores) and [`Multicore`] (one representative per core, created lazily, and
//! a root that links them).
//!
//! Node-level stores: [`LocalIdMap`] (id → root data, usable from every core),
//! the [`GlobalIdMap`] trait (asynchronous and fallible: a cluster's map is
//! across a network) with [`InProcessGlobalIdMap`], and
//! [`EbbAllocator`] which hands out local ids and per-node ranges of global
//! ids.
#![no_std]

extern crate alloc;

mod allocator;
mod context;
mod ebb_ref;
mod error;
mod global_id_map;
mod id;
mod local_id_map;
mod multicore;
mod node;
mod registry;
mod shared;
mod table;

pub use allocator::{EbbAllocator, GLOBAL_RANGE_SIZE};
pub use context::{current_core, current_node, enter_core, CoreGuard};
pub use ebb_ref::{Ebb, EbbRef, FaultContext};
pub use error::EbbError;
pub use global_id_map::{
    check_key, check_writable_key, ebb_key, node_key, Change, GlobalIdMap, InProcessGlobalIdMap,
    Lease, MapError, MapFuture, MapInFront, NextChange, Swap, Watch, WatchStream, MAX_KEY_LEN,
    NEXT_GLOBAL_ID, NODES, RESERVED, WATCH_QUEUE_LIMIT,
};
pub use id::{CoreId, EbbId, NodeId, FIRST_GLOBAL_ID, FIRST_LOCAL_ID, MAX_EBB_IDS};
pub use local_id_map::LocalIdMap;
pub use multicore::{Multicore, MulticoreEbb, MulticoreRoot};
pub use node::Node;
pub use shared::Shared;
