//! The node directory: where each node of the application listens for the
//! Messenger.
//!
//! A node id is not an address (DESIGN §5): a node keeps its id when it
//! moves, and the directory is the one place that maps one to the other.
//! The frontend knows every node (each announces itself to it); a node
//! learns the others from the frontend's reply to its announcement
//! ([`crate::AnnounceReply`]). One directory serves every core of a node.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::net::SocketAddr;

use ebb_core::NodeId;
use spin::RwLock;

/// Node id to Messenger address, shared by a node's cores.
#[derive(Debug, Default)]
pub struct NodeDirectory {
    nodes: RwLock<BTreeMap<NodeId, SocketAddr>>,
}

impl NodeDirectory {
    /// An empty directory.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `node` listens at `addr`; returns the address it had.
    pub fn insert(&self, node: NodeId, addr: SocketAddr) -> Option<SocketAddr> {
        self.nodes.write().insert(node, addr)
    }

    /// Forgets `node`; returns the address it had.
    pub fn remove(&self, node: NodeId) -> Option<SocketAddr> {
        self.nodes.write().remove(&node)
    }

    /// Where `node` listens, if known.
    #[must_use]
    pub fn address(&self, node: NodeId) -> Option<SocketAddr> {
        self.nodes.read().get(&node).copied()
    }

    /// Every node known, in id order.
    #[must_use]
    pub fn nodes(&self) -> Vec<(NodeId, SocketAddr)> {
        self.nodes
            .read()
            .iter()
            .map(|(node, addr)| (*node, *addr))
            .collect()
    }

    /// How many nodes are known.
    #[must_use]
    pub fn len(&self) -> usize {
        self.nodes.read().len()
    }

    /// Whether no node is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_found_by_id_and_replaced_by_a_new_address() {
        let directory = NodeDirectory::new();
        let first: SocketAddr = "10.0.0.2:7100".parse().unwrap();
        let moved: SocketAddr = "10.0.0.9:7100".parse().unwrap();
        assert_eq!(directory.insert(NodeId(2), first), None);
        assert_eq!(directory.address(NodeId(2)), Some(first));
        assert_eq!(directory.insert(NodeId(2), moved), Some(first));
        assert_eq!(directory.nodes(), [(NodeId(2), moved)]);
        assert_eq!(directory.address(NodeId(3)), None);
        assert_eq!(directory.remove(NodeId(2)), Some(moved));
        assert!(directory.is_empty());
    }
}
