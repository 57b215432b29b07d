//! [`NodeAllocator`]: boots nodes on the cluster's network, watches them,
//! and tears everything down.
//!
//! Every node has a watcher thread blocked in [`LaunchedNode::wait`]: when
//! the VM's process ends, the node becomes `Stopped` (if it was asked to
//! end) or `Lost` (otherwise: `kill -9`, a crash, the OOM killer), its TAP
//! device is removed, and from then on every call to it fails with
//! [`ClusterError::Lost`] or [`ClusterError::Stopped`]. A thread that
//! reaps its child cannot miss an exit, and needs no polling.
//!
//! Teardown ([`NodeAllocator::shutdown`], also on drop): every node gets
//! an orderly stop (QMP `quit`, all side by side), those not ended
//! [`STOP_GRACE`] later (one deadline for all) are killed, and all are
//! reaped; then the namespace is deleted with
//! everything in it. What covers the frontend's own death is in
//! `docs/cluster.md` ("Teardown").

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ebb_core::NodeId;
use ebb_testbed::cluster_net::ClusterNetwork;
use ebb_testbed::qemu::qmp::SocketDir;

use crate::error::ClusterError;
use crate::launcher::{BootContract, LaunchSpec, LaunchedNode, Launcher, NoContract};
use crate::node::{NodeSpec, NodeState};
use crate::readiness::{console_tail, NotReady, Readiness, ReadyProbe};

/// How long a node may take to end after an orderly stop before it is
/// killed.
pub const STOP_GRACE: Duration = Duration::from_secs(10);
/// How long a killed node's process may take to be reaped.
const KILL_GRACE: Duration = Duration::from_secs(5);
/// How long a node may take to become ready by default: TCG boots a node
/// in seconds, but several at once on a loaded 2-core machine take longer.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(120);
/// Console lines shown when a node fails.
const TAIL_LINES: usize = 20;

/// Allocates native nodes on one cluster network.
pub struct NodeAllocator {
    // Nodes first: they are stopped before the network goes (drop order).
    nodes: Mutex<Vec<NodeHandle>>,
    /// Set by [`NodeAllocator::shutdown`] while it holds `nodes`: a launch
    /// that sees it starts no VM, or kills the one it just started instead
    /// of adding it, and a node still awaited stops waiting.
    closed: AtomicBool,
    launcher: Box<dyn Launcher>,
    contract: Box<dyn BootContract>,
    readiness: Box<dyn Readiness>,
    ready_timeout: Duration,
    /// How long nodes may take to end after an orderly stop, all together.
    stop_grace: Duration,
    log_dir: PathBuf,
    /// The launchers' sockets (QMP), private to this process.
    runtime_dir: SocketDir,
    next_id: AtomicU32,
    network: Arc<ClusterNetwork>,
    /// Told every state change after `Booting` (see
    /// [`NodeAllocator::on_state_change`]).
    state_hook: StateHook,
}

/// What [`NodeAllocator::on_state_change`] takes.
type StateHook = Arc<dyn Fn(&NodeHandle, NodeState) + Send + Sync>;

impl NodeAllocator {
    /// An allocator for nodes on `network`, started by `launcher`, ready
    /// by `readiness` (the hook: see [`crate::readiness`]), with console
    /// logs `node-ID.log` in `log_dir` (created if missing).
    pub fn new(
        network: ClusterNetwork,
        launcher: impl Launcher + 'static,
        readiness: impl Readiness + 'static,
        log_dir: &Path,
    ) -> Result<NodeAllocator, ClusterError> {
        std::fs::create_dir_all(log_dir)
            .map_err(|e| ClusterError::Files(format!("{}: {e}", log_dir.display())))?;
        Ok(NodeAllocator {
            nodes: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            launcher: Box::new(launcher),
            contract: Box::new(NoContract),
            readiness: Box::new(readiness),
            ready_timeout: DEFAULT_READY_TIMEOUT,
            stop_grace: STOP_GRACE,
            log_dir: log_dir.to_owned(),
            runtime_dir: runtime_dir().map_err(ClusterError::Files)?,
            // Node 0 is the frontend.
            next_id: AtomicU32::new(1),
            network: Arc::new(network),
            state_hook: Arc::new(|_: &NodeHandle, _| {}),
        })
    }

    /// The same, giving each node `timeout` to become ready.
    #[must_use]
    pub fn with_ready_timeout(mut self, timeout: Duration) -> NodeAllocator {
        self.ready_timeout = timeout;
        self
    }

    /// The same, giving the nodes `grace`, all together, to end after an
    /// orderly stop in [`NodeAllocator::shutdown`] ([`STOP_GRACE`] by
    /// default); then they are killed.
    #[must_use]
    pub fn with_stop_grace(mut self, grace: Duration) -> NodeAllocator {
        self.stop_grace = grace;
        self
    }

    /// The same, telling each node `contract`'s boot arguments (the hook
    /// for the Messenger's boot contract: see [`BootContract`]).
    #[must_use]
    pub fn with_boot_contract(mut self, contract: impl BootContract + 'static) -> NodeAllocator {
        self.contract = Box::new(contract);
        self
    }

    /// The same, calling `hook` with the node and its new state whenever a
    /// node becomes `Ready`, `Stopped` or `Lost` (from the thread that saw
    /// it: the allocating thread for `Ready`, the node's watcher for its
    /// end). The frontend runtime forgets a node that ended and tells the
    /// Messenger (`lose_node`) here. The hook must not block long: a
    /// watcher calls it after the node's end is recorded, so the node's
    /// state already says so.
    #[must_use]
    pub fn on_state_change(
        mut self,
        hook: impl Fn(&NodeHandle, NodeState) + Send + Sync + 'static,
    ) -> NodeAllocator {
        self.state_hook = Arc::new(hook);
        self
    }

    /// The cluster's network (run the frontend in its namespace).
    pub fn network(&self) -> &ClusterNetwork {
        &self.network
    }

    /// Boots a node and returns once it is ready; a node that is not ready
    /// within the timeout is killed, and the error shows its console's end.
    pub fn allocate(&self, spec: NodeSpec) -> Result<NodeHandle, ClusterError> {
        let node = self.launch(spec)?;
        self.await_ready(&node).map(|()| node)
    }

    /// Boots nodes side by side: all are started first (on this thread,
    /// see [`Launcher::launch`]), then awaited together. One result per
    /// spec, in order.
    pub fn allocate_all(&self, specs: Vec<NodeSpec>) -> Vec<Result<NodeHandle, ClusterError>> {
        let launched: Vec<_> = specs.into_iter().map(|spec| self.launch(spec)).collect();
        std::thread::scope(|scope| {
            let waits: Vec<_> = launched
                .into_iter()
                .map(|node| {
                    scope.spawn(move || node.and_then(|n| self.await_ready(&n).map(|()| n)))
                })
                .collect();
            // A readiness check that panics is a bug: it panics here too.
            waits
                .into_iter()
                .map(|wait| wait.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }

    /// Every node allocated so far (failed ones included), in id order.
    pub fn nodes(&self) -> Vec<NodeHandle> {
        self.nodes_locked().clone()
    }

    /// Stops every node (orderly, then killed after [`STOP_GRACE`]) and
    /// reaps them, in bounded time whatever the nodes do: all are asked to
    /// stop at once (side by side: a launcher's stop may wait for its VM's
    /// answer, QEMU's up to a QMP timeout of 2 s), then all share one
    /// deadline, then what is left is killed (SIGKILL through a pidfd), and
    /// a watcher is joined only once its node has ended. The namespace
    /// goes when the allocator is dropped.
    ///
    /// From then on the allocator is closed: an `allocate` under way on
    /// another thread boots no more nodes, a node it launches meanwhile is
    /// killed, and those it awaits fail with [`ClusterError::ShuttingDown`]
    /// (or `Stopped`) at once. Every node ended here counts as stopped,
    /// never lost: it is marked as being stopped before it is asked to end.
    pub fn shutdown(&self) {
        let nodes = {
            let mut nodes = self.nodes_locked();
            self.closed.store(true, Ordering::SeqCst);
            std::mem::take(&mut *nodes)
        };
        for node in &nodes {
            node.0.stopping.store(true, Ordering::SeqCst);
        }
        std::thread::scope(|scope| {
            for node in nodes.iter().filter(|node| !node.state().is_over()) {
                scope.spawn(move || {
                    let _ = node.stop();
                });
            }
        });
        let until = |deadline: Instant| deadline.saturating_duration_since(Instant::now());
        let deadline = Instant::now() + self.stop_grace;
        for node in &nodes {
            let _ = node.wait_for_end(until(deadline));
        }
        for node in nodes.iter().filter(|node| !node.state().is_over()) {
            let _ = node.kill();
        }
        let deadline = Instant::now() + KILL_GRACE;
        for node in &nodes {
            if node.wait_for_end(until(deadline)).is_none() {
                // Unkillable (a process in uninterruptible sleep): its
                // watcher thread stays blocked in wait(2); leave it.
                eprintln!(
                    "warning: node {} (process {}) did not end within {} s of SIGKILL",
                    node.id(),
                    node.pid(),
                    KILL_GRACE.as_secs()
                );
                continue;
            }
            let watcher = node
                .0
                .watcher
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(watcher) = watcher {
                // It has set the node's state, its last step.
                let _ = watcher.join();
            }
        }
    }

    fn nodes_locked(&self) -> MutexGuard<'_, Vec<NodeHandle>> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts a node on the network and starts its VM and its watcher.
    fn launch(&self, spec: NodeSpec) -> Result<NodeHandle, ClusterError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(ClusterError::ShuttingDown);
        }
        let id = NodeId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let link = self.network.add_node(id.0).map_err(ClusterError::Network)?;
        let boot_args = self.contract.boot_args(id, &link).map_err(|reason| {
            self.network.remove_node(id.0);
            ClusterError::Launch { id, reason }
        })?;
        let launch = LaunchSpec {
            id,
            link,
            namespace: self.network.namespace().name().to_owned(),
            console_log: self.log_dir.join(format!("node-{id}.log")),
            runtime_dir: self.runtime_dir.path().to_owned(),
            boot_args,
            node: spec,
        };
        let launched = self.launcher.launch(&launch).map_err(|reason| {
            self.network.remove_node(id.0);
            ClusterError::Launch { id, reason }
        })?;
        let node = NodeHandle(Arc::new(NodeInner {
            id,
            address: launch.link.address,
            cores: launch.node.cores,
            memory: launch.node.memory.clone(),
            launched,
            state: Mutex::new(NodeState::Booting),
            changed: Condvar::new(),
            stopping: AtomicBool::new(false),
            watcher: Mutex::new(None),
        }));
        let watched = node.clone();
        let network = Arc::clone(&self.network);
        let hook = Arc::clone(&self.state_hook);
        let watcher = std::thread::Builder::new()
            .name(format!("node-{id}-watcher"))
            .spawn(move || {
                let exit = watched.0.launched.wait();
                let state = if watched.0.stopping.load(Ordering::SeqCst) {
                    NodeState::Stopped
                } else {
                    NodeState::Lost(exit)
                };
                // First the device: once a node is seen ended, its TAP is gone.
                network.remove_node(watched.id().0);
                watched.0.set_state(state);
                hook(&watched, state);
            })
            .map_err(|e| ClusterError::Launch {
                id,
                reason: format!("cannot start a watcher thread: {e}"),
            });
        let watcher = match watcher {
            Ok(watcher) => watcher,
            Err(e) => {
                let _ = node.kill();
                return Err(e);
            }
        };
        *node
            .0
            .watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(watcher);
        let mut nodes = self.nodes_locked();
        if self.closed.load(Ordering::SeqCst) {
            // Shutdown has taken the list: this node is ended here.
            drop(nodes);
            let _ = node.kill();
            let _ = node.wait_for_end(KILL_GRACE);
            return Err(ClusterError::ShuttingDown);
        }
        nodes.push(node.clone());
        Ok(node)
    }

    /// Waits for `node` to be ready ([`Readiness`]); kills it if it is not.
    fn await_ready(&self, node: &NodeHandle) -> Result<(), ClusterError> {
        // A closed allocator ends its nodes: waiting is over too.
        let ended = || node.state().is_over() || self.closed.load(Ordering::SeqCst);
        let probe = ReadyProbe {
            id: node.id(),
            address: node.address(),
            console_log: node.console_log(),
            ended: &ended,
        };
        let outcome = self
            .readiness
            .wait_ready(&probe, Instant::now() + self.ready_timeout);
        let tail = || console_tail(node.console_log(), TAIL_LINES);
        if outcome.is_err() && self.closed.load(Ordering::SeqCst) {
            // Shutdown stops the node (it may not have yet).
            return Err(ClusterError::ShuttingDown);
        }
        match outcome {
            Ok(()) => {
                let became_ready = {
                    let mut state = node.0.state_locked();
                    let booting = *state == NodeState::Booting;
                    if booting {
                        *state = NodeState::Ready;
                        node.0.changed.notify_all();
                    }
                    booting
                };
                if became_ready {
                    (self.state_hook)(node, NodeState::Ready);
                }
                Ok(())
            }
            Err(NotReady::TimedOut) => {
                let _ = node.kill();
                let _ = node.wait_for_end(STOP_GRACE);
                Err(ClusterError::NeverReady {
                    id: node.id(),
                    waited: self.ready_timeout,
                    awaited: self.readiness.awaited(),
                    tail: tail(),
                })
            }
            Err(NotReady::Forgotten) => {
                let _ = node.kill();
                let _ = node.wait_for_end(STOP_GRACE);
                Err(ClusterError::Forgotten { id: node.id() })
            }
            Err(NotReady::Ended) => match node.state() {
                NodeState::Lost(exit) => Err(ClusterError::ExitedWhileBooting {
                    id: node.id(),
                    exit,
                    tail: tail(),
                }),
                _ => Err(ClusterError::Stopped { id: node.id() }),
            },
        }
    }
}

impl Drop for NodeAllocator {
    fn drop(&mut self) {
        self.shutdown();
        // Then the network (its namespace, and everything in it) goes.
    }
}

/// One node, as the frontend holds it (cheap to clone).
#[derive(Clone)]
pub struct NodeHandle(Arc<NodeInner>);

struct NodeInner {
    id: NodeId,
    address: Ipv4Addr,
    cores: usize,
    memory: String,
    launched: Box<dyn LaunchedNode>,
    state: Mutex<NodeState>,
    /// Signalled on every state change.
    changed: Condvar,
    /// Set before the allocator stops or kills the node: its end is then a
    /// stop, not a loss.
    stopping: AtomicBool,
    watcher: Mutex<Option<JoinHandle<()>>>,
}

impl NodeInner {
    fn state_locked(&self) -> MutexGuard<'_, NodeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_state(&self, state: NodeState) {
        *self.state_locked() = state;
        self.changed.notify_all();
    }
}

impl std::fmt::Debug for NodeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeHandle")
            .field("id", &self.0.id)
            .field("address", &self.0.address)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl NodeHandle {
    /// The node's id.
    pub fn id(&self) -> NodeId {
        self.0.id
    }

    /// Its address on the cluster's network.
    pub fn address(&self) -> Ipv4Addr {
        self.0.address
    }

    /// Its vCPUs.
    pub fn cores(&self) -> usize {
        self.0.cores
    }

    /// Its memory (QEMU's `-m` syntax).
    pub fn memory(&self) -> &str {
        &self.0.memory
    }

    /// Where its console goes.
    pub fn console_log(&self) -> &Path {
        self.0.launched.console_log()
    }

    /// Its VM's host process id.
    pub fn pid(&self) -> u32 {
        self.0.launched.pid()
    }

    /// Its VM monitor's control socket, if the launcher has one
    /// ([`LaunchedNode::control_socket`]).
    pub fn control_socket(&self) -> Option<&Path> {
        self.0.launched.control_socket()
    }

    /// Where it is in its life.
    pub fn state(&self) -> NodeState {
        *self.0.state_locked()
    }

    /// Asks the VM to end in order (QMP `quit`); kills it if that fails.
    pub fn stop(&self) -> Result<(), ClusterError> {
        self.usable()?;
        self.0.stopping.store(true, Ordering::SeqCst);
        if let Err(reason) = self.0.launched.stop() {
            self.0
                .launched
                .kill()
                .map_err(|kill| ClusterError::Control {
                    id: self.id(),
                    reason: format!("{reason}; then {kill}"),
                })?;
        }
        Ok(())
    }

    /// Kills the VM (SIGKILL); it counts as stopped, not lost.
    pub fn kill(&self) -> Result<(), ClusterError> {
        self.usable()?;
        self.0.stopping.store(true, Ordering::SeqCst);
        self.simulate_loss()
    }

    /// Kills the VM (SIGKILL) as a crash would: unlike [`NodeHandle::kill`],
    /// nobody asked for its end, so it counts as lost (`Lost(Signal(9))`),
    /// as after a `kill -9` from another shell; for tests and demos of a
    /// node's loss.
    pub fn simulate_loss(&self) -> Result<(), ClusterError> {
        self.usable()?;
        self.0
            .launched
            .kill()
            .map_err(|reason| ClusterError::Control {
                id: self.id(),
                reason,
            })
    }

    /// The VM's run state from QMP (`running`...); an error once the node
    /// is lost or stopped.
    pub fn status(&self) -> Result<String, ClusterError> {
        self.control(|launched| launched.status())
    }

    /// The host thread ids of its vCPUs, for pinning
    /// (`ebb_testbed::pin::pin_thread`).
    pub fn vcpu_threads(&self) -> Result<Vec<u32>, ClusterError> {
        self.control(|launched| launched.vcpu_threads())
    }

    /// Waits up to `limit` for the node's VM to end; its final state.
    pub fn wait_for_end(&self, limit: Duration) -> Option<NodeState> {
        let state = self.0.state_locked();
        let (state, _) = self
            .0
            .changed
            .wait_timeout_while(state, limit, |state| !state.is_over())
            .unwrap_or_else(PoisonError::into_inner);
        state.is_over().then_some(*state)
    }

    /// The last `lines` lines of its console.
    pub fn console_tail(&self, lines: usize) -> String {
        console_tail(self.console_log(), lines)
    }

    /// `Ok` while the VM runs; the error calls to it get afterwards.
    fn usable(&self) -> Result<(), ClusterError> {
        match self.state() {
            NodeState::Lost(exit) => Err(ClusterError::Lost {
                id: self.id(),
                exit,
            }),
            NodeState::Stopped => Err(ClusterError::Stopped { id: self.id() }),
            NodeState::Booting | NodeState::Ready => Ok(()),
        }
    }

    /// Runs a control call; a call that fails because the VM just ended
    /// reports the end (the watcher says so within moments).
    fn control<R>(
        &self,
        call: impl FnOnce(&dyn LaunchedNode) -> Result<R, String>,
    ) -> Result<R, ClusterError> {
        self.usable()?;
        call(self.0.launched.as_ref()).map_err(|reason| {
            let _ = self.wait_for_end(Duration::from_secs(1));
            self.usable().err().unwrap_or(ClusterError::Control {
                id: self.id(),
                reason,
            })
        })
    }
}

/// A private directory `ebb-cluster-PID-N` for this allocator's sockets.
fn runtime_dir() -> Result<SocketDir, String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    SocketDir::create(&format!("ebb-cluster-{}-{n}", std::process::id()))
}
