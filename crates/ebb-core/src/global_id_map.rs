//! The application-wide store shared by all nodes.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::ops::Range;

use spin::Mutex;

use crate::{EbbError, EbbId, NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};

/// Application-wide store from global Ebb id to data (typically where the
/// Ebb's root lives and how to reach it), and the authority that hands out
/// ranges of global ids to nodes, so that nodes can then allocate ids
/// without asking anyone.
///
/// The in-process implementation serves nodes of one address space (tests,
/// a single hosted process); a distributed implementation (etcd) comes with
/// the messenger.
pub trait GlobalIdMap: Send + Sync {
    /// Stores `value` under `id`, replacing what was there.
    fn set(&self, id: EbbId, value: Vec<u8>);

    /// The value under `id`.
    fn get(&self, id: EbbId) -> Option<Vec<u8>>;

    /// Reserves `len` consecutive global ids for `node`. Ranges handed out
    /// never overlap, whichever node asks.
    fn reserve_range(&self, node: NodeId, len: u32) -> Result<Range<u32>, EbbError>;
}

/// A [`GlobalIdMap`] for nodes that share one address space.
pub struct InProcessGlobalIdMap {
    state: Mutex<State>,
}

struct State {
    values: BTreeMap<EbbId, Vec<u8>>,
    next_global: u32,
}

impl InProcessGlobalIdMap {
    /// An empty map whose global ids start at [`FIRST_GLOBAL_ID`].
    pub const fn new() -> Self {
        InProcessGlobalIdMap {
            state: Mutex::new(State {
                values: BTreeMap::new(),
                next_global: FIRST_GLOBAL_ID,
            }),
        }
    }
}

impl Default for InProcessGlobalIdMap {
    fn default() -> Self {
        Self::new()
    }
}

impl GlobalIdMap for InProcessGlobalIdMap {
    fn set(&self, id: EbbId, value: Vec<u8>) {
        self.state.lock().values.insert(id, value);
    }

    fn get(&self, id: EbbId) -> Option<Vec<u8>> {
        self.state.lock().values.get(&id).cloned()
    }

    fn reserve_range(&self, _node: NodeId, len: u32) -> Result<Range<u32>, EbbError> {
        let mut state = self.state.lock();
        let start = state.next_global;
        let end = start
            .checked_add(len)
            .filter(|&end| end <= MAX_EBB_IDS && len > 0)
            .ok_or(EbbError::IdsExhausted("global"))?;
        state.next_global = end;
        Ok(start..end)
    }
}
