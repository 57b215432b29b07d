//! What a run does, and what can go wrong.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::protocol::ProtocolKind;
use crate::workload::SizeDist;

/// How open-loop send times are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Arrival {
    /// Exponential gaps (a Poisson process), the default.
    Poisson,
    /// Equal gaps.
    Uniform,
}

/// One run of the generator. [`Config::new`] gives the defaults of the
/// command line; fields are public so callers adjust what they need.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The server, `host:port`.
    pub server: String,
    /// The wire protocol.
    pub protocol: ProtocolKind,
    /// Open loop at this aggregate rate (requests per second); `None` means
    /// closed loop (each connection keeps `depth` requests in flight).
    pub rate: Option<f64>,
    /// Open-loop gaps between scheduled sends.
    pub arrival: Arrival,
    /// Generator threads.
    pub threads: usize,
    /// Connections per thread.
    pub connections: usize,
    /// Most requests in flight per connection (the pipeline depth).
    pub depth: usize,
    /// CPUs to pin the threads to (thread `i` on `cpus[i % len]`); empty
    /// means not pinned.
    pub cpus: Vec<usize>,
    /// Key sizes.
    pub key_size: SizeDist,
    /// Value sizes of sets.
    pub value_size: SizeDist,
    /// Fraction of requests that are sets (the rest are gets).
    pub update: f64,
    /// Size of the key space; keys are chosen uniformly.
    pub keys: u64,
    /// Only these keys (indexes into the `keys` of the key space, so a
    /// key's bytes are the same whatever the subset): gets, sets and the
    /// preload use them alone. `None` uses every key. Several runs at once,
    /// each with the keys one server holds and its share of the rate, load
    /// a set of servers as one client routing keys would (see
    /// `ketama`).
    pub only_keys: Option<Arc<[u64]>>,
    /// Set every key once before the run, so that gets hit.
    pub preload: bool,
    /// Measured time, after the warm-up.
    pub duration: Duration,
    /// Time before the measurement whose requests are not counted.
    pub warmup: Duration,
    /// After the run, how long to wait for replies still outstanding (they
    /// are counted in the totals, never in the measurement).
    pub drain: Duration,
    /// Limit for establishing each connection.
    pub connect_timeout: Duration,
    /// Limit for the preload.
    pub preload_timeout: Duration,
    /// Seed of the workload and arrival generators.
    pub seed: u64,
}

impl Config {
    /// The command line's defaults against `server`: closed loop, memcached
    /// text, 1 thread × 4 connections × depth 4, fixed 30-byte keys and
    /// 200-byte values, gets only, 10 000 keys, 10 s after 1 s of warm-up.
    pub fn new(server: impl Into<String>) -> Self {
        Config {
            server: server.into(),
            protocol: ProtocolKind::Text,
            rate: None,
            arrival: Arrival::Poisson,
            threads: 1,
            connections: 4,
            depth: 4,
            cpus: Vec::new(),
            key_size: SizeDist::Fixed(30),
            value_size: SizeDist::Fixed(200),
            update: 0.0,
            keys: 10_000,
            only_keys: None,
            preload: false,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(1),
            drain: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(2),
            preload_timeout: Duration::from_secs(60),
            seed: 1,
        }
    }

    /// Switches to the Facebook ETC workload as mutilate runs it: ETC key
    /// and value sizes, 1 set per 30 gets (`update = 0.033`).
    pub fn etc(mut self) -> Self {
        self.key_size = SizeDist::Etc;
        self.value_size = SizeDist::Etc;
        self.update = 0.033;
        self
    }

    /// How many keys the run uses (the subset's, or every key).
    pub fn key_count(&self) -> u64 {
        self.only_keys
            .as_ref()
            .map_or(self.keys, |only| crate::u64_of(only.len()))
    }

    /// The `i`th key the run uses (`i < key_count()`), as an index into the
    /// key space.
    pub fn key_at(&self, i: usize) -> usize {
        match &self.only_keys {
            Some(only) => usize::try_from(only[i]).unwrap_or(0),
            None => i,
        }
    }

    /// Whether this is an open-loop run.
    pub fn is_open_loop(&self) -> bool {
        self.rate.is_some()
    }

    /// Checks the values; the message says what to change.
    pub fn validate(&self) -> Result<(), LoadgenError> {
        let bad = |m: String| Err(LoadgenError::Config(m));
        if self.threads == 0 || self.connections == 0 || self.depth == 0 {
            return bad("--threads, --connections and --depth must be at least 1".into());
        }
        if self.threads > 1024 || self.connections > 65_536 || self.depth > 1 << 20 {
            return bad("--threads, --connections or --depth is unreasonably large".into());
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return bad(format!("--rate must be a positive number, not {rate}"));
            }
        }
        if !(0.0..=1.0).contains(&self.update) {
            return bad(format!("--update must be in 0..=1, not {}", self.update));
        }
        if self.duration.is_zero() {
            return bad("--duration must be above 0".into());
        }
        if self.duration > Duration::from_secs(86_400) || self.warmup > Duration::from_secs(86_400)
        {
            return bad("--duration and --warmup must be at most a day".into());
        }
        if self.keys == 0 || self.keys > 100_000_000 {
            return bad(format!(
                "--keys must be in 1..=100000000, not {}",
                self.keys
            ));
        }
        if let Some(only) = &self.only_keys {
            if only.is_empty() || only.iter().any(|&k| k >= self.keys) {
                return bad(format!(
                    "the key subset must be non-empty and within the {} keys",
                    self.keys
                ));
            }
        }
        if self.preload && self.key_count() < crate::u64_of(self.threads) {
            return bad("--preload needs at least one key per thread".into());
        }
        Ok(())
    }
}

/// Why a run failed.
#[derive(Debug)]
pub enum LoadgenError {
    /// A setting is out of range.
    Config(String),
    /// A connection could not be established.
    Connect {
        /// The server address.
        server: String,
        /// What the OS said.
        error: std::io::Error,
    },
    /// A system call failed during the run.
    Io {
        /// What was being done.
        context: String,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The server's bytes could not be parsed, or it closed a connection.
    Server(String),
    /// The preload did not finish.
    Preload(String),
    /// A generator thread panicked.
    Thread(String),
    /// Stopped because another thread failed (never returned when that
    /// thread's error is known).
    Aborted,
}

impl fmt::Display for LoadgenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadgenError::Config(m) => write!(f, "bad setting: {m}"),
            LoadgenError::Connect { server, error } => write!(
                f,
                "cannot connect to {server}: {error} (is the server running and listening there?)"
            ),
            LoadgenError::Io { context, error } => write!(f, "{context}: {error}"),
            LoadgenError::Server(m) => write!(f, "server error: {m}"),
            LoadgenError::Preload(m) => write!(f, "preload failed: {m}"),
            LoadgenError::Thread(m) => write!(f, "generator thread failed: {m}"),
            LoadgenError::Aborted => write!(f, "aborted because another generator thread failed"),
        }
    }
}

impl std::error::Error for LoadgenError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_subset_must_be_inside_the_key_space_and_not_empty() {
        let mut cfg = Config::new("127.0.0.1:11211");
        cfg.keys = 100;
        cfg.only_keys = Some(vec![0, 99].into());
        assert!(cfg.validate().is_ok());
        assert_eq!((cfg.key_count(), cfg.key_at(1)), (2, 99));
        for bad in [vec![], vec![5, 100]] {
            cfg.only_keys = Some(bad.into());
            match cfg.validate() {
                Err(LoadgenError::Config(m)) => assert!(m.contains("key subset"), "{m}"),
                other => panic!("expected a config error, got {other:?}"),
            }
        }
    }
}
