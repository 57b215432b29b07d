//! What `./ebb bench redis-vm` measures with, apart from the guests:
//! Debian's `redis-benchmark` run inside the bench's namespace and its
//! `--csv` output read back, and the throughput at the p99 SLA of a sweep
//! over client counts.
//!
//! `redis-benchmark` is a closed loop: every client keeps one request in
//! flight, so the client count sets the load. A sweep runs the same
//! count of requests per client at each count and the throughput at the
//! SLA is the highest throughput whose p99 stays within it.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use ebb_testbed::netns::NetNamespace;

use crate::vm::{CLIENT_CPU, NICE};

/// One line of `redis-benchmark --csv`: a test and its figures.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvRow {
    /// The test's name as `redis-benchmark` prints it (`GET`, `SET`).
    pub test: String,
    /// Requests per second.
    pub rps: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

/// The columns `redis-benchmark --csv` (7.0) prints first.
const HEADER: &str = r#""test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms""#;

/// The rows of `redis-benchmark --csv` output; an error names what is not
/// in the 7.0 format (a header line, then one quoted row per test).
pub fn parse_csv(text: &str) -> Result<Vec<CsvRow>, String> {
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    match lines.next() {
        Some(HEADER) => {}
        other => {
            return Err(format!(
                "redis-benchmark --csv: expected the header {HEADER}, got {other:?}"
            ))
        }
    }
    lines
        .map(|line| {
            let fields: Vec<&str> = line.split(',').map(|f| f.trim_matches('"')).collect();
            let bad = || format!("redis-benchmark --csv: malformed row {line:?}");
            if fields.len() != 8 {
                return Err(bad());
            }
            let number = |i: usize| fields[i].parse::<f64>().map_err(|_| bad());
            Ok(CsvRow {
                test: fields[0].to_owned(),
                rps: number(1)?,
                p50_ms: number(4)?,
                p99_ms: number(6)?,
            })
        })
        .collect()
}

/// One `redis-benchmark` run against a guest.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// The server's address (inside the namespace).
    pub server: Ipv4Addr,
    /// Its port.
    pub port: u16,
    /// `-c`: clients, each with one request in flight.
    pub clients: u32,
    /// `-n`: requests in all.
    pub requests: u32,
    /// `-r`: keys are `key:NNNNNNNNNNNN` with NNN below this.
    pub keyspace: u32,
    /// `-t`: the test (`get`, `set`).
    pub test: String,
    /// `-d`: the value size of SET, bytes.
    pub value_bytes: u32,
}

impl Invocation {
    /// The command: inside `namespace`, pinned to [`CLIENT_CPU`] at nice
    /// [`NICE`] as every VM benchmark's client, bounded by `limit`.
    pub fn command(&self, namespace: &NetNamespace, limit: Duration) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", namespace.name()])
            .args(["taskset", "-c", &CLIENT_CPU.to_string()])
            .args(["nice", "-n", &NICE.to_string()])
            .args(["timeout", &limit.as_secs().max(1).to_string()])
            .arg("redis-benchmark")
            .args(self.arguments());
        command
    }

    /// `redis-benchmark`'s own arguments.
    pub fn arguments(&self) -> Vec<String> {
        [
            "-h".to_owned(),
            self.server.to_string(),
            "-p".to_owned(),
            self.port.to_string(),
            "-c".to_owned(),
            self.clients.to_string(),
            "-n".to_owned(),
            self.requests.to_string(),
            "-r".to_owned(),
            self.keyspace.to_string(),
            "-d".to_owned(),
            self.value_bytes.to_string(),
            "-t".to_owned(),
            self.test.clone(),
            "--csv".to_owned(),
        ]
        .to_vec()
    }

    /// Runs it; its one row.
    pub fn run(&self, namespace: &NetNamespace, limit: Duration) -> Result<CsvRow, String> {
        let out = self
            .command(namespace, limit)
            .output()
            .map_err(|e| format!("cannot run redis-benchmark: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "redis-benchmark {} failed ({}; 124 is the {} s limit): {}{}",
                self.arguments().join(" "),
                out.status,
                limit.as_secs(),
                stdout.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let rows = parse_csv(&stdout)?;
        let want = self.test.to_ascii_uppercase();
        rows.into_iter()
            .find(|row| row.test == want)
            .ok_or_else(|| format!("redis-benchmark printed no {want} row: {stdout}"))
    }
}

/// One measured client count of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// Clients.
    pub clients: u32,
    /// Requests per second.
    pub rps: f64,
    /// Median latency, µs.
    pub p50_us: f64,
    /// 99th percentile latency, µs.
    pub p99_us: f64,
    /// QEMU's host CPU per request, µs.
    pub cpu_us: f64,
}

/// The highest throughput among `points` whose p99 is within `sla_us`;
/// 0 when none is.
pub fn throughput_at_sla(points: &[SweepPoint], sla_us: f64) -> f64 {
    points
        .iter()
        .filter(|p| p.p99_us <= sla_us)
        .map(|p| p.rps)
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_are_read_by_column() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                    \"SET\",\"116279.06\",\"0.055\",\"0.016\",\"0.055\",\"0.087\",\"0.143\",\"1.959\"\n\
                    \"GET\",\"122699.38\",\"0.050\",\"0.016\",\"0.047\",\"0.071\",\"0.119\",\"0.271\"\n";
        let rows = parse_csv(text).expect("valid");
        assert_eq!(
            rows[1],
            CsvRow {
                test: "GET".into(),
                rps: 122_699.38,
                p50_ms: 0.047,
                p99_ms: 0.119
            }
        );
        assert_eq!(rows.len(), 2);
    }

    #[test]
    fn csv_that_is_not_redis_benchmarks_says_why() {
        assert!(parse_csv("").unwrap_err().contains("expected the header"));
        let short = format!("{HEADER}\n\"GET\",\"1\"\n");
        assert!(parse_csv(&short).unwrap_err().contains("malformed row"));
        let word = format!("{HEADER}\n\"GET\",\"x\",\"1\",\"1\",\"1\",\"1\",\"1\",\"1\"\n");
        assert!(parse_csv(&word).unwrap_err().contains("malformed row"));
    }

    #[test]
    fn the_command_runs_in_the_namespace_pinned_and_bounded() {
        let invocation = Invocation {
            server: Ipv4Addr::new(192, 168, 77, 2),
            port: 6379,
            clients: 50,
            requests: 40_000,
            keyspace: 10_000,
            test: "get".into(),
            value_bytes: 3,
        };
        assert_eq!(
            invocation.arguments().join(" "),
            "-h 192.168.77.2 -p 6379 -c 50 -n 40000 -r 10000 -d 3 -t get --csv"
        );
    }

    #[test]
    fn the_sla_throughput_is_the_best_point_within_it() {
        let point = |rps: f64, p99_us: f64| SweepPoint {
            clients: 1,
            rps,
            p50_us: 0.0,
            p99_us,
            cpu_us: 0.0,
        };
        let points = [
            point(1000.0, 900.0),
            point(9000.0, 4000.0),
            point(12_000.0, 7000.0),
        ];
        assert_eq!(throughput_at_sla(&points, 5000.0), 9000.0);
        assert_eq!(throughput_at_sla(&points, 500.0), 0.0);
    }
}
