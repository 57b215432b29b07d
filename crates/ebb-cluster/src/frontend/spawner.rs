//! The spawner thread: boots the nodes `allocate` asks for (QEMU's
//! `PR_SET_PDEATHSIG` ties each node to the thread that spawned it, so
//! this one thread lives until every node is stopped), prints the node
//! table, and keeps the state file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use crate::allocator::{NodeAllocator, NodeHandle};
use crate::error::ClusterError;
use crate::node::NodeSpec;
use crate::state_file::{follow, ClusterState, Recorder};

use super::signals::SIGNAL_POLL;
use super::table::node_table;

/// A request to the spawner thread: boot these nodes, answer here.
pub(super) type AllocateRequest = (
    Vec<NodeSpec>,
    ebb_event::Sender<Vec<Result<NodeHandle, ClusterError>>>,
);

/// Starts the spawner thread: it boots what `allocate` asks for, prints
/// the node table, and answers (refusing once the frontend is
/// `stopping`); it lives until the nodes are stopped (`nodes_stopped`), so
/// QEMU's parent-death signal never fires while the cluster runs.
pub(super) fn start_spawner(
    allocator: &Arc<NodeAllocator>,
    stopping: &Arc<AtomicBool>,
    nodes_stopped: &Arc<AtomicBool>,
    mut keeper: Option<StateKeeper>,
) -> Result<(mpsc::Sender<AllocateRequest>, std::thread::JoinHandle<()>), String> {
    let (requests, queue) = mpsc::channel::<AllocateRequest>();
    let allocator = Arc::clone(allocator);
    let stopping = Arc::clone(stopping);
    let nodes_stopped = Arc::clone(nodes_stopped);
    let thread = std::thread::Builder::new()
        .name("ebb-node-spawner".to_owned())
        .spawn(move || loop {
            if let Some(keeper) = keeper.as_mut().filter(|_| !stopping.load(Ordering::SeqCst)) {
                keeper.record(&allocator.nodes());
            }
            let (specs, answer) = match queue.recv_timeout(SIGNAL_POLL) {
                Ok(request) => request,
                Err(_) if nodes_stopped.load(Ordering::SeqCst) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                // Every handle is gone (the loop is over): wait for the
                // nodes to be stopped all the same.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(SIGNAL_POLL);
                    continue;
                }
            };
            let results = if stopping.load(Ordering::SeqCst) {
                specs
                    .iter()
                    .map(|_| Err(ClusterError::ShuttingDown))
                    .collect()
            } else {
                allocator.allocate_all(specs)
            };
            eprint!("{}", node_table(&allocator.nodes()));
            // Recorded before `allocate` resolves: `ps` shows the nodes
            // as soon as the program goes on.
            if let Some(keeper) = keeper.as_mut() {
                keeper.record(&allocator.nodes());
            }
            answer.send(results);
        })
        .map_err(|e| format!("cannot start the node spawner thread: {e}"))?;
    Ok((requests, thread))
}

/// Keeps `./ebb cluster`'s state file ([`crate::state_file`]) for `ps`,
/// `logs` and `down`.
pub(super) struct StateKeeper {
    pub(super) recorder: Recorder,
    pub(super) dir: PathBuf,
    pub(super) shown: Option<ClusterState>,
}

impl StateKeeper {
    /// Records `nodes` (once there are any), saying what changed.
    fn record(&mut self, nodes: &[NodeHandle]) {
        if nodes.is_empty() {
            return;
        }
        let now = self.recorder.state(nodes);
        match &mut self.shown {
            Some(shown) => follow(shown, now, &self.dir),
            None => {
                if let Err(e) = now.write(&self.dir) {
                    eprintln!("warning: {e}");
                }
                self.shown = Some(now);
            }
        }
    }
}
