//! The command line of `ebb-loadgen` (clap derive).

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::config::{Arrival, Config};
use crate::protocol::ProtocolKind;
use crate::sys::parse_cpu_list;
use crate::workload::SizeDist;

/// Load generator for memcached (text, binary) and Redis (RESP) servers:
/// closed or open loop.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "ebb-loadgen",
    version,
    after_help = "Without --rate the run is closed loop: every connection keeps --depth \
                  requests in flight. With --rate it is open loop: sends are scheduled at that \
                  aggregate rate independently of replies, and each latency is measured from \
                  the scheduled send time (no coordinated omission).\n\n\
                  Example (ETC against stock memcached, 50k req/s):\n  \
                  ebb-loadgen --server 127.0.0.1:11211 --workload etc --preload --rate 50000"
)]
pub struct Args {
    /// The server, host:port.
    #[arg(long, short = 's', default_value = "127.0.0.1:11211")]
    pub server: String,
    /// Wire protocol.
    #[arg(long, short = 'p', value_enum, default_value = "text")]
    pub protocol: ProtocolKind,
    /// Open loop at this aggregate rate (requests/s); without it, closed loop.
    #[arg(long, short = 'r')]
    pub rate: Option<f64>,
    /// Open-loop gaps between sends.
    #[arg(long, value_enum, default_value = "poisson")]
    pub arrival: Arrival,
    /// Generator threads.
    #[arg(long, short = 't', default_value_t = 1)]
    pub threads: usize,
    /// Connections per thread.
    #[arg(long, short = 'c', default_value_t = 4)]
    pub connections: usize,
    /// Pipeline depth: most requests in flight per connection.
    #[arg(long, short = 'd', default_value_t = 4)]
    pub depth: usize,
    /// CPUs to pin the threads to, e.g. 0 or 0,2-3 (thread i on the i-th).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Workload preset: `fixed` (the sizes below) or `etc` (Facebook ETC as
    /// mutilate runs it: ETC key and value sizes, --update 0.033).
    #[arg(long, short = 'w', value_enum, default_value = "fixed")]
    pub workload: Workload,
    /// Key size: bytes, or `etc`.
    #[arg(long)]
    pub key_size: Option<SizeDist>,
    /// Value size of sets: bytes, `etc` or `etc-paper`.
    #[arg(long)]
    pub value_size: Option<SizeDist>,
    /// Fraction of requests that are sets.
    #[arg(long, short = 'u')]
    pub update: Option<f64>,
    /// Number of keys (chosen uniformly).
    #[arg(long, short = 'k', default_value_t = 10_000)]
    pub keys: u64,
    /// Set every key once before the run, so that gets hit.
    #[arg(long)]
    pub preload: bool,
    /// Measured seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Warm-up seconds before the measurement (not counted).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Seconds to wait for outstanding replies after the run.
    #[arg(long, default_value_t = 1.0)]
    pub drain: f64,
    /// Seconds allowed to establish each connection.
    #[arg(long, default_value_t = 2.0)]
    pub connect_timeout: f64,
    /// Seconds allowed for the preload.
    #[arg(long, default_value_t = 60.0)]
    pub preload_timeout: f64,
    /// Seed of the workload and the schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also write the figures as flat JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Workload presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Fixed sizes: 30-byte keys, 200-byte values, gets only (unless set).
    Fixed,
    /// Facebook ETC as mutilate runs it.
    Etc,
}

fn seconds(name: &str, s: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(s).map_err(|_| format!("--{name} must be a number of seconds >= 0"))
}

impl Args {
    /// The run these arguments describe.
    pub fn into_config(self) -> Result<Config, String> {
        let mut cfg = Config::new(self.server);
        if self.workload == Workload::Etc {
            cfg = cfg.etc();
        }
        cfg.protocol = self.protocol;
        cfg.rate = self.rate;
        cfg.arrival = self.arrival;
        cfg.threads = self.threads;
        cfg.connections = self.connections;
        cfg.depth = self.depth;
        if let Some(list) = &self.cpus {
            cfg.cpus = parse_cpu_list(list)?;
        }
        if let Some(k) = self.key_size {
            cfg.key_size = k;
        }
        if let Some(v) = self.value_size {
            cfg.value_size = v;
        }
        if let Some(u) = self.update {
            cfg.update = u;
        }
        cfg.keys = self.keys;
        cfg.preload = self.preload;
        cfg.duration = seconds("duration", self.duration)?;
        cfg.warmup = seconds("warmup", self.warmup)?;
        cfg.drain = seconds("drain", self.drain)?;
        cfg.connect_timeout = seconds("connect-timeout", self.connect_timeout)?;
        cfg.preload_timeout = seconds("preload-timeout", self.preload_timeout)?;
        cfg.seed = self.seed;
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Result<Config, String> {
        let args = Args::try_parse_from(std::iter::once("ebb-loadgen").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        args.into_config()
    }

    #[test]
    fn defaults_are_closed_loop_c4_d4() {
        let cfg = config(&[]).expect("defaults");
        assert_eq!(cfg, Config::new("127.0.0.1:11211"));
        assert!(!cfg.is_open_loop());
        assert_eq!((cfg.threads, cfg.connections, cfg.depth), (1, 4, 4));
        assert_eq!(cfg.duration, Duration::from_secs(10));
        assert_eq!(cfg.warmup, Duration::from_secs(1));
    }

    #[test]
    fn etc_open_loop_binary() {
        let cfg = config(&[
            "--workload",
            "etc",
            "--rate",
            "2000",
            "-p",
            "binary",
            "--cpus",
            "0,1",
            "--arrival",
            "uniform",
            "--preload",
        ])
        .expect("valid");
        assert_eq!(cfg.rate, Some(2000.0));
        assert_eq!(cfg.key_size, SizeDist::Etc);
        assert_eq!(cfg.value_size, SizeDist::Etc);
        assert!((cfg.update - 0.033).abs() < 1e-12);
        assert_eq!(cfg.protocol, ProtocolKind::Binary);
        assert_eq!(cfg.arrival, Arrival::Uniform);
        assert_eq!(cfg.cpus, vec![0, 1]);
        assert!(cfg.preload);
        let cfg =
            config(&["--workload", "etc", "--update", "0.5", "--value-size", "10"]).expect("valid");
        assert_eq!((cfg.update, cfg.value_size), (0.5, SizeDist::Fixed(10)));
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(
            matches!(config(&["--rate", "0"]), Err(e) if e.contains("--rate must be a positive number"))
        );
        assert!(
            matches!(config(&["--depth", "0"]), Err(e) if e.contains("--depth must be at least 1"))
        );
        assert!(
            matches!(config(&["--update", "1.5"]), Err(e) if e.contains("--update must be in 0..=1"))
        );
        assert!(
            matches!(config(&["--duration=-1"]), Err(e) if e.contains("--duration must be a number of seconds >= 0"))
        );
        assert!(
            matches!(config(&["--duration", "0"]), Err(e) if e.contains("--duration must be above 0"))
        );
        assert!(
            matches!(config(&["--key-size", "huge"]), Err(e) if e.contains("invalid value 'huge' for '--key-size"))
        );
        assert!(matches!(config(&["--cpus", "x"]), Err(e) if e.contains("'x' is not a CPU list")));
        assert!(
            matches!(config(&["--protocol", "http"]), Err(e) if e.contains("invalid value 'http' for '--protocol"))
        );
    }

    #[test]
    fn grammar_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}
