//! The [`GlobalIdMap`] of native nodes, over the Messenger (issue 17):
//! native nodes reach the application's map through their hosted node,
//! which holds the real one (in-process, or the etcd map); there is no
//! etcd client in the guest, as in EbbRT.
//!
//! * `messages`: the protocol, one message number per operation
//!   ([`MapRequest`]; the reply is a [`MapReply`] or the hosted node's
//!   [`MapError`](ebb_core::MapError), every variant as it is), hand-written little-endian
//!   layouts decoded strictly ([`LayoutError`], `crate::layout`); `docs/messenger.md`
//!   has the tables.
//! * [`MapService`]: the hosted node serves the reserved Ebb [`MAP_EBB`]
//!   from its own `Arc<dyn GlobalIdMap>`, each call a deferred answer
//!   (the map is asynchronous) unless the map's future is ready at once.
//! * [`RemoteGlobalIdMap`]: a node's map, each operation a Messenger call
//!   to the hosted node bounded in time; a hosted node that cannot be
//!   reached, is lost or does not answer in time is
//!   [`MapError::Unreachable`](ebb_core::MapError::Unreachable) naming it (`the hosted node 0
//!   (10.96.0.1:7000)`).
//! * Watches are long polls ([`RemoteWatch`]): the hosted node keeps the
//!   node's watch and its undelivered changes; the node asks for the next
//!   ones ([`NEXT_CHANGES`]), one poll at a time. Nothing is pushed to the
//!   node, so no node-side Ebb is needed and changes arrive in the map's
//!   order; a failed poll ends the watch with its error. A node holds at
//!   most [`MAX_WATCHES_PER_NODE`]; the hosted map's watch bounds the
//!   unread changes (the in-process map: `ebb_core::WATCH_QUEUE_LIMIT`,
//!   then `WatchEnded`).
//! * [`global_map`]: the map of this address space, for applications
//!   (a node role installs its remote map with [`install_global_map`];
//!   without one, an in-process map, the single-node default).

mod messages;
mod remote;
mod service;

use alloc::sync::Arc;
use core::time::Duration;

use ebb_core::{EbbId, GlobalIdMap, InProcessGlobalIdMap};
use spin::Once;

pub use crate::layout::LayoutError;
pub use messages::{
    decode_reply, encode_reply, MapReply, MapRequest, COMPARE_AND_SWAP, DELETE, GET, GRANT_LEASE,
    KEEP_ALIVE, LIST, NEXT_CHANGES, RESERVE_RANGE, REVOKE, SET, UNWATCH, WATCH,
};
pub use remote::{RemoteGlobalIdMap, RemoteWatch, DEFAULT_CALL_TIMEOUT, DEFAULT_POLL_WAIT};
pub use service::MapService;

/// The hosted node's map service (a reserved id, the same in every
/// build).
pub const MAP_EBB: EbbId = EbbId::reserved(24);

/// The refusal code of a request that does not decode.
pub const MAP_MALFORMED: u32 = 1;

/// The longest the service holds a watch's poll, whatever the node asks.
pub const MAX_POLL_WAIT: Duration = Duration::from_secs(60);

/// The most changes one poll's reply carries (the rest wait for the next
/// poll).
pub const MAX_CHANGES_PER_POLL: usize = 256;

/// The most bytes a reply of the service carries: a native node receives
/// a message whole into its receive buffers, and one of a few MiB stalls
/// it (docs/messenger.md). A poll takes the changes that fit (the rest
/// wait for the next poll); any other reply larger than this (a list of
/// many entries, a large value the hosted node wrote itself) is refused.
pub const MAX_REPLY_BYTES: usize = 1 << 20;

/// The largest value `set` and `compare_and_swap` through the service
/// store, so that any one change fits in a poll's reply.
pub const MAX_VALUE_BYTES: usize = 512 << 10;

/// The most global ids one `reserve_range` through the service hands out
/// (a node's allocator asks for
/// [`GLOBAL_RANGE_SIZE`](ebb_core::GLOBAL_RANGE_SIZE) at a time), so one
/// node cannot use up the id space in a single call.
pub const MAX_RESERVE_LEN: u32 = 1024;

/// The most watches one node may hold open on the hosted node at once
/// (each holds a watch on the hosted node's map and its unread changes).
pub const MAX_WATCHES_PER_NODE: usize = 32;

/// This address space's map, once chosen.
static GLOBAL_MAP: Once<Arc<dyn GlobalIdMap>> = Once::new();

/// Makes `map` this address space's map (a node role does it once it
/// knows its hosted node: `RemoteGlobalIdMap::new(messenger)`).
///
/// # Errors
///
/// The map chosen before, unchanged: one was installed already, or
/// [`global_map`] was called first and chose the in-process default.
pub fn install_global_map(map: Arc<dyn GlobalIdMap>) -> Result<(), Arc<dyn GlobalIdMap>> {
    let mut installed = false;
    let chosen = GLOBAL_MAP.call_once(|| {
        installed = true;
        map
    });
    if installed {
        Ok(())
    } else {
        Err(Arc::clone(chosen))
    }
}

/// This address space's map: the one installed with
/// [`install_global_map`], or else a new in-process map, which stays (a
/// single node's default).
#[must_use]
pub fn global_map() -> Arc<dyn GlobalIdMap> {
    Arc::clone(GLOBAL_MAP.call_once(|| Arc::new(InProcessGlobalIdMap::new())))
}
