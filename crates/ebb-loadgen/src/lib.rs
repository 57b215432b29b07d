//! `ebb-loadgen`: the load generator every Ebbflow performance claim rests on.
//!
//! Closed loop (each connection keeps `depth` requests in flight) or open
//! loop (sends scheduled at a target rate, Poisson or uniform, latency
//! measured from the *scheduled* send time so queueing is never hidden);
//! memcached text and binary and Redis RESP (GET/SET) behind [`Protocol`]; fixed or
//! Facebook ETC key and value sizes; a log-linear latency histogram; the
//! generator's own CPU use. [`run`] is the whole tool as a library call;
//! [`responder`] holds the trivial (and stalling) server the tests and the
//! benchmark measure against. [`netpipe`] is the client of `apps/netpipe`
//! (ping-pong latency and bulk goodput). See the crate README for the
//! timing model.
//!
//! ```no_run
//! let mut cfg = ebb_loadgen::Config::new("127.0.0.1:11211").etc();
//! cfg.rate = Some(50_000.0);
//! cfg.preload = true;
//! let summary = ebb_loadgen::run(&cfg).expect("run");
//! println!("{}", summary.table());
//! ```

pub mod cli;
pub mod config;
pub mod engine;
pub mod histogram;
pub mod ketama;
pub mod netpipe;
pub mod protocol;
pub mod report;
pub mod responder;
pub mod sys;
pub mod workload;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};

pub use config::{Arrival, Config, LoadgenError};
pub use histogram::Histogram;
pub use protocol::{Op, Outcome, Protocol, ProtocolKind, ReplyCounts, Request};
pub use report::Summary;
pub use workload::SizeDist;

use engine::{Gate, Shared, ThreadStats};

/// `n` as `u64` (lossless on every supported target; saturates otherwise).
pub fn u64_of(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The first address `server` (`host:port`) resolves to.
pub fn resolve(server: &str) -> Result<SocketAddr, LoadgenError> {
    let bad =
        |why: String| LoadgenError::Config(format!("cannot resolve server '{server}': {why}"));
    server
        .to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("no address".into()))
}

/// Runs the generator as `cfg` says and returns what it measured. Every
/// wait is bounded: the run lasts `warmup + duration` plus at most `drain`,
/// after connecting (`connect_timeout` per connection) and preloading
/// (`preload_timeout`).
pub fn run(cfg: &Config) -> Result<Summary, LoadgenError> {
    cfg.validate()?;
    let addr = resolve(&cfg.server)?;
    let keys = workload::KeySpace::new(cfg.keys, cfg.key_size).map_err(LoadgenError::Config)?;
    let shared = Shared {
        abort: AtomicBool::new(false),
        gate: Gate::new(cfg.threads),
        keys,
        values: workload::value_bytes(cfg.value_size.max_value_size()),
        addr,
    };
    let results: Vec<Result<ThreadStats, LoadgenError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|i| {
                let shared = &shared;
                std::thread::Builder::new()
                    .name(format!("loadgen-{i}"))
                    .spawn_scoped(scope, move || engine::run_thread(cfg, shared, i))
                    .inspect_err(|_| {
                        // It will never arrive: release the others.
                        shared.abort.store(true, Ordering::Relaxed);
                        shared.gate.arrive(false);
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "panic".to_owned());
                    Err(LoadgenError::Thread(what))
                }),
                Err(error) => Err(LoadgenError::Io {
                    context: "cannot start a generator thread".into(),
                    error,
                }),
            })
            .collect()
    });
    let mut merged = ThreadStats::default();
    let mut first_error = None;
    for r in results {
        match r {
            Ok(s) => merged.merge(&s),
            Err(LoadgenError::Aborted) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    if shared.abort.load(Ordering::Relaxed) {
        return Err(LoadgenError::Aborted);
    }
    Ok(Summary::new(cfg, &merged))
}
