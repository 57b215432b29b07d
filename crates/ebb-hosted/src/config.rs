//! How many cores, on which CPUs, with which backend.

use std::fmt;
use std::sync::Arc;

use ebb_core::CoreId;
use ebb_net::NetStack;

use crate::Backend;

/// Makes a core's network stack (the representative of ebb-net's
/// `NETWORK` Ebb) in place of the kernel sockets: the user-space stack
/// (`ebb-userstack`) installs itself this way. Called on each core, as the
/// core's first event, so the stack may use the core's timers and
/// [`crate::watch_readable`].
#[derive(Clone)]
pub struct NetStackFactory(pub Arc<dyn Fn(CoreId) -> Box<dyn NetStack> + Send + Sync>);

impl fmt::Debug for NetStackFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NetStackFactory")
    }
}

/// Settings of a hosted node. `Config::default()` uses every CPU the
/// process may run on, one pinned core each, io_uring where available, and
/// handles Ctrl-C (SIGINT) and SIGTERM by stopping every core.
#[derive(Clone, Debug)]
pub struct Config {
    /// How many cores; default: as many as CPUs allowed. More cores than
    /// CPUs is allowed (cores then share CPUs round-robin).
    pub cores: Option<usize>,
    /// Which CPUs to pin cores to, in order; default: the CPUs this process
    /// may run on.
    pub cpus: Option<Vec<usize>>,
    /// Kernel interface for the event loops.
    pub backend: Backend,
    /// Pin each core's thread to its CPU.
    pub pin: bool,
    /// Stop cleanly on SIGINT/SIGTERM. Needs to be set up on the process's
    /// main thread; tests that run several nodes in one process turn it off.
    pub handle_signals: bool,
    /// Each core's network stack; default (`None`): Linux kernel sockets
    /// through io_uring.
    pub net_stack: Option<NetStackFactory>,
    /// The longest a core polls its completion ring before it sleeps, in
    /// microseconds, also taken as what a sleep costs (the window tunes
    /// itself between 0 and this, see `driver/poll_window.rs`). Under 2
    /// turns polling off; so do the epoll backend and `pin: false` (an
    /// unpinned core shares its CPU).
    pub poll_max_us: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cores: None,
            cpus: None,
            backend: Backend::Auto,
            pin: true,
            handle_signals: true,
            net_stack: None,
            poll_max_us: crate::driver::DEFAULT_POLL_MAX_US,
        }
    }
}

impl Config {
    /// One unpinned core that leaves signals alone: a node that shares the
    /// process with others (tests that run several nodes, or a node and
    /// its frontend, on threads of one process side by side). Being
    /// unpinned, it never polls before sleeping.
    #[must_use]
    pub fn one_core_side_by_side() -> Config {
        Config {
            cores: Some(1),
            pin: false,
            handle_signals: false,
            ..Config::default()
        }
    }
}

/// A command-line option the platform did not understand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The platform's options, the same on every hosted command line (clap):
/// applications get them through `ebb-app`, tools flatten them into their
/// own parser.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
#[command(next_help_heading = "Platform options")]
pub struct PlatformArgs {
    /// Number of cores (default: every CPU this process may use)
    #[arg(long, value_name = "N", value_parser = parse_cores)]
    pub cores: Option<usize>,
    /// CPUs to pin cores to, comma-separated (e.g. 0,1)
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub cpus: Option<CpuList>,
    /// auto (default), io-uring or epoll
    #[arg(long, value_name = "NAME", value_parser = parse_backend)]
    pub backend: Option<Backend>,
    /// Do not pin cores to CPUs
    #[arg(long)]
    pub no_pin: bool,
    /// Longest a core polls for completions before sleeping, in µs; the
    /// window adapts between 0 and this, which is also taken as what a
    /// sleep costs (default 25; under 2: never poll; io-uring pinned cores
    /// only)
    #[arg(long, value_name = "US", value_parser = parse_poll_max_us)]
    pub poll_max_us: Option<u64>,
}

/// `--cpus`' value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl PlatformArgs {
    /// The node's configuration these options ask for.
    #[must_use]
    pub fn config(&self) -> Config {
        Config {
            cores: self.cores,
            cpus: self.cpus.clone().map(|cpus| cpus.0),
            backend: self.backend.unwrap_or(Backend::Auto),
            pin: !self.no_pin,
            poll_max_us: self
                .poll_max_us
                .unwrap_or(crate::driver::DEFAULT_POLL_MAX_US),
            ..Config::default()
        }
    }
}

fn parse_backend(text: &str) -> Result<Backend, ConfigError> {
    text.parse().map_err(ConfigError)
}

/// `--cores`' value: a number above 0.
///
/// # Errors
///
/// Anything else, with a sentence saying so.
pub fn parse_cores(text: &str) -> Result<usize, ConfigError> {
    text.parse::<usize>()
        .ok()
        .filter(|&cores| cores > 0)
        .ok_or_else(|| ConfigError(format!("--cores takes a number above 0, not '{text}'")))
}

/// The longest `--poll-max-us` takes: a millisecond of spinning already
/// costs more than any sleep it could save.
const POLL_MAX_US_LIMIT: u64 = 1_000;

/// `--poll-max-us`' value: microseconds from 0 to 1000.
///
/// # Errors
///
/// Anything else, with a sentence saying so.
pub fn parse_poll_max_us(text: &str) -> Result<u64, ConfigError> {
    text.parse::<u64>()
        .ok()
        .filter(|&us| us <= POLL_MAX_US_LIMIT)
        .ok_or_else(|| {
            ConfigError(format!(
                "--poll-max-us takes microseconds from 0 to {POLL_MAX_US_LIMIT}, not '{text}'"
            ))
        })
}

/// `--cpus`' value: CPU numbers separated by commas.
///
/// # Errors
///
/// Anything else, with a sentence saying so.
pub fn parse_cpus(text: &str) -> Result<CpuList, ConfigError> {
    text.split(',')
        .map(|cpu| cpu.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .ok()
        .filter(|cpus| !cpus.is_empty())
        .map(CpuList)
        .ok_or_else(|| {
            ConfigError(format!(
                "--cpus takes a comma-separated list of CPU numbers, not '{text}'"
            ))
        })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Tool {
        #[command(flatten)]
        platform: PlatformArgs,
        #[arg(short)]
        verbose: bool,
    }

    fn parse(args: &[&str]) -> Result<Config, String> {
        Tool::try_parse_from(["tool"].iter().chain(args))
            .map(|tool| tool.platform.config())
            .map_err(|error| error.to_string())
    }

    #[test]
    fn platform_options_configure_the_node() {
        let config = parse(&[
            "--cores",
            "3",
            "--backend=epoll",
            "--cpus",
            "0,1",
            "--no-pin",
            "--poll-max-us",
            "0",
        ])
        .unwrap();
        assert_eq!(config.cores, Some(3));
        assert_eq!(config.backend, Backend::Epoll);
        assert_eq!(config.cpus, Some(vec![0, 1]));
        assert!(!config.pin);
        assert_eq!(config.poll_max_us, 0);
        let config = parse(&[]).unwrap();
        assert_eq!((config.cores, config.cpus, config.pin), (None, None, true));
        assert_eq!(config.poll_max_us, 25);
    }

    #[test]
    fn bad_values_are_explained() {
        assert!(parse(&["--cores", "zero"])
            .unwrap_err()
            .contains("--cores takes a number above 0, not 'zero'"));
        assert!(parse(&["--cores"])
            .unwrap_err()
            .contains("a value is required for '--cores <N>'"));
        assert!(parse(&["--backend", "kqueue"])
            .unwrap_err()
            .contains("unknown backend 'kqueue'"));
        assert!(parse(&["--poll-max-us", "5000"])
            .unwrap_err()
            .contains("--poll-max-us takes microseconds from 0 to 1000, not '5000'"));
        assert!(parse(&["--cpus", "a,b"])
            .unwrap_err()
            .contains("comma-separated"));
    }
}
