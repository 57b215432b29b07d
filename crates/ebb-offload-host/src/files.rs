//! The files each client node has open: handles are per node (a node
//! cannot use another's), numbered from 1, at most
//! [`MAX_OPEN_PER_NODE`] at once, and all closed when the node is
//! forgotten (lost).
//!
//! A file is held as an `Arc<OwnedFd>`, so an operation takes it out of
//! the table and runs without the table's lock: other cores' operations
//! go on meanwhile, and a close during a read leaves the descriptor open
//! until that read ends (never reused under it).

use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, PoisonError};

use ebb_core::NodeId;
use ebb_offload::{FsError, Handle};

/// How many files one node may have open on the hosted node.
pub const MAX_OPEN_PER_NODE: usize = 1024;

/// One node's open files.
#[derive(Default)]
struct NodeFiles {
    /// The next handle to try.
    next: u32,
    open: BTreeMap<u32, Arc<OwnedFd>>,
}

/// Every node's open files.
#[derive(Default)]
pub(crate) struct OpenFiles {
    nodes: Mutex<HashMap<NodeId, NodeFiles>>,
}

impl OpenFiles {
    /// Keeps `fd` open for `node`; its new handle.
    pub(crate) fn insert(&self, node: NodeId, fd: OwnedFd) -> Result<Handle, FsError> {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let files = nodes.entry(node).or_default();
        if files.open.len() >= MAX_OPEN_PER_NODE {
            return Err(FsError::TooManyOpen);
        }
        // A free number: fewer than 2^32 are in use, so one is found.
        let mut handle = files.next.max(1);
        while files.open.contains_key(&handle) {
            handle = handle.checked_add(1).unwrap_or(1);
        }
        files.next = handle.checked_add(1).unwrap_or(1);
        files.open.insert(handle, Arc::new(fd));
        Ok(Handle(handle))
    }

    /// `node`'s file `handle`.
    pub(crate) fn get(&self, node: NodeId, handle: Handle) -> Result<Arc<OwnedFd>, FsError> {
        let nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        nodes
            .get(&node)
            .and_then(|files| files.open.get(&handle.0))
            .cloned()
            .ok_or(FsError::BadHandle)
    }

    /// Closes `node`'s file `handle`.
    pub(crate) fn remove(&self, node: NodeId, handle: Handle) -> Result<(), FsError> {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let files = nodes.get_mut(&node).ok_or(FsError::BadHandle)?;
        files.open.remove(&handle.0).ok_or(FsError::BadHandle)?;
        Ok(())
    }

    /// Closes every file of `node`; how many there were.
    pub(crate) fn forget(&self, node: NodeId) -> usize {
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        nodes.remove(&node).map_or(0, |files| files.open.len())
    }

    /// How many files `node` has open.
    pub(crate) fn count(&self, node: NodeId) -> usize {
        let nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        nodes.get(&node).map_or(0, |files| files.open.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

    fn fd() -> OwnedFd {
        File::open("/dev/null").unwrap().into()
    }

    #[test]
    fn handles_are_per_node_and_closed_with_it() {
        let files = OpenFiles::default();
        let a = files.insert(NodeId(1), fd()).unwrap();
        let b = files.insert(NodeId(1), fd()).unwrap();
        let c = files.insert(NodeId(2), fd()).unwrap();
        assert_eq!((a, b, c), (Handle(1), Handle(2), Handle(1)));
        assert_eq!(files.get(NodeId(2), b).err(), Some(FsError::BadHandle));
        files.remove(NodeId(1), a).unwrap();
        assert_eq!(files.remove(NodeId(1), a), Err(FsError::BadHandle));
        assert_eq!(files.forget(NodeId(1)), 1);
        assert_eq!(files.get(NodeId(1), b).err(), Some(FsError::BadHandle));
        assert_eq!(files.count(NodeId(2)), 1);
    }

    #[test]
    fn a_node_opens_at_most_its_share() {
        let files = OpenFiles::default();
        for _ in 0..MAX_OPEN_PER_NODE {
            files.insert(NodeId(3), fd()).unwrap();
        }
        assert_eq!(
            files.insert(NodeId(3), fd()).err(),
            Some(FsError::TooManyOpen)
        );
        assert!(files.insert(NodeId(4), fd()).is_ok());
    }
}
