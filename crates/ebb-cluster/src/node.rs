//! What a node is asked to be ([`NodeSpec`]) and what it is
//! ([`NodeState`], [`Exit`]).

use std::fmt;
use std::path::PathBuf;

/// A native node to allocate: its image and resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// The native image (an ELF with a PVH entry, see `crates/ebb-native`).
    pub image: PathBuf,
    /// vCPUs (one core each).
    pub cores: usize,
    /// Memory, in QEMU's `-m` syntax (`256M`).
    pub memory: String,
    /// The application's command line (after the platform's options).
    pub args: Vec<String>,
}

/// How a node's VM ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The application in it exited with this code (our images report it
    /// through QEMU's `isa-debug-exit`: `ebb_boot_abi::exit`).
    Guest(u8),
    /// It exited with this status.
    Code(i32),
    /// A signal ended it (`kill -9`: 9).
    Signal(i32),
}

impl Exit {
    /// The exit of a process from its wait status.
    pub fn from_status(status: std::process::ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Code(-1),
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Guest(code) => write!(f, "its application exited with code {code}"),
            Exit::Code(code) => write!(f, "its VM exited with status {code}"),
            Exit::Signal(signal) => write!(f, "its VM was killed by signal {signal}"),
        }
    }
}

/// Where a node is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Its VM runs; readiness has not been seen yet.
    Booting,
    /// Ready (see [`crate::Readiness`]).
    Ready,
    /// Stopped or killed on request.
    Stopped,
    /// Its VM ended without being asked to.
    Lost(Exit),
}

impl NodeState {
    /// Whether its VM has ended.
    pub fn is_over(self) -> bool {
        matches!(self, NodeState::Stopped | NodeState::Lost(_))
    }
}

impl fmt::Display for NodeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeState::Booting => f.write_str("booting"),
            NodeState::Ready => f.write_str("ready"),
            NodeState::Stopped => f.write_str("stopped"),
            NodeState::Lost(Exit::Guest(code)) => write!(f, "lost (app exit {code})"),
            NodeState::Lost(Exit::Code(code)) => write!(f, "lost (exit {code})"),
            NodeState::Lost(Exit::Signal(signal)) => write!(f, "lost (signal {signal})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_as_the_node_table_shows_them() {
        assert_eq!(NodeState::Ready.to_string(), "ready");
        assert_eq!(
            NodeState::Lost(Exit::Signal(9)).to_string(),
            "lost (signal 9)"
        );
        assert_eq!(NodeState::Lost(Exit::Code(1)).to_string(), "lost (exit 1)");
        assert_eq!(
            NodeState::Lost(Exit::Guest(2)).to_string(),
            "lost (app exit 2)"
        );
        assert_eq!(
            Exit::Guest(2).to_string(),
            "its application exited with code 2"
        );
        assert!(NodeState::Stopped.is_over() && !NodeState::Booting.is_over());
        assert_eq!(Exit::Signal(9).to_string(), "its VM was killed by signal 9");
    }
}
