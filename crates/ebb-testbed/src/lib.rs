//! Ebbflow's testbed: everything that launches a guest or wires up a
//! network for one, shared by `./ebb` (crates/ebb-cli), the benchmarks
//! (bench/) and the integration tests, so that none of them writes it
//! again. Hosted-only (std, Linux).
//!
//! - [`need`]: prerequisites (root, `/dev/net/tun`, tools on `PATH`) and
//!   the one skip policy for tests that need them ([`require`], [`skip`],
//!   [`skip_unless!`]).
//! - [`netns`], [`tap`], [`link`]: network namespaces, TAP devices,
//!   bridges and veth pairs, each deleted on drop (also when a test fails
//!   or a benchmark returns early), so nothing is left behind.
//! - [`cluster_net`]: a cluster's network in one namespace: a bridge, one
//!   TAP device per node, the frontend on a veth pair, addresses handed out
//!   from a /24.
//! - [`fuzz_corpus`]: a fuzz target's seed corpus replayed on stable.
//! - [`etcd`]: a private etcd server (free ports, data in a temporary
//!   directory, stopped and restarted on demand, gone on drop).
//! - [`pin`]: CPU pinning of the calling thread.
//! - [`qemu`]: what every QEMU launch needs (accelerator, the host's TSC
//!   rate, shell-quoted command lines for `-v`), a QMP client, and the
//!   serial console read line by line with timeouts ([`lines`]).
//! - [`native_image`]: building an application's native image.
//! - [`linux_guest`]: the Linux comparison guest, built from Debian
//!   packages and booted on the same virtual hardware as our images.

pub mod child;
pub mod cluster_net;
pub mod etcd;
pub mod fuzz_corpus;
pub mod lines;
pub mod link;
pub mod linux_guest;
pub mod native_image;
pub mod need;
pub mod netns;
pub mod pin;
pub mod qemu;
pub mod tap;

pub use child::KilledOnDrop;
pub use etcd::Etcd;
pub use need::{require, skip, Need, Skip};

/// A TCP port on 127.0.0.1 that was free a moment ago (for QEMU's
/// forwards and servers started on loopback).
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// The Ebbflow workspace root: `EBB_ROOT` when set (by `./ebb`), else two
/// levels above this crate's manifest.
pub fn workspace_root() -> std::path::PathBuf {
    match std::env::var_os("EBB_ROOT") {
        Some(root) if !root.is_empty() => std::path::PathBuf::from(root),
        _ => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
    }
}
