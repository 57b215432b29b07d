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

/// The platform options every hosted application accepts, for `--help`.
pub const OPTIONS_HELP: &str = "\
Platform options:
  --cores N          number of cores (default: every CPU this process may use)
  --cpus LIST        CPUs to pin cores to, comma-separated (e.g. 0,1)
  --backend NAME     auto (default), io-uring or epoll
  --no-pin           do not pin cores to CPUs";

impl Config {
    /// Takes the platform options out of `args` (without the program name)
    /// and returns the rest for the application.
    pub fn from_args(
        args: impl IntoIterator<Item = String>,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let mut config = Config::default();
        let mut rest = Vec::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (name, inline) = match arg.split_once('=') {
                Some((name, value)) if name.starts_with("--") => {
                    (name.to_string(), Some(value.to_string()))
                }
                _ => (arg.clone(), None),
            };
            let mut value = |name: &str| {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| ConfigError(format!("{name} needs a value")))
            };
            match name.as_str() {
                "--cores" => config.cores = Some(parse_cores(&value("--cores")?)?),
                "--cpus" => config.cpus = Some(parse_cpus(&value("--cpus")?)?),
                "--backend" => config.backend = value("--backend")?.parse().map_err(ConfigError)?,
                "--no-pin" => config.pin = false,
                _ => rest.push(arg),
            }
        }
        Ok((config, rest))
    }
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

/// `--cpus`' value: CPU numbers separated by commas.
///
/// # Errors
///
/// Anything else, with a sentence saying so.
pub fn parse_cpus(text: &str) -> Result<Vec<usize>, ConfigError> {
    text.split(',')
        .map(|cpu| cpu.trim().parse::<usize>())
        .collect::<Result<Vec<_>, _>>()
        .ok()
        .filter(|cpus| !cpus.is_empty())
        .ok_or_else(|| {
            ConfigError(format!(
                "--cpus takes a comma-separated list of CPU numbers, not '{text}'"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<(Config, Vec<String>), ConfigError> {
        Config::from_args(args.iter().map(|arg| arg.to_string()))
    }

    #[test]
    fn platform_options_are_taken_and_the_rest_kept() {
        let (config, rest) = parse(&[
            "--cores",
            "3",
            "hello",
            "--backend=epoll",
            "--cpus",
            "0,1",
            "-v",
        ])
        .unwrap();
        assert_eq!(config.cores, Some(3));
        assert_eq!(config.backend, Backend::Epoll);
        assert_eq!(config.cpus, Some(vec![0, 1]));
        assert_eq!(rest, vec!["hello", "-v"]);
    }

    #[test]
    fn bad_values_are_explained() {
        assert_eq!(
            parse(&["--cores", "zero"]).unwrap_err().0,
            "--cores takes a number above 0, not 'zero'"
        );
        assert_eq!(parse(&["--cores"]).unwrap_err().0, "--cores needs a value");
        assert!(parse(&["--backend", "kqueue"])
            .unwrap_err()
            .0
            .contains("unknown backend 'kqueue'"));
        assert!(parse(&["--cpus", "a,b"])
            .unwrap_err()
            .0
            .contains("comma-separated"));
    }
}
