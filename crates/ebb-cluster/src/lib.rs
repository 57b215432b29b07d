//! Ebbflow's NodeAllocator (DESIGN §5, issue 16): the hosted frontend
//! starts, watches and stops native nodes. Hosted-only (std, Linux).
//!
//! - [`NodeAllocator`] ([`allocator`]): `allocate(spec) -> NodeHandle`
//!   boots a node on the cluster's network and returns once it is ready;
//!   every node is watched, and one whose VM dies becomes `Lost`; on drop
//!   every node is stopped and the network deleted.
//! - [`Launcher`] ([`launcher`]): how a node's VM starts; [`QemuLauncher`]
//!   ([`qemu`]) drives QEMU over QMP, booting each node with the QEMU
//!   command line of [`NativeCommandLine`] ([`node_command`]).
//! - [`Readiness`] ([`readiness`]): when a node counts as ready; the hook
//!   where the Messenger's announcement plugs in ([`ConsoleLine`] until
//!   then). [`BootContract`] ([`launcher`]): the other hook, what each
//!   node is told at boot (its id range and the frontend's Messenger
//!   address; nothing until then).
//! - The network itself is `ebb_testbed::cluster_net` (a namespace with a
//!   bridge, a TAP device per node, the frontend on a veth pair).
//!
//! `./ebb cluster` (`crates/ebb-cli`) is the command line on top; how it
//! all fits, and what other launchers would need, is in `docs/cluster.md`.

// One unsafe block: the pre-exec hook that ties QEMU's life to the
// frontend's (`qemu::die_with_this_thread`).
#![deny(unsafe_code)]

pub mod allocator;
pub mod error;
pub mod frontend;
pub mod launcher;
pub mod messenger_hooks;
pub mod node;
pub mod node_command;
pub mod qemu;
pub mod readiness;
pub mod state_file;

pub use allocator::{NodeAllocator, NodeHandle};
pub use error::ClusterError;
pub use launcher::{BootContract, LaunchSpec, LaunchedNode, Launcher, NoContract};
pub use messenger_hooks::{Announced, MessengerContract};
pub use node::{Exit, NodeSpec, NodeState};
pub use node_command::NativeCommandLine;
pub use qemu::{QemuCommandLine, QemuLauncher};
pub use readiness::{ConsoleLine, NotReady, Readiness, ReadyProbe};
