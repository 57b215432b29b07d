//! What can go wrong allocating and driving nodes: one variant per case,
//! each with the sentence a user reads (the console's tail where the node
//! itself is the reason).

use std::fmt;
use std::time::Duration;

use ebb_core::NodeId;

use crate::node::Exit;

/// An error of the [`crate::NodeAllocator`] or a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterError {
    /// The cluster's network (namespace, bridge, TAP) could not be set up.
    Network(String),
    /// The allocator's directories (console logs, the launchers' private
    /// socket directory) could not be made.
    Files(String),
    /// The launcher could not start the node (QEMU missing, bad image...).
    Launch {
        /// The node.
        id: NodeId,
        /// Why, in the launcher's words.
        reason: String,
    },
    /// The node did not become ready in time (it was killed).
    NeverReady {
        /// The node.
        id: NodeId,
        /// How long it was given.
        waited: Duration,
        /// What readiness waited for.
        awaited: String,
        /// The last lines of its console.
        tail: String,
    },
    /// The node's VM exited before it became ready.
    ExitedWhileBooting {
        /// The node.
        id: NodeId,
        /// How it ended.
        exit: Exit,
        /// The last lines of its console.
        tail: String,
    },
    /// The frontend forgot the node before it announced itself (it was
    /// stopped while booting).
    Forgotten {
        /// The node.
        id: NodeId,
    },
    /// The node was lost (its VM exited without being asked to): calls to
    /// it fail with this.
    Lost {
        /// The node.
        id: NodeId,
        /// How it ended.
        exit: Exit,
    },
    /// The node was stopped on request: calls to it fail with this.
    Stopped {
        /// The node.
        id: NodeId,
    },
    /// The frontend is stopping: no more nodes are booted.
    ShuttingDown,
    /// No node has this id.
    UnknownNode {
        /// The id.
        id: NodeId,
    },
    /// The VM's control channel (QMP) failed.
    Control {
        /// The node.
        id: NodeId,
        /// The failure.
        reason: String,
    },
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterError::Network(reason) => write!(f, "the cluster's network: {reason}"),
            ClusterError::Files(reason) => write!(f, "the cluster's files: {reason}"),
            ClusterError::Launch { id, reason } => write!(f, "node {id} did not start: {reason}"),
            ClusterError::NeverReady {
                id,
                waited,
                awaited,
                tail,
            } => write!(
                f,
                "node {id} did not become ready within {} s (waited for {awaited}); \
                 the end of its console:\n{tail}",
                waited.as_secs()
            ),
            ClusterError::ExitedWhileBooting { id, exit, tail } => write!(
                f,
                "node {id} exited while booting ({exit}); the end of its console:\n{tail}"
            ),
            ClusterError::Forgotten { id } => write!(
                f,
                "node {id} was forgotten by the frontend before it announced itself"
            ),
            ClusterError::Lost { id, exit } => write!(f, "node {id} is lost ({exit})"),
            ClusterError::Stopped { id } => write!(f, "node {id} was stopped"),
            ClusterError::ShuttingDown => {
                f.write_str("the frontend is stopping: no more nodes are booted")
            }
            ClusterError::UnknownNode { id } => write!(f, "there is no node {id}"),
            ClusterError::Control { id, reason } => write!(f, "node {id}: {reason}"),
        }
    }
}

impl std::error::Error for ClusterError {}
