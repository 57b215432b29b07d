//! Starting a hosted node, supervising its cores, stopping it.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::thread;

use ebb_core::{CoreId, Node};
use ebb_event::{run_core, start_node, EventError, EventRoot};

use crate::{driver, net, sys, Config, HostedPlatform};

/// Why a hosted node could not run.
#[derive(Debug)]
pub enum HostedError {
    /// `--cpus` named a CPU this process may not use.
    CpuNotAllowed {
        /// The CPU.
        cpu: usize,
        /// The CPUs allowed.
        allowed: Vec<usize>,
    },
    /// A system call failed.
    Io {
        /// What the platform was doing.
        what: &'static str,
        /// The error.
        error: io::Error,
    },
    /// The event layer refused.
    Event(EventError),
    /// A core's thread panicked; the node was stopped.
    CorePanicked(CoreId),
    /// The node stopped (with this exit code) before the task finished.
    StoppedEarly(i32),
}

impl fmt::Display for HostedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostedError::CpuNotAllowed { cpu, allowed } => {
                write!(
                    f,
                    "CPU {cpu} is not available to this process (allowed: {allowed:?})"
                )
            }
            HostedError::Io { what, error } => write!(f, "{what}: {error}"),
            HostedError::Event(error) => error.fmt(f),
            HostedError::CorePanicked(core) => {
                write!(f, "core {core} panicked; the node was stopped")
            }
            HostedError::StoppedEarly(code) => {
                write!(
                    f,
                    "the node stopped with exit code {code} before the task finished"
                )
            }
        }
    }
}

impl std::error::Error for HostedError {}

fn io_error(what: &'static str) -> impl FnOnce(io::Error) -> HostedError {
    move |error| HostedError::Io { what, error }
}

/// A node that is starting or running: what tests and embedders can reach
/// from outside its cores.
#[derive(Clone, Copy)]
pub struct NodeHandle {
    /// The node.
    pub node: &'static Node,
    /// Its event layer (stop it with `shutdown`, send work with `spawn_on`).
    pub events: &'static EventRoot,
}

/// Runs a node with `config`: one pinned thread per core, each running an
/// event loop; `main` is the first event on core 0. Returns when every
/// core has stopped (after [`ebb_event::shutdown`], or Ctrl-C when
/// `config.handle_signals`), with the node's exit code.
pub fn run(config: Config, main: impl FnOnce() + Send + 'static) -> Result<i32, HostedError> {
    run_with(config, main, |_| {})
}

/// Runs `body` as a task on core 0 of a node with `config`, stops the node
/// when the task completes, and returns the task's output. For tests,
/// tools and programs whose whole job is one task.
pub fn run_task<F, Fut, R>(config: Config, body: F) -> Result<R, HostedError>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = R> + 'static,
    R: Send + 'static,
{
    let (sender, receiver) = std::sync::mpsc::channel();
    let code = run(config, move || {
        ebb_event::spawn_task(async move {
            let output = body().await;
            let _ = sender.send(output);
            let _ = ebb_event::shutdown(0);
        });
    })?;
    receiver.recv().map_err(|_| HostedError::StoppedEarly(code))
}

/// Like [`run`], and calls `started` with the node's handle once its cores
/// are starting (from the calling thread).
pub fn run_with(
    config: Config,
    main: impl FnOnce() + Send + 'static,
    started: impl FnOnce(NodeHandle),
) -> Result<i32, HostedError> {
    let cpus = choose_cpus(&config)?;
    let cores = cpus.len();
    let node = Node::standalone(cores);
    let platform: &'static HostedPlatform = Box::leak(Box::new(
        HostedPlatform::new(cores).map_err(io_error("creating wake-up eventfds"))?,
    ));
    let events = start_node(node, platform).map_err(HostedError::Event)?;

    let signals = if config.handle_signals {
        Some(SignalWatch::new().map_err(io_error("setting up SIGINT/SIGTERM handling"))?)
    } else {
        None
    };
    let done = Arc::new(sys::eventfd().map_err(io_error("creating the supervisor's eventfd"))?);

    let mut main = Some(main);
    let mut threads = Vec::with_capacity(cores);
    for (core, &cpu) in cpus.iter().enumerate() {
        let core = CoreId(core);
        let init = if core.0 == 0 { main.take() } else { None };
        let done = Arc::clone(&done);
        // An unpinned core shares its CPU with whatever else runs there,
        // whose work a polling core would delay: it sleeps at once.
        let (pin, backend) = (config.pin, config.backend);
        let poll_max_us = if pin { config.poll_max_us } else { 0 };
        let net_stack = config.net_stack.clone();
        let thread = thread::Builder::new()
            .name(format!("ebb-core-{core}"))
            .stack_size(8 << 20)
            .spawn(move || {
                let _finished = Finished(done);
                if pin {
                    sys::pin_to_cpu(cpu).map_err(io_error("pinning a core to its CPU"))?;
                }
                let (driver, reactor) = driver::create(backend, platform, core, poll_max_us)
                    .map_err(io_error("creating a core's event driver"))?;
                let init: Box<dyn FnOnce()> = Box::new(move || {
                    net::install(core, reactor, net_stack);
                    if let Some(main) = init {
                        main();
                    }
                });
                run_core(core, node, driver, Some(init)).map_err(HostedError::Event)
            })
            .map_err(io_error("starting a core thread"))?;
        threads.push(thread);
    }
    started(NodeHandle { node, events });

    supervise(events, cores, &done, signals.as_ref());
    let mut result = Ok(events.exit_code());
    for (core, thread) in threads.into_iter().enumerate() {
        match thread.join() {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => result = result.and(Err(error)),
            Err(_) => result = result.and(Err(HostedError::CorePanicked(CoreId(core)))),
        }
    }
    if let Some(signals) = signals {
        if signals.fired() {
            eprintln!("ebbflow: all {cores} cores stopped");
        }
    }
    result
}

fn choose_cpus(config: &Config) -> Result<Vec<usize>, HostedError> {
    let allowed = sys::allowed_cpus().map_err(io_error("reading this process's CPU affinity"))?;
    let cpus = match &config.cpus {
        Some(cpus) => {
            if let Some(&cpu) = cpus.iter().find(|cpu| !allowed.contains(cpu)) {
                return Err(HostedError::CpuNotAllowed { cpu, allowed });
            }
            cpus.clone()
        }
        None => allowed,
    };
    let cores = config.cores.unwrap_or(cpus.len()).max(1);
    Ok((0..cores).map(|core| cpus[core % cpus.len()]).collect())
}

/// Counts a core thread as finished however it ends (return or panic).
struct Finished(Arc<OwnedFd>);

impl Drop for Finished {
    fn drop(&mut self) {
        sys::eventfd_signal(self.0.as_raw_fd());
    }
}

/// Waits until every core has finished. A core that ends while the node is
/// not stopping (its thread panicked or failed to start) stops the node; a
/// signal stops it with the shell's code for that signal.
fn supervise(
    events: &'static EventRoot,
    cores: usize,
    done: &OwnedFd,
    signals: Option<&SignalWatch>,
) {
    let mut finished = 0;
    while finished < cores {
        let mut fds = vec![done.as_raw_fd()];
        if let Some(signals) = signals {
            fds.push(signals.fd.as_raw_fd());
        }
        let ready = match sys::poll_readable(&fds) {
            Ok(ready) => ready,
            Err(error) => panic!("the supervisor's poll failed: {error}"),
        };
        if ready[0] {
            finished += usize::try_from(sys::eventfd_drain(done.as_raw_fd())).unwrap_or(cores);
            if finished < cores && !events.is_stopping() {
                eprintln!("ebbflow: a core ended unexpectedly; stopping the node");
                let _ = events.shutdown(101);
            }
        }
        if let Some(signals) = signals.filter(|_| ready.get(1) == Some(&true)) {
            signals.handle(events, cores);
        }
    }
}

/// SIGINT and SIGTERM, blocked in every core thread (they inherit the mask)
/// and read by the supervisor through a signalfd.
struct SignalWatch {
    fd: OwnedFd,
    previous_mask: libc::sigset_t,
    fired: std::cell::Cell<bool>,
}

impl SignalWatch {
    fn new() -> io::Result<Self> {
        let set = sys::sigset(&[libc::SIGINT, libc::SIGTERM]);
        let previous_mask = sys::thread_sigmask(libc::SIG_BLOCK, &set)?;
        let fd = sys::signalfd(&set)?;
        Ok(SignalWatch {
            fd,
            previous_mask,
            fired: std::cell::Cell::new(false),
        })
    }

    fn handle(&self, events: &EventRoot, cores: usize) {
        while let Some(signal) = sys::read_signal(&self.fd) {
            let signal = i32::try_from(signal).unwrap_or(libc::SIGTERM);
            let name = if signal == libc::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            if events.shutdown(128 + signal).is_ok() {
                self.fired.set(true);
                eprintln!("ebbflow: {name}: stopping {cores} cores");
            } else {
                eprintln!("ebbflow: {name} again while stopping: exiting now");
                std::process::exit(128 + signal);
            }
        }
    }

    fn fired(&self) -> bool {
        self.fired.get()
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        let _ = sys::thread_sigmask(libc::SIG_SETMASK, &self.previous_mask);
    }
}
