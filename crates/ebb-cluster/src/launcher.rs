//! The launcher: how a node's VM is started and driven. A trait, so that
//! QEMU ([`crate::QemuLauncher`]) is one implementation and a Firecracker
//! or Cloud Hypervisor launcher can be another (what they would need is in
//! `docs/cluster.md`).

use std::path::{Path, PathBuf};

use ebb_core::NodeId;
use ebb_testbed::cluster_net::NodeLink;

use crate::node::{Exit, NodeSpec};

/// Everything a launcher is told about one node.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The node's id.
    pub id: NodeId,
    /// Image and resources.
    pub node: NodeSpec,
    /// Its place on the cluster's network: TAP device, address, MAC, the
    /// frontend's address.
    pub link: NodeLink,
    /// The network namespace the VM runs in (its TAP device is there).
    pub namespace: String,
    /// Where the node's console (and the VM monitor's messages) go.
    pub console_log: PathBuf,
    /// A private directory for the launcher's sockets.
    pub runtime_dir: PathBuf,
    /// Platform options for the node's command line from the
    /// [`BootContract`] (the Messenger's `node= frontend= ebb_ids=
    /// messenger_port=`); the launcher puts them before the application's
    /// arguments.
    pub boot_args: Vec<String>,
}

/// What a node is told at boot besides its address: the hook where the
/// frontend hands each node its place in the distributed application
/// (`ebb_messenger::Frontend::expect` gives its global id range, and
/// `ebb_boot_abi::NodeContract`'s words carry id, frontend address, range
/// and Messenger port). Called once per node, before its VM starts.
pub trait BootContract: Send + Sync {
    /// The platform options for node `id` at `link`; an error keeps the
    /// node from starting.
    fn boot_args(&self, id: NodeId, link: &NodeLink) -> Result<Vec<String>, String>;
}

/// A shared contract (the frontend keeps one to read the nodes' ranges).
impl<C: BootContract + ?Sized> BootContract for std::sync::Arc<C> {
    fn boot_args(&self, id: NodeId, link: &NodeLink) -> Result<Vec<String>, String> {
        (**self).boot_args(id, link)
    }
}

/// No boot contract: nodes that run alone (what `./ebb cluster` boots
/// until the Messenger's frontend is plugged in).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoContract;

impl BootContract for NoContract {
    fn boot_args(&self, _: NodeId, _: &NodeLink) -> Result<Vec<String>, String> {
        Ok(Vec::new())
    }
}

/// Starts nodes.
pub trait Launcher: Send + Sync {
    /// Starts the node's VM (it boots on its own); returns once the VM runs
    /// and can be controlled. The process must be spawned on the calling
    /// thread: a launcher may tie the VM's life to it
    /// (`PR_SET_PDEATHSIG` fires when the spawning *thread* ends).
    fn launch(&self, spec: &LaunchSpec) -> Result<Box<dyn LaunchedNode>, String>;
}

/// A node's running VM, as its launcher drives it.
pub trait LaunchedNode: Send + Sync {
    /// The VM's host process id.
    fn pid(&self) -> u32;
    /// The console log.
    fn console_log(&self) -> &Path;
    /// The VM monitor's control socket, if it has one (QEMU: the QMP
    /// socket). It names this VM alone, so `./ebb cluster down` checks
    /// that a process's command line holds it before killing it.
    fn control_socket(&self) -> Option<&Path> {
        None
    }
    /// Asks the VM to end in order (QEMU: QMP `quit`).
    fn stop(&self) -> Result<(), String>;
    /// Kills the VM's process (SIGKILL).
    fn kill(&self) -> Result<(), String>;
    /// The VM's run state (QEMU: QMP `query-status`: `running`, `paused`...).
    fn status(&self) -> Result<String, String>;
    /// The host thread ids of the vCPUs, in order, for pinning (QEMU: QMP
    /// `query-cpus-fast`).
    fn vcpu_threads(&self) -> Result<Vec<u32>, String>;
    /// Blocks until the VM's process has ended, and reaps it; called once,
    /// by the allocator's watcher thread, while the other methods may still
    /// be called from elsewhere.
    fn wait(&self) -> Exit;
}
