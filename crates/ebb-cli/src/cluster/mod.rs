//! `./ebb cluster`: a cluster of native nodes of one application, on one
//! network in a namespace of its own, with `ebb_cluster::NodeAllocator`
//! doing the work.
//!
//! - `up APP` of an application with a frontend program
//!   (`apps/APP/frontend`, package `APP-frontend`) builds the image and
//!   that program and runs it ([`frontend_program`]); otherwise:
//! - `up APP --nodes N [--cores C] [--memory M] [-- ARGS]` builds APP's
//!   native image (as `./ebb run APP --native` does), boots the nodes side
//!   by side, prints the node table, and runs until Ctrl-C, SIGTERM, SIGHUP or SIGQUIT
//!   (then it stops every node and deletes the namespace). This process
//!   is the frontend: node 0, at `.1` on the cluster's network; for an
//!   application whose nodes take a boot contract, with the Messenger
//!   (the frontend runtime, [`messenger_up`]), else ready on a console
//!   line. With the frontend runtime, `--etcd` says where the global id
//!   map lives (`start`, the default: a private etcd inside the
//!   namespace; `HOST:PORT`; `none`: in process).
//! - `add [--nodes N]` asks a running `up` of an application whose nodes
//!   take a boot contract for N more nodes ([`add_request`]);
//! - `ps`, `logs NODE` and `down` read the state file `up` keeps
//!   ([`state`]); `down` sends `up` a SIGTERM and cleans up after a
//!   frontend that is gone.

pub mod add_request;
pub mod frontend_program;
pub mod lock;
pub mod messenger_up;

use std::path::Path;
use std::time::{Duration, Instant};

use ebb_cluster::{
    ConsoleLine, NativeCommandLine, NodeAllocator, NodeSpec, NotReady, QemuLauncher, Readiness,
    ReadyProbe,
};
use ebb_testbed::cluster_net::{AddressPlan, ClusterNetwork};
use ebb_testbed::{netns, Need};

use crate::native::{self, Settings};
use crate::{child, stop};
pub use ebb_cluster::state_file as state;
use state::{follow, ClusterState, Recorder};

/// `./ebb cluster up APP --nodes N [--cores C] [--memory M] [-- ARGS]`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct UpOptions {
    /// The application: a directory under apps/ with a native entry.
    pub app: String,
    /// How many native nodes (1 to 253).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=253))]
    pub nodes: u16,
    /// vCPUs per node.
    #[arg(long, value_name = "C", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub cores: u16,
    /// Memory per node, in QEMU's -m syntax.
    #[arg(long, value_name = "M", default_value = "256M")]
    pub memory: String,
    /// Seconds each node may take to become ready (then it is killed and its console's end
    /// shown).
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub ready_timeout: u64,
    /// Print the build and QEMU commands.
    #[arg(short, long)]
    pub verbose: bool,
    /// Share this directory with the nodes through the FileSystem Ebb (served by the frontend,
    /// confined to it; a relative DIR is relative to where ./ebb was run); without it, nodes'
    /// file operations fail with "no directory is shared".
    #[arg(long, value_name = "DIR")]
    pub share: Option<std::path::PathBuf>,
    /// Where the application's global id map lives: `start` starts a private etcd on
    /// 127.0.0.1:2379 inside the cluster's namespace (data in a temporary directory, deleted
    /// at the end); `HOST:PORT` uses a running etcd, as this host reaches it; `none` keeps the
    /// map in the frontend's process.
    #[arg(long, value_name = "start|none|HOST:PORT", default_value = "start")]
    pub etcd: String,
    /// Arguments for the application on every node (put them after `--`).
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// Why `up` needs root (the frontend runtime's words), for the error when
/// it is not.
pub use ebb_cluster::frontend::WHY_ROOT;

/// How often `up` looks at the nodes' states.
pub(crate) const WATCH: Duration = Duration::from_millis(200);
/// How long `down` waits for `up` to stop its nodes.
const DOWN_WAIT: Duration = Duration::from_secs(60);

/// `./ebb cluster up`: returns the exit code (128 + the signal after a
/// stop), or an error message.
pub fn up(root: &Path, options: &UpOptions) -> Result<u8, String> {
    let app = options.app.as_str();
    ebb_cluster::frontend::check_memory(&options.memory)?;
    if let Some(share) = &options.share {
        if !share.is_dir() {
            return Err(format!(
                "--share {}: not a directory (the FileSystem Ebb shares a directory with the nodes)",
                share.display()
            ));
        }
    }
    if let Err(why) = ebb_testbed::require(&[Need::Root, Need::Tun, Need::Ip, Need::Qemu]) {
        return Err(format!(
            "./ebb cluster up cannot run here ({why}): {WHY_ROOT}"
        ));
    }
    if !native::has_native_entry(root, app) {
        return Err(format!(
            "'{app}' has no native entry, so it cannot run on native nodes: its package must \
             depend on ebb-app and declare `ebb_app::main!` (see crates/ebb-app/README.md)"
        ));
    }
    let dir = state::dir(root);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Held until `up` returns (the kernel drops it if `up` dies).
    let _one_cluster = lock::ClusterLock::acquire(&dir)?;
    let recorded = ClusterState::read(&dir).unwrap_or_else(|unreadable| {
        // Stale: this `up` holds the lock, so no other runs.
        eprintln!("ebb: {unreadable}\nebb: deleting it (no other ./ebb cluster up runs)");
        let _ = std::fs::remove_file(&unreadable.path);
        None
    });
    if let Some(running) = recorded {
        if running.frontend_alive() {
            return Err(format!(
                "a cluster of {} runs already (./ebb cluster up, process {}): \
                 stop it first with ./ebb cluster down",
                running.app, running.frontend.pid
            ));
        }
        clean_up_after(&running, &dir);
    }

    eprintln!("ebb: building {app} (release, {})...", native::TARGET);
    let mut build = native::build_command(root, app);
    if options.verbose {
        eprintln!("ebb: {}", native::shell_words(&build));
    }
    let built = child::run(&mut build)?;
    if let Some(code) = stop::report(&format!("building {app}")) {
        return Ok(code);
    }
    if built != 0 {
        return Err(format!(
            "building the native image of '{app}' failed (exit code {built})"
        ));
    }

    if let Some(package) = frontend_program::package(root, app) {
        // The application's own frontend allocates the nodes and keeps
        // the state file.
        let image = native::image_path(root, app);
        return frontend_program::run(root, &package, options, &image, &dir);
    }
    if messenger_up::takes_boot_contract(root, app) {
        return messenger_up::up(root, options, &dir);
    }
    if options.share.is_some() {
        return Err(format!(
            "--share: '{app}' has no Messenger nodes to serve files to (its nodes take no boot \
             contract: `node = true` under [package.metadata.ebb], or a frontend program)"
        ));
    }

    let network = ClusterNetwork::create("cluster", AddressPlan::default_plan())
        .map_err(|e| format!("cannot set up the cluster's network: {e}"))?;
    let namespace = network.namespace().name().to_owned();
    let command_line = NativeCommandLine::for_this_host(Settings {
        verbose: options.verbose,
        ..Settings::default()
    });
    let readiness = UntilStopped(ConsoleLine::app_ready(app));
    let allocator = NodeAllocator::new(network, QemuLauncher::new(command_line), readiness, &dir)
        .map_err(|e| e.to_string())?
        .with_ready_timeout(Duration::from_secs(options.ready_timeout));
    say_booting(
        options,
        &namespace,
        &allocator.network().frontend().to_string(),
    );
    let spec = NodeSpec {
        image: native::image_path(root, app),
        cores: usize::from(options.cores),
        memory: options.memory.clone(),
        args: options.args.clone(),
    };
    let failures: Vec<String> = allocator
        .allocate_all(vec![spec; usize::from(options.nodes)])
        .into_iter()
        .filter_map(|result| result.err().map(|e| e.to_string()))
        .collect();
    let record = Recorder::new(app, &namespace);
    let mut shown = record.state(&allocator.nodes());
    if let Err(e) = shown.write(&dir) {
        finish(allocator, &dir, &namespace);
        return Err(e);
    }
    print!("{}", shown.table());
    if let Some(code) = stop::report("the cluster") {
        finish(allocator, &dir, &namespace);
        return Ok(code);
    }
    if !failures.is_empty() {
        finish(allocator, &dir, &namespace);
        return Err(failures.join("\nerror: "));
    }
    say_ready(&shown);
    while stop::received().is_none() {
        std::thread::sleep(WATCH);
        follow(&mut shown, record.state(&allocator.nodes()), &dir);
    }
    let code = stop::report("the cluster").unwrap_or(0);
    finish(allocator, &dir, &namespace);
    Ok(code)
}

/// Says what is booting where.
pub(crate) fn say_booting(options: &UpOptions, namespace: &str, frontend: &str) {
    eprintln!(
        "ebb: booting {} node{} of {} in network namespace {namespace} (the frontend is \
         {frontend}); Ctrl-C stops them",
        options.nodes,
        if options.nodes == 1 { "" } else { "s" },
        options.app,
    );
}

/// Says how to reach the nodes, once all are ready.
pub(crate) fn say_ready(shown: &ClusterState) {
    eprintln!(
        "ebb: all nodes are ready. Reach them from the namespace, e.g. \
         `ip netns exec {} ping -c 1 {}`; `./ebb cluster ps`, `./ebb cluster logs 1`, \
         `./ebb cluster down` from another shell",
        shown.namespace,
        shown
            .nodes
            .first()
            .map_or("10.96.0.2", |node| node.address.as_str())
    );
}

/// Stops the nodes, deletes the namespace and the state file.
fn finish(allocator: NodeAllocator, dir: &Path, namespace: &str) {
    eprintln!("ebb: stopping the nodes...");
    drop(allocator);
    say_stopped(dir, namespace);
}

/// Deletes the state file and says whether the namespace is gone.
pub(crate) fn say_stopped(dir: &Path, namespace: &str) {
    let _ = std::fs::remove_file(state::file(dir));
    if netns::exists(namespace) {
        eprintln!("ebb: could not delete namespace {namespace}: run `ip netns del {namespace}`");
    } else {
        eprintln!("ebb: cluster stopped; deleted namespace {namespace}");
    }
}

/// Readiness that gives up at once when a stop signal comes (Ctrl-C while
/// the nodes boot stops them without waiting out the timeout).
struct UntilStopped<R>(R);

impl<R: Readiness> Readiness for UntilStopped<R> {
    fn awaited(&self) -> String {
        self.0.awaited()
    }

    fn wait_ready(&self, node: &ReadyProbe<'_>, deadline: Instant) -> Result<(), NotReady> {
        loop {
            let slice = deadline.min(Instant::now() + WATCH);
            match self.0.wait_ready(node, slice) {
                Err(NotReady::TimedOut)
                    if Instant::now() < deadline && stop::received().is_none() => {}
                outcome => return outcome,
            }
        }
    }
}

/// `./ebb cluster add --nodes N`: N more nodes for the running cluster,
/// booted by its `up` (which the request reaches through the state
/// directory); prints their ready lines and the node table.
pub fn add(root: &Path, nodes: u16) -> Result<u8, String> {
    let dir = state::dir(root);
    let Some(cluster) = ClusterState::read(&dir).map_err(|e| e.to_string())? else {
        return Err("no cluster is running (./ebb cluster up APP --nodes N starts one)".to_owned());
    };
    if !cluster.frontend_alive() {
        return Err(format!(
            "the cluster of {}'s frontend (process {}) is gone: ./ebb cluster down cleans up",
            cluster.app, cluster.frontend.pid
        ));
    }
    if frontend_program::package(root, &cluster.app).is_some()
        || !messenger_up::takes_boot_contract(root, &cluster.app)
    {
        return Err(format!(
            "./ebb cluster add adds nodes to a cluster `up` runs the frontend runtime for (an \
             application with `node = true` under [package.metadata.ebb] and no frontend \
             program); '{}' is not one",
            cluster.app
        ));
    }
    let answer = add_request::send(&dir, std::process::id(), nodes)?;
    eprintln!(
        "ebb: asked the cluster of {} (process {}) for {nodes} more node{}...",
        cluster.app,
        cluster.frontend.pid,
        if nodes == 1 { "" } else { "s" }
    );
    let deadline = Instant::now() + add_request::ANSWER_WITHIN;
    let (added, text) =
        add_request::wait_for_answer(&answer, deadline, || cluster.frontend_alive())?;
    if added {
        print!("{text}");
        Ok(0)
    } else {
        Err(text.trim_end().to_owned())
    }
}

/// `./ebb cluster ps`: the node table of the running cluster.
pub fn ps(root: &Path) -> Result<u8, String> {
    let Some(cluster) = ClusterState::read(&state::dir(root)).map_err(|e| e.to_string())? else {
        println!("no cluster is running (./ebb cluster up APP --nodes N starts one)");
        return Ok(0);
    };
    let frontend = if cluster.frontend_alive() {
        "running"
    } else {
        "gone: ./ebb cluster down cleans up"
    };
    println!(
        "cluster of {}: frontend process {} ({frontend}), network namespace {}",
        cluster.app, cluster.frontend.pid, cluster.namespace
    );
    print!("{}", cluster.table());
    Ok(0)
}

/// `./ebb cluster logs NODE`: the node's console (also after the cluster
/// has stopped, until the next `up`).
pub fn logs(root: &Path, node: u32) -> Result<u8, String> {
    let dir = state::dir(root);
    let path = state::console_log(&dir, node);
    match std::fs::read(&path) {
        Ok(console) => {
            use std::io::Write;
            let mut out = std::io::stdout();
            out.write_all(&console)
                .and_then(|()| out.flush())
                .map_err(|e| format!("writing the console: {e}"))?;
            Ok(0)
        }
        Err(e) => {
            let known = ClusterState::read(&dir)
                .ok()
                .flatten()
                .map(|cluster| {
                    cluster
                        .nodes
                        .iter()
                        .map(|n| n.id.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .filter(|ids| !ids.is_empty())
                .map_or_else(String::new, |ids| {
                    format!("; the cluster's nodes are {ids}")
                });
            Err(format!(
                "no console log for node {node} ({}: {e}){known}",
                path.display()
            ))
        }
    }
}

/// `./ebb cluster down`: stops the running cluster (SIGTERM to `up`,
/// which stops its nodes and deletes its namespace), or cleans up after a
/// frontend that is gone.
pub fn down(root: &Path) -> Result<u8, String> {
    let dir = state::dir(root);
    let cluster = match ClusterState::read(&dir) {
        Ok(cluster) => cluster,
        // Whether an `up` still runs, its lock tells.
        Err(unreadable) => match lock::ClusterLock::acquire(&dir) {
            Ok(_free) => {
                let _ = std::fs::remove_file(&unreadable.path);
                println!(
                    "no cluster is running; deleted its stale state file {}",
                    unreadable.path.display()
                );
                return Ok(0);
            }
            Err(running) => return Err(format!("{unreadable}\n{running}")),
        },
    };
    let Some(cluster) = cluster else {
        println!("no cluster is running");
        return Ok(0);
    };
    if cluster.frontend_alive() {
        eprintln!(
            "ebb: stopping the cluster of {} (process {})...",
            cluster.app, cluster.frontend.pid
        );
        stop::send(stop::SIGTERM, cluster.frontend.pid);
        let started = Instant::now();
        while cluster.frontend_alive() && started.elapsed() < DOWN_WAIT {
            std::thread::sleep(Duration::from_millis(50));
        }
        if cluster.frontend_alive() {
            eprintln!(
                "ebb: process {} did not stop within {} s: killing it",
                cluster.frontend.pid,
                DOWN_WAIT.as_secs()
            );
            // Its nodes die with it (PR_SET_PDEATHSIG); the rest is below.
            // (Checked once more: it may have ended, and its id been
            // reused, since the last look.)
            if cluster.frontend_alive() {
                stop::send(stop::SIGKILL, cluster.frontend.pid);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // After a frontend that stopped in order, nothing is left to do.
    if state::file(&dir).exists() {
        clean_up_after(&cluster, &dir);
    }
    println!("cluster of {} is down", cluster.app);
    Ok(0)
}

/// Removes what a frontend that is gone left: QEMUs still running (they
/// die with it, but a frontend stopped with SIGSTOP then SIGKILL...), its
/// namespace, the data of the etcd it started (the etcd died with it)
/// and the state file.
fn clean_up_after(cluster: &ClusterState, dir: &Path) {
    eprintln!(
        "ebb: the frontend of the cluster of {} (process {}) is gone: cleaning up after it",
        cluster.app, cluster.frontend.pid
    );
    // Only the recorded QEMUs, started when recorded, naming their QMP
    // sockets: never a process that reused an id, nor another cluster's VM.
    for node in cluster.running_qemus() {
        stop::send(stop::SIGKILL, node.qemu.pid);
    }
    if netns::exists(&cluster.namespace) {
        match netns::ip(&["netns", "del", &cluster.namespace]) {
            Ok(_) => eprintln!("ebb: deleted namespace {}", cluster.namespace),
            Err(e) => eprintln!("warning: {e}"),
        }
    }
    ebb_testbed::etcd::remove_stale_dirs();
    let _ = std::fs::remove_file(state::file(dir));
}
