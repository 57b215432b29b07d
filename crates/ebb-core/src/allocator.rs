//! Hands out Ebb ids.

use core::ops::Range;
use core::sync::atomic::{AtomicU32, Ordering};

use spin::Mutex;

use alloc::format;

use crate::{EbbError, EbbId, GlobalIdMap, MapError, NodeId, FIRST_GLOBAL_ID, FIRST_LOCAL_ID};

/// How many global ids a node reserves from the [`GlobalIdMap`] at a time.
pub const GLOBAL_RANGE_SIZE: u32 = 64;

/// Local ids are unique in the whole address space, not just per node: when
/// several nodes share a process (tests, hosted multi-node setups), an id is
/// still bound to one type only (see `registry`), at no cost.
static NEXT_LOCAL: AtomicU32 = AtomicU32::new(FIRST_LOCAL_ID);

/// A node's id allocator: local ids without coordination, global ids from
/// ranges reserved from the application's [`GlobalIdMap`].
pub struct EbbAllocator {
    node: NodeId,
    global: Mutex<Range<u32>>,
}

impl EbbAllocator {
    pub(crate) fn new(node: NodeId) -> Self {
        EbbAllocator {
            node,
            global: Mutex::new(0..0),
        }
    }

    /// A fresh id for an Ebb used on this node only.
    pub fn allocate_local(&self) -> Result<EbbId, EbbError> {
        let raw = NEXT_LOCAL
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |next| {
                (next < FIRST_GLOBAL_ID).then_some(next + 1)
            })
            .map_err(|_| EbbError::IdsExhausted("local"))?;
        EbbId::new(raw)
    }

    /// A fresh global id, from this node's current range; reserves a new
    /// range from `global_ids` when it runs out (which, for a map across a
    /// network, is the only time this waits).
    ///
    /// # Errors
    ///
    /// The map's: unreachable, or the global id space is used up.
    pub async fn allocate_global(&self, global_ids: &dyn GlobalIdMap) -> Result<EbbId, MapError> {
        loop {
            if let Some(raw) = self.take_global() {
                return EbbId::new(raw).map_err(|_| {
                    MapError::Refused(format!("the map handed out id {raw}, outside the id space"))
                });
            }
            // Not under the lock: the reservation may cross a network. Two
            // cores that both ran out reserve a range each; the second one
            // replaces nothing and its range is left unused.
            let fresh = global_ids
                .reserve_range(self.node, GLOBAL_RANGE_SIZE)
                .await?;
            let mut range = self.global.lock();
            if range.is_empty() {
                *range = fresh;
            }
        }
    }

    /// The next id of the current range, if it has one.
    fn take_global(&self) -> Option<u32> {
        let mut range = self.global.lock();
        let raw = range.next()?;
        Some(raw)
    }
}
