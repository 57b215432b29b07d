//! What `./ebb bench messenger` needs besides its orchestration (whose
//! NodeAllocator takes ebb-cluster's Messenger hooks, `MessengerContract`
//! and `Announced`, so that `allocate()` returns at the node's
//! announcement): reading a pinging node's samples from its console, and
//! the report's keys.
//!
//! - [`parse_console`] reads the lines of `echo::ping::run`.
//! - [`Figures`] are one path's samples; [`add_path`] and [`add_ratios`]
//!   put them in the report.

use crate::report::{median, percentile, Report};

/// Global Ebb ids each node gets (echo uses the first).
pub const IDS_PER_NODE: u32 = 64;

/// One path's measurements: the four kinds of `echo::ping::measure`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// 64-byte Messenger round trips, ns.
    pub messenger_ns: Vec<u64>,
    /// 64-byte TCP ping-pongs, ns.
    pub tcp_ns: Vec<u64>,
    /// 1 MiB Messenger round trips, ns.
    pub messenger_large_ns: Vec<u64>,
    /// 1 MiB TCP ping-pongs, ns.
    pub tcp_large_ns: Vec<u64>,
    /// Pipelined 64-byte calls: how many, and the ns they took.
    pub pipelined: (u64, u64),
}

impl Figures {
    /// Adds `ns` samples of `kind` (`messenger`/`tcp`) and `size`.
    ///
    /// # Errors
    ///
    /// A kind or size `echo::ping` does not make.
    pub fn add(&mut self, kind: &str, size: usize, ns: &[u64]) -> Result<(), String> {
        let samples = match (kind, size) {
            ("messenger", echo::ping::SMALL) => &mut self.messenger_ns,
            ("tcp", echo::ping::SMALL) => &mut self.tcp_ns,
            ("messenger", echo::ping::LARGE) => &mut self.messenger_large_ns,
            ("tcp", echo::ping::LARGE) => &mut self.tcp_large_ns,
            _ => return Err(format!("unexpected samples: {kind} of {size} bytes")),
        };
        samples.extend_from_slice(ns);
        Ok(())
    }

    /// Adds `other`'s samples and pipelined calls (another round's).
    pub fn merge(&mut self, other: Figures) {
        self.messenger_ns.extend(other.messenger_ns);
        self.tcp_ns.extend(other.tcp_ns);
        self.messenger_large_ns.extend(other.messenger_large_ns);
        self.tcp_large_ns.extend(other.tcp_large_ns);
        self.pipelined.0 += other.pipelined.0;
        self.pipelined.1 += other.pipelined.1;
    }

    /// From `echo::ping::measure`'s output.
    ///
    /// # Errors
    ///
    /// As [`Figures::add`].
    pub fn from_samples(
        samples: &[echo::ping::Samples],
        pipelined_ns: u64,
        calls: u64,
    ) -> Result<Self, String> {
        let mut figures = Figures {
            pipelined: (calls, pipelined_ns),
            ..Figures::default()
        };
        for samples in samples {
            figures.add(samples.kind, samples.size, &samples.ns)?;
        }
        Ok(figures)
    }
}

/// A pinging node's figures from its console log: `echo: ping KIND SIZE
/// ns: N N...` lines, `echo: ping pipelined CALLS ns: N` and `echo: ping
/// done` last.
///
/// # Errors
///
/// No done line (the node did not finish), or a line that does not parse.
pub fn parse_console(text: &str) -> Result<Figures, String> {
    let prefix = format!("echo: {} ", echo::ping::SAMPLES_LINE);
    let done = format!("echo: {}", echo::ping::DONE_LINE);
    let mut figures = Figures::default();
    let mut finished = false;
    for line in text.lines().map(str::trim_end) {
        if line == done {
            finished = true;
            continue;
        }
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let bad = || format!("a samples line that does not parse: {line}");
        let (what, numbers) = rest.split_once(" ns:").ok_or_else(bad)?;
        let numbers = numbers
            .split_whitespace()
            .map(str::parse::<u64>)
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|_| bad())?;
        let (kind, count) = what.split_once(' ').ok_or_else(bad)?;
        let count = count.parse::<usize>().map_err(|_| bad())?;
        if kind == "pipelined" {
            let [ns] = numbers[..] else { return Err(bad()) };
            figures.pipelined = (count as u64, ns);
        } else {
            figures.add(kind, count, &numbers)?;
        }
    }
    if !finished {
        return Err(format!("no `{done}` line: the node did not finish"));
    }
    Ok(figures)
}

/// Median and 99th percentile of `ns`, in µs.
pub fn median_p99_us(ns: &[u64]) -> (f64, f64) {
    let mut us: Vec<f64> = ns.iter().map(|&n| n as f64 / 1e3).collect();
    let median = median(&mut us);
    (median, percentile(&us, 99.0))
}

/// NetPIPE's goodput of round trips of `size` bytes each way: size over
/// the one-way time (half the median round trip), Mbit/s.
pub fn goodput_mbps(size: usize, ns: &[u64]) -> f64 {
    let mut us: Vec<f64> = ns.iter().map(|&n| n as f64 / 1e3).collect();
    let one_way_us = median(&mut us) / 2.0;
    size as f64 * 8.0 / one_way_us
}

/// Adds path `path`'s keys (`native` or `hosted_native`):
/// `rtt_us_PATH_{median,p99}` (Messenger), `rtt_us_raw_PATH_{median,p99}`
/// (TCP), `calls_per_s_PATH`, `goodput_mbps_PATH` and
/// `goodput_mbps_raw_PATH`.
pub fn add_path(report: &mut Report, path: &str, what: &str, figures: &Figures) {
    let (median, p99) = median_p99_us(&figures.messenger_ns);
    let count = figures.messenger_ns.len();
    let note = format!("64-byte Messenger calls {what}, one outstanding; {count} round trips");
    report
        .metric(format!("rtt_us_{path}_median"), median, "us", note.clone())
        .metric(format!("rtt_us_{path}_p99"), p99, "us", note);
    let (median, p99) = median_p99_us(&figures.tcp_ns);
    let count = figures.tcp_ns.len();
    let note = format!(
        "64-byte TCP ping-pong {what} with the same node's TCP echo, one connection; {count} round trips"
    );
    report
        .metric(
            format!("rtt_us_raw_{path}_median"),
            median,
            "us",
            note.clone(),
        )
        .metric(format!("rtt_us_raw_{path}_p99"), p99, "us", note);
    let (calls, ns) = figures.pipelined;
    report.metric(
        format!("calls_per_s_{path}"),
        calls as f64 / (ns as f64 / 1e9),
        "calls/s",
        format!(
            "64-byte calls {what}, {} in flight, {calls} calls; one core each side",
            echo::ping::DEPTH
        ),
    );
    report
        .metric(
            format!("goodput_mbps_{path}"),
            goodput_mbps(echo::ping::LARGE, &figures.messenger_large_ns),
            "Mbit/s",
            format!("1 MiB Messenger calls {what}: size / (median round trip / 2)"),
        )
        .metric(
            format!("goodput_mbps_raw_{path}"),
            goodput_mbps(echo::ping::LARGE, &figures.tcp_large_ns),
            "Mbit/s",
            format!("1 MiB TCP ping-pong {what}, as above"),
        );
}

/// `overhead_ratio` (native↔native), `overhead_ratio_hosted_native` and
/// `overhead_ratio_linux`: median Messenger round trip over median TCP
/// round trip of each path measured (target ≤ 1.1). Call after
/// [`add_path`].
pub fn add_ratios(report: &mut Report) {
    for (key, path) in [
        ("overhead_ratio", "native"),
        ("overhead_ratio_hosted_native", "hosted_native"),
        ("overhead_ratio_linux", "linux"),
    ] {
        let messenger = report.value(&format!("rtt_us_{path}_median"));
        let raw = report.value(&format!("rtt_us_raw_{path}_median"));
        if let (Some(messenger), Some(raw)) = (messenger, raw) {
            report.metric(
                key,
                messenger / raw,
                "",
                format!("rtt_us_{path}_median / rtt_us_raw_{path}_median (target <= 1.1)"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONSOLE: &str = "\
echo: ready: TCP 0.0.0.0:7007, UDP 0.0.0.0:7007 (1 core, native)
echo: Messenger node 2 on port 7100: announced to 10.96.0.1:7100, echo Ebb 1088, 1 other nodes
echo: ping messenger 64 ns: 1000 2000 3000
echo: ping messenger 64 ns: 4000
echo: ping tcp 64 ns: 500 700
echo: ping messenger 1048576 ns: 9000000
echo: ping tcp 1048576 ns: 8000000
echo: ping pipelined 800 ns: 400000000
echo: ping done
";

    #[test]
    fn a_finished_node_console_gives_every_kind() {
        let figures = parse_console(CONSOLE).expect("parses");
        assert_eq!(figures.messenger_ns, [1000, 2000, 3000, 4000]);
        assert_eq!(figures.tcp_ns, [500, 700]);
        assert_eq!(figures.messenger_large_ns, [9_000_000]);
        assert_eq!(figures.tcp_large_ns, [8_000_000]);
        assert_eq!(figures.pipelined, (800, 400_000_000));
        let mut rounds = figures.clone();
        rounds.merge(figures);
        assert_eq!(rounds.tcp_ns, [500, 700, 500, 700]);
        assert_eq!(rounds.pipelined, (1600, 800_000_000));
    }

    #[test]
    fn an_unfinished_or_garbled_console_is_an_error_naming_why() {
        let unfinished = CONSOLE.replace("echo: ping done\n", "");
        assert_eq!(
            parse_console(&unfinished),
            Err("no `echo: ping done` line: the node did not finish".to_owned())
        );
        let garbled = CONSOLE.replace("ns: 500 700", "ns: 500 x");
        assert_eq!(
            parse_console(&garbled),
            Err("a samples line that does not parse: echo: ping tcp 64 ns: 500 x".to_owned())
        );
        let odd_size = CONSOLE.replace("tcp 64 ns", "tcp 65 ns");
        assert_eq!(
            parse_console(&odd_size),
            Err("unexpected samples: tcp of 65 bytes".to_owned())
        );
    }

    #[test]
    fn the_report_has_every_key_of_both_paths_and_the_ratios() {
        let figures = parse_console(CONSOLE).expect("parses");
        let mut report = Report::new("messenger");
        add_path(&mut report, "native", "native to native", &figures);
        add_path(&mut report, "hosted_native", "hosted to native", &figures);
        add_ratios(&mut report);
        for path in ["native", "hosted_native"] {
            for key in [
                format!("rtt_us_{path}_median"),
                format!("rtt_us_{path}_p99"),
                format!("rtt_us_raw_{path}_median"),
                format!("rtt_us_raw_{path}_p99"),
                format!("calls_per_s_{path}"),
                format!("goodput_mbps_{path}"),
                format!("goodput_mbps_raw_{path}"),
            ] {
                assert!(report.value(&key).is_some_and(f64::is_finite), "{key}");
            }
        }
        assert_eq!(report.value("rtt_us_native_median"), Some(2.5));
        assert_eq!(report.value("rtt_us_raw_native_median"), Some(0.6));
        let ratio = report.value("overhead_ratio").expect("overhead_ratio");
        assert!((ratio - 2.5 / 0.6).abs() < 1e-9);
        assert!(report.value("overhead_ratio_hosted_native").is_some());
        assert_eq!(report.value("calls_per_s_native"), Some(2000.0));
        // 1 MiB in 4.5 ms one way.
        let goodput = report.value("goodput_mbps_native").expect("goodput");
        assert!((goodput - 1_048_576.0 * 8.0 / 4500.0).abs() < 1e-6);
    }
}
