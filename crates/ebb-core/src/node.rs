//! A node: one address space with some cores.

use alloc::boxed::Box;

use crate::{EbbAllocator, GlobalIdMap, InProcessGlobalIdMap, LocalIdMap, NodeId};

/// One address space (a native instance or a hosted process) and its
/// node-level stores. Nodes live as long as their address space: they are
/// created once and never freed, so representatives and roots can hold
/// `&'static` references to them.
pub struct Node {
    id: NodeId,
    cores: usize,
    local_ids: LocalIdMap,
    allocator: EbbAllocator,
    global_ids: &'static dyn GlobalIdMap,
}

impl Node {
    /// Creates node `id` with `cores` cores that shares `global_ids` with the
    /// other nodes of the application.
    pub fn new(id: NodeId, cores: usize, global_ids: &'static dyn GlobalIdMap) -> &'static Node {
        Box::leak(Box::new(Node {
            id,
            cores,
            local_ids: LocalIdMap::new(),
            allocator: EbbAllocator::new(id),
            global_ids,
        }))
    }

    /// A single node with its own in-process [`GlobalIdMap`].
    pub fn standalone(cores: usize) -> &'static Node {
        let global: &'static InProcessGlobalIdMap =
            Box::leak(Box::new(InProcessGlobalIdMap::new()));
        Node::new(NodeId(0), cores, global)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// How many cores this node has (numbered `0..cores`).
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// Id → root data of the Ebbs on this node.
    pub fn local_ids(&self) -> &LocalIdMap {
        &self.local_ids
    }

    /// Hands out Ebb ids for this node.
    pub fn allocator(&self) -> &EbbAllocator {
        &self.allocator
    }

    /// The store shared by every node of the application.
    pub fn global_ids(&self) -> &'static dyn GlobalIdMap {
        self.global_ids
    }
}
