//! The files each client node has open: handles are per node (a node
//! cannot use another's), numbered from 1, at most
//! [`MAX_OPEN_PER_NODE`] at once, and all closed when the node is
//! forgotten (lost). All nodes together hold at most the total limit
//! ([`total_limit`]: half the process's descriptors), so nodes cannot use
//! up the descriptors the hosted node needs for everything else (node ids
//! are the Messenger's hellos, which nothing authenticates: one client can
//! claim many).
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

/// How many files all nodes together may have open when the process's
/// descriptor limit is unlimited or unknown.
pub const MAX_OPEN_TOTAL: usize = 8192;

/// How many files all nodes together may have open: half the process's
/// soft RLIMIT_NOFILE (getrlimit(2)), leaving the other half for the
/// hosted node's sockets, logs and children, and at most
/// [`MAX_OPEN_TOTAL`].
#[must_use]
pub fn total_limit() -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    soft.and_then(|soft| usize::try_from(soft / 2).ok())
        .map_or(MAX_OPEN_TOTAL, |half| half.min(MAX_OPEN_TOTAL))
}

/// One node's open files.
#[derive(Default)]
struct NodeFiles {
    /// The next handle to try.
    next: u32,
    open: BTreeMap<u32, Arc<OwnedFd>>,
}

/// Every node's open files.
pub(crate) struct OpenFiles {
    nodes: Mutex<Table>,
    /// At most this many files for all nodes together.
    total_limit: usize,
}

/// The files, and how many there are in all.
#[derive(Default)]
struct Table {
    by_node: HashMap<NodeId, NodeFiles>,
    total: usize,
}

impl OpenFiles {
    /// No files yet; at most `total_limit` open at once in all.
    pub(crate) fn new(total_limit: usize) -> OpenFiles {
        OpenFiles {
            nodes: Mutex::new(Table::default()),
            total_limit,
        }
    }

    /// Keeps `fd` open for `node`; its new handle.
    ///
    /// # Errors
    ///
    /// [`FsError::TooManyOpen`] when `node` has [`MAX_OPEN_PER_NODE`]
    /// files open or all nodes together the total limit (`fd` is closed).
    pub(crate) fn insert(&self, node: NodeId, fd: OwnedFd) -> Result<Handle, FsError> {
        let mut table = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        if table.total >= self.total_limit {
            return Err(FsError::TooManyOpen);
        }
        let files = table.by_node.entry(node).or_default();
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
        table.total += 1;
        Ok(Handle(handle))
    }

    /// `node`'s file `handle`.
    pub(crate) fn get(&self, node: NodeId, handle: Handle) -> Result<Arc<OwnedFd>, FsError> {
        let table = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        table
            .by_node
            .get(&node)
            .and_then(|files| files.open.get(&handle.0))
            .cloned()
            .ok_or(FsError::BadHandle)
    }

    /// Closes `node`'s file `handle`.
    pub(crate) fn remove(&self, node: NodeId, handle: Handle) -> Result<(), FsError> {
        let mut table = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let files = table.by_node.get_mut(&node).ok_or(FsError::BadHandle)?;
        files.open.remove(&handle.0).ok_or(FsError::BadHandle)?;
        table.total -= 1;
        Ok(())
    }

    /// Closes every file of `node`; how many there were.
    pub(crate) fn forget(&self, node: NodeId) -> usize {
        let mut table = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let closed = table
            .by_node
            .remove(&node)
            .map_or(0, |files| files.open.len());
        table.total -= closed;
        closed
    }

    /// How many files `node` has open.
    pub(crate) fn count(&self, node: NodeId) -> usize {
        let table = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        table.by_node.get(&node).map_or(0, |files| files.open.len())
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
        let files = OpenFiles::new(MAX_OPEN_TOTAL);
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
        let files = OpenFiles::new(MAX_OPEN_TOTAL);
        for _ in 0..MAX_OPEN_PER_NODE {
            files.insert(NodeId(3), fd()).unwrap();
        }
        assert_eq!(
            files.insert(NodeId(3), fd()).err(),
            Some(FsError::TooManyOpen)
        );
        assert!(files.insert(NodeId(4), fd()).is_ok());
    }

    #[test]
    fn all_nodes_together_open_at_most_the_total() {
        let files = OpenFiles::new(3);
        files.insert(NodeId(1), fd()).unwrap();
        let b = files.insert(NodeId(2), fd()).unwrap();
        files.insert(NodeId(3), fd()).unwrap();
        // A node with nothing open yet is refused too: the total is used up.
        assert_eq!(
            files.insert(NodeId(4), fd()).err(),
            Some(FsError::TooManyOpen)
        );
        // A close or a forgotten node gives room back.
        files.remove(NodeId(2), b).unwrap();
        files.insert(NodeId(4), fd()).unwrap();
        assert_eq!(files.forget(NodeId(1)), 1);
        files.insert(NodeId(5), fd()).unwrap();
        assert_eq!(
            files.insert(NodeId(6), fd()).err(),
            Some(FsError::TooManyOpen)
        );
    }

    #[test]
    fn the_total_is_half_the_descriptor_limit_at_most_its_cap() {
        let limit = total_limit();
        assert!((1..=MAX_OPEN_TOTAL).contains(&limit), "{limit}");
        if let Some(soft) = rustix::process::getrlimit(rustix::process::Resource::Nofile).current {
            assert!(limit as u64 <= soft / 2, "{limit} of {soft}");
        }
    }
}
