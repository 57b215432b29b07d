//! The cluster frontend runtime: a hosted program is the frontend of a
//! distributed application in a few lines (DESIGN §5, issue 16).
//!
//! ```no_run
//! use ebb_cluster::frontend::{run_frontend, FrontendOptions};
//! let options = FrontendOptions::new("target/native/x86_64-unknown-none/release/echo");
//! let code = run_frontend(options, |frontend| async move {
//!     let nodes = frontend.allocate(2).await;
//!     // ... calls over frontend.messenger() to each node's first Ebb id ...
//!     i32::from(nodes.iter().any(Result::is_err))
//! });
//! ```
//!
//! [`run_frontend`]:
//! 1. checks root, `/dev/net/tun`, `ip` and QEMU ([`WHY_ROOT`]) and creates
//!    the cluster's network (`ebb_testbed::cluster_net`);
//! 2. makes a [`NodeAllocator`] whose nodes are told their boot contract
//!    ([`MessengerContract`]), count as ready once they have announced
//!    themselves ([`Announced`]), and, when one ends, are forgotten by the
//!    frontend's registry and lost to the Messenger (`lose_node`: calls
//!    pending to it fail with `MessengerError::NodeLost`), with one line
//!    on stderr (`ebb: node 2 lost (its VM was killed by signal 9)`);
//! 3. runs a hosted node (`ebb_hosted`) on a thread inside the cluster's
//!    namespace: its Messenger listens on `10.96.0.1:PORT` and serves the
//!    frontend's registry (`ebb_messenger::Frontend`) and the
//!    application's global id map to the nodes
//!    (`ebb_messenger::map::MapService`, from the map
//!    [`run_frontend_with_map`] is given, or the one
//!    [`FrontendOptions::map`] names for [`run_frontend`]: in process by
//!    default, or on etcd; a lost node's watches end) and the application's
//!    command line (`ebb_messenger::command_line`: the arguments after
//!    `--`, the `EBB_APP_*` variables of this process), then
//!    `main(handle)` runs as a task; its output is the exit code;
//! 4. given a directory to share (`FrontendOptions::share`, `--share
//!    DIR`), serves the FileSystem Ebb from it on that node
//!    (`ebb_offload_host::FileServer`; a lost node's files are closed);
//! 5. when `main` returns, on SIGINT/SIGTERM/SIGHUP/SIGQUIT (128 + the
//!    signal) and when a
//!    core panics, stops every node and deletes the namespace.
//!
//! Nodes are booted by one long-lived *spawner thread*: QEMU gets
//! `PR_SET_PDEATHSIG` tied to the thread that spawned it, so that thread
//! must outlive every node (it ends after the teardown). `allocate`
//! sends it a request and awaits the answer on a cross-core one-shot
//! channel, so no core is blocked while nodes boot.
//!
//! Signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT are caught with
//! `signal_hook` (a handler
//! that sets a flag, process-wide, so it does not matter which thread the
//! kernel picks) while `run_frontend` runs; a watcher turns the flag into
//! `EventRoot::shutdown`; a second signal during the teardown ends the
//! process at once (signal's default action), and once `run_frontend`
//! returns (early errors included) the default actions are back. The hosted runtime's own signal handling
//! (`Config::handle_signals`) is off: it blocks the signals only on the
//! threads it starts, and the spawner and allocator threads are not among
//! them.

mod environment;
pub mod global_map;
mod options;
pub mod registrations;
mod signals;
mod spawner;
mod table;

pub use global_map::{ClusterMap, MapChoice};
pub use options::{
    check_memory, FrontendArgs, FrontendOptions, DEFAULT_IDS_PER_NODE, DEFAULT_MESSENGER_PORT,
};
pub use table::node_table;

use std::future::Future;
use std::net::{SocketAddr, SocketAddrV4};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use ebb_core::{CoreId, GlobalIdMap, NodeId, FIRST_GLOBAL_ID};
use ebb_event::EventRoot;
use ebb_messenger::command_line::CommandLine;
use ebb_messenger::map::MapService;
use ebb_messenger::{
    acceptor, create_messenger, Frontend, MessengerRef, MessengerSettings, NodeEntry, FRONTEND_NODE,
};
use ebb_offload_host::FileServer;
use ebb_testbed::cluster_net::{AddressPlan, ClusterNetwork};
use ebb_testbed::qemu::command::Settings;
use ebb_testbed::{netns, Need};

use crate::allocator::{NodeAllocator, NodeHandle};
use crate::error::ClusterError;
use crate::messenger_hooks::{Announced, MessengerContract};
use crate::node::{Exit, NodeSpec, NodeState};
use crate::node_command::NativeCommandLine;
use crate::qemu::QemuLauncher;
use crate::state_file::{self, Recorder};

use registrations::Registrar;
use signals::Signals;
use spawner::{start_spawner, AllocateRequest, StateKeeper};

/// Why a cluster needs root, for the error when it is not.
pub const WHY_ROOT: &str = "it creates a network namespace holding a bridge, one TAP device per \
     node and a veth pair for the frontend (`ip netns`, `ip link`: CAP_NET_ADMIN), and each \
     node's QEMU opens its TAP device (/dev/net/tun); run ./ebb as root (or the frontend program, under sudo)";

/// A node [`FrontendHandle::allocate`] booted, once it announced itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedNode {
    /// Its id.
    pub id: NodeId,
    /// Its announcement: where its Messenger listens, its cores.
    pub entry: NodeEntry,
    /// Its global Ebb ids (by convention, the application's Ebb on the
    /// node is the first).
    pub ebb_ids: Range<u32>,
    /// Its QEMU's process id.
    pub pid: u32,
    /// Its console log.
    pub console_log: PathBuf,
}

/// The frontend program's view of its cluster, handed to `main`. Cheap to
/// clone.
#[derive(Clone)]
pub struct FrontendHandle(Arc<HandleInner>);

struct HandleInner {
    messenger: MessengerRef,
    registry: Arc<Frontend>,
    map: Arc<dyn GlobalIdMap>,
    contract: Arc<MessengerContract>,
    /// Weak: the runtime owns the allocator and drops it at the end (a
    /// handle kept somewhere must not keep the namespace alive).
    allocator: Weak<NodeAllocator>,
    requests: Mutex<mpsc::Sender<AllocateRequest>>,
    spec: NodeSpec,
    namespace: String,
}

impl FrontendHandle {
    /// The cluster's network namespace (`ip netns exec NAME ...` reaches
    /// the nodes); deleted when the frontend ends.
    pub fn namespace(&self) -> &str {
        &self.0.namespace
    }

    /// Boots `count` nodes side by side and resolves once each has
    /// announced itself or failed (one result per node, in order); the
    /// node table goes to stderr. The calling core keeps running
    /// meanwhile.
    pub async fn allocate(&self, count: usize) -> Vec<Result<AllocatedNode, ClusterError>> {
        let (sender, receiver) = ebb_event::oneshot();
        let sent = self
            .0
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send((vec![self.0.spec.clone(); count], sender));
        let results = match sent {
            Ok(()) => receiver.await.ok(),
            Err(_) => None,
        };
        let Some(results) = results else {
            return (0..count)
                .map(|_| Err(ClusterError::ShuttingDown))
                .collect();
        };
        results
            .into_iter()
            .map(|result| result.and_then(|node| self.allocated(&node)))
            .collect()
    }

    /// The frontend's Messenger (node 0): call the nodes' Ebbs with it.
    pub fn messenger(&self) -> MessengerRef {
        self.0.messenger
    }

    /// The frontend's registry of nodes (announcements, id ranges).
    pub fn registry(&self) -> &Arc<Frontend> {
        &self.0.registry
    }

    /// The application's global id map ([`FrontendOptions::map`], or the
    /// one given to [`run_frontend_with_map`]): the one the nodes reach
    /// through this frontend (`ebb_messenger::map::RemoteGlobalIdMap`);
    /// ready nodes are registered in it under `nodes/N` (`ADDR:PORT
    /// CORES`).
    pub fn map(&self) -> &Arc<dyn GlobalIdMap> {
        &self.0.map
    }

    /// Every node allocated so far (failed and lost ones included).
    pub fn nodes(&self) -> Vec<NodeHandle> {
        self.0
            .allocator
            .upgrade()
            .map(|allocator| allocator.nodes())
            .unwrap_or_default()
    }

    /// Kills node `id`'s VM with SIGKILL as a crash would: it is reported
    /// lost, as after a `kill -9` from another shell (for tests and
    /// demos of a node's loss; [`NodeHandle::stop`] ends one in order).
    pub fn kill(&self, id: NodeId) -> Result<(), ClusterError> {
        let node = self
            .nodes()
            .into_iter()
            .find(|node| node.id() == id)
            .ok_or(ClusterError::UnknownNode { id })?;
        node.simulate_loss()
    }

    /// What the program learns of a node that became ready.
    fn allocated(&self, node: &NodeHandle) -> Result<AllocatedNode, ClusterError> {
        let id = node.id();
        let lost = || match node.state() {
            NodeState::Lost(exit) => ClusterError::Lost { id, exit },
            _ => ClusterError::Stopped { id },
        };
        let entry = self.0.registry.announced(id).ok_or_else(lost)?;
        let ebb_ids = self.0.contract.range(id).ok_or_else(lost)?;
        Ok(AllocatedNode {
            id,
            entry,
            ebb_ids,
            pid: node.pid(),
            console_log: node.console_log().to_owned(),
        })
    }
}

/// A frontend program's exit code from [`run_frontend`]'s result: `main`'s
/// code, or 1 with the error on stderr when the cluster could not run.
pub fn exit_code(ran: Result<i32, String>) -> std::process::ExitCode {
    match ran {
        Ok(code) => std::process::ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("error: {error}");
            std::process::ExitCode::from(1)
        }
    }
}

/// A frontend program's answer to a wrong command line: the error and
/// its usage (the runtime's options, then `own`, the program's) on
/// stderr, exit code 2.
pub fn usage_error(program: &str, error: &str, own: &str) -> std::process::ExitCode {
    eprintln!("error: {error}");
    let usage = format!("usage: {program} {} {own}", FrontendArgs::USAGE);
    eprintln!("{}", usage.trim_end());
    std::process::ExitCode::from(2)
}

/// The line a frontend prints when node `id` is lost:
/// `ebb: node 2 lost (its VM was killed by signal 9)`.
pub fn lost_line(id: NodeId, exit: Exit) -> String {
    format!("ebb: node {id} lost ({exit})")
}

/// What the hosted loop and the allocator's hooks share: filled in once
/// the loop runs.
#[derive(Default)]
struct Wiring {
    events: OnceLock<&'static EventRoot>,
    messenger: OnceLock<MessengerRef>,
    map_service: OnceLock<Arc<MapService>>,
    /// The FileSystem Ebb's server, when a directory is shared.
    files: Option<Arc<FileServer>>,
}

impl Wiring {
    /// Node `id` ended: the registry forgets it, the map service ends its
    /// watches of the map and revokes the map leases it was granted (so
    /// the entries it kept alive go; `MapService::forget_node`), its
    /// shared files are closed and the Messenger fails the calls pending
    /// to it (`lose_node`, on core 0: from a foreign thread, through the
    /// event root).
    fn node_ended(&self, registry: &Frontend, id: NodeId) {
        registry.forget(id);
        if let Some(service) = self.map_service.get() {
            service.forget_node(id);
        }
        if let Some(files) = &self.files {
            files.forget_node(id);
        }
        if let (Some(events), Some(&messenger)) = (self.events.get(), self.messenger.get()) {
            // Fails only when the loop is stopping: nothing calls then.
            let _ = events.spawn_on(CoreId(0), move || {
                if let Ok(rep) = messenger.get() {
                    rep.lose_node(id);
                }
            });
        }
    }
}

/// Runs a frontend program (see the module documentation): returns
/// `main`'s exit code (128 + the signal after SIGINT/SIGTERM), or an
/// error when the cluster could not be set up or a core panicked. Every
/// node is stopped and the namespace deleted before it returns. The
/// application's global id map is the one [`FrontendOptions::map`] names
/// (in process by default, or on etcd).
pub fn run_frontend<F, Fut>(options: FrontendOptions, main: F) -> Result<i32, String>
where
    F: FnOnce(FrontendHandle) -> Fut + Send + 'static,
    Fut: Future<Output = i32> + 'static,
{
    run_frontend_on(options, None, main)
}

/// [`run_frontend`], with `map` as the application's global id map
/// ([`FrontendOptions::map`] is then not used): the frontend serves it to
/// the nodes and hands it to `main` ([`FrontendHandle::map`]).
pub fn run_frontend_with_map<F, Fut>(
    options: FrontendOptions,
    map: Arc<dyn GlobalIdMap>,
    main: F,
) -> Result<i32, String>
where
    F: FnOnce(FrontendHandle) -> Fut + Send + 'static,
    Fut: Future<Output = i32> + 'static,
{
    run_frontend_on(options, Some(map), main)
}

/// [`run_frontend`] on the map `given`, else the one the options name.
fn run_frontend_on<F, Fut>(
    options: FrontendOptions,
    given: Option<Arc<dyn GlobalIdMap>>,
    main: F,
) -> Result<i32, String>
where
    F: FnOnce(FrontendHandle) -> Fut + Send + 'static,
    Fut: Future<Output = i32> + 'static,
{
    options.check()?;
    if let Err(why) = ebb_testbed::require(&[Need::Root, Need::Tun, Need::Ip, Need::Qemu]) {
        return Err(format!(
            "the cluster's frontend cannot run here ({why}): {WHY_ROOT}"
        ));
    }
    // Opened before anything starts: a directory that cannot be shared
    // stops the frontend with its reason.
    let files = match &options.share {
        Some(dir) => Some(Arc::new(FileServer::new(dir).map_err(|e| e.to_string())?)),
        None => None,
    };
    let signals = Signals::catch();
    let network = ClusterNetwork::create(&options.network_tag, AddressPlan::default_plan())
        .map_err(|e| format!("cannot set up the cluster's network: {e}"))?;
    let namespace = network.namespace().name().to_owned();
    let listen = SocketAddr::V4(SocketAddrV4::new(
        network.frontend(),
        options.messenger_port,
    ));
    let cluster_map = match given {
        Some(map) => ClusterMap::given(map),
        None => ClusterMap::open(&options.map, &namespace, &options.app)?,
    };
    if let Some(etcd) = cluster_map.started_etcd() {
        eprintln!(
            "ebb: the global id map is in etcd at {} inside {namespace} (data in {}, deleted at the end)",
            etcd.endpoint(),
            etcd.dir().display()
        );
    }
    // Each node's global ids are reserved from the map as it is allocated
    // (`MessengerContract::with_map`), so frontends sharing one etcd never
    // hand out the same ids and a frontend takes only what its nodes use;
    // the registry has no space of its own.
    let registry = Frontend::new(FIRST_GLOBAL_ID..FIRST_GLOBAL_ID);
    let registrar = Arc::new(Registrar::start(Arc::clone(&cluster_map.map))?);
    let contract = Arc::new(
        MessengerContract::new(
            Arc::clone(&registry),
            options.ids_per_node,
            options.messenger_port,
        )
        .with_map(Arc::clone(&cluster_map.map)),
    );
    let wiring = Arc::new(Wiring {
        files,
        ..Wiring::default()
    });
    let command_line = NativeCommandLine::for_this_host(Settings {
        verbose: options.verbose,
        ..Settings::default()
    });
    let hook = {
        let (wiring, registry) = (Arc::clone(&wiring), Arc::clone(&registry));
        let registrar = Arc::clone(&registrar);
        move |node: &NodeHandle, state: NodeState| {
            if state == NodeState::Ready {
                if let Some(entry) = registry.announced(node.id()) {
                    registrar.ready(node.id(), registration(&entry));
                }
            }
            if state.is_over() {
                registrar.ended(node.id());
                wiring.node_ended(&registry, node.id());
            }
            if let NodeState::Lost(exit) = state {
                eprintln!("{}", lost_line(node.id(), exit));
            }
        }
    };
    let allocator = NodeAllocator::new(
        network,
        QemuLauncher::new(command_line),
        Announced::new(Arc::clone(&registry)),
        &options.log_dir,
    )
    .map_err(|e| e.to_string())?
    .with_ready_timeout(options.ready_timeout)
    .with_boot_contract(Arc::clone(&contract))
    .on_state_change(hook);
    let allocator = Arc::new(allocator);
    let stopping = Arc::new(AtomicBool::new(false));
    let nodes_stopped = Arc::new(AtomicBool::new(false));
    let keeper = options.state_dir.as_ref().map(|dir| StateKeeper {
        recorder: Recorder::new(&options.app, &namespace),
        dir: dir.clone(),
        shown: None,
    });
    let (requests, spawner) = start_spawner(&allocator, &stopping, &nodes_stopped, keeper)?;
    let handle_parts = HandleParts {
        registry: Arc::clone(&registry),
        map: Arc::clone(&cluster_map.map),
        command_line: Arc::new(CommandLine::new(
            options.args.clone(),
            environment::utf8_only(std::env::vars_os()),
        )),
        contract,
        allocator: Arc::downgrade(&allocator),
        requests,
        spec: options.node_spec(),
        namespace: namespace.clone(),
    };

    let mut watcher = signals.watch(Arc::clone(&wiring));
    let config = ebb_hosted::Config {
        cores: Some(options.frontend_cores),
        pin: false,
        handle_signals: false,
        ..ebb_hosted::Config::default()
    };
    let init = {
        let wiring = Arc::clone(&wiring);
        move || {
            ebb_event::spawn_task(async move {
                let code = match start_messenger(&wiring, handle_parts, listen).await {
                    Ok(handle) => main(handle).await,
                    Err(error) => {
                        eprintln!("error: {error}");
                        1
                    }
                };
                let _ = ebb_event::shutdown(code);
            });
        }
    };
    let started = {
        let wiring = Arc::clone(&wiring);
        move |node: ebb_hosted::NodeHandle| {
            let _ = wiring.events.set(node.events);
        }
    };
    let outcome = netns::run_inside_named(&namespace, move || {
        ebb_hosted::run_with(config, init, started)
    });

    // Teardown: the loop is over (main returned, a signal, a panic).
    let signal = watcher.finish();
    stopping.store(true, Ordering::SeqCst);
    allocator.shutdown();
    // Only now may the spawner end: its end kills the QEMUs it started
    // (`PR_SET_PDEATHSIG`), which would count as losses.
    nodes_stopped.store(true, Ordering::SeqCst);
    let _ = spawner.join();
    drop(allocator);
    // The registrations go (their leases revoked), then the map, then the
    // etcd this frontend started, with its data.
    drop(registrar);
    drop(cluster_map);
    if let Some(dir) = &options.state_dir {
        let _ = std::fs::remove_file(state_file::file(dir));
    }
    if netns::exists(&namespace) {
        eprintln!("ebb: could not delete namespace {namespace}: run `ip netns del {namespace}`");
    }
    // The signals take their default action again.
    drop(watcher);
    match outcome {
        Err(error) => Err(format!("the frontend's loop: {error}")),
        Ok(Err(error)) => Err(format!("the frontend's hosted node: {error}")),
        Ok(Ok(code)) => {
            if let Some(signal) = signal {
                eprintln!("ebb: signal {signal}: stopped the nodes");
            }
            Ok(code)
        }
    }
}

/// What a [`FrontendHandle`] is made of, before the Messenger exists.
struct HandleParts {
    registry: Arc<Frontend>,
    map: Arc<dyn GlobalIdMap>,
    command_line: Arc<CommandLine>,
    contract: Arc<MessengerContract>,
    allocator: Weak<NodeAllocator>,
    requests: mpsc::Sender<AllocateRequest>,
    spec: NodeSpec,
    namespace: String,
}

/// What node registrations hold: `ADDR:PORT CORES`, the node's Messenger
/// address and core count.
fn registration(entry: &NodeEntry) -> Vec<u8> {
    format!("{} {}", entry.addr, entry.cores).into_bytes()
}

/// Creates the frontend's Messenger (node 0), serves the registry, the
/// map and the command line and listens on every core; the handle for
/// `main`.
async fn start_messenger(
    wiring: &Wiring,
    parts: HandleParts,
    listen: SocketAddr,
) -> Result<FrontendHandle, String> {
    let messenger = create_messenger(MessengerSettings::new(FRONTEND_NODE))
        .map_err(|e| format!("cannot create the frontend's Messenger: {e}"))?;
    parts
        .registry
        .serve(messenger)
        .map_err(|e| format!("cannot serve the frontend's registry: {e}"))?;
    let map_service = MapService::new(Arc::clone(&parts.map));
    map_service
        .serve(messenger)
        .map_err(|e| format!("cannot serve the global id map: {e}"))?;
    let _ = wiring.map_service.set(map_service);
    parts
        .command_line
        .serve(messenger)
        .map_err(|e| format!("cannot serve the command line: {e}"))?;
    if let Some(files) = &wiring.files {
        FileServer::serve(files, messenger)
            .map_err(|e| format!("cannot serve {} to the nodes: {e}", files.root().display()))?;
    }
    ebb_net::listen_on_all_cores(listen, acceptor(messenger))
        .await
        .map_err(|e| format!("cannot listen for the Messenger on {listen}: {e}"))?;
    let _ = wiring.messenger.set(messenger);
    Ok(FrontendHandle(Arc::new(HandleInner {
        messenger,
        registry: parts.registry,
        map: parts.map,
        contract: parts.contract,
        allocator: parts.allocator,
        requests: Mutex::new(parts.requests),
        spec: parts.spec,
        namespace: parts.namespace,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_node_is_one_line_saying_how() {
        assert_eq!(
            lost_line(NodeId(2), Exit::Signal(9)),
            "ebb: node 2 lost (its VM was killed by signal 9)"
        );
        assert_eq!(
            lost_line(NodeId(3), Exit::Guest(1)),
            "ebb: node 3 lost (its application exited with code 1)"
        );
    }
}
