//! What `./ebb bench sqlite` reads from its programs' output (issue 18):
//! sqlite-kv's per-run times and checksums, speedtest1's total, and
//! syscall_cost's figure, whichever platform printed them (a Linux
//! guest's console mixes in kernel lines; a native image's adds the
//! platform's), and the spread figures it reports.

/// One sqlite-kv invocation: its run times and final checksums.
#[derive(Debug, Clone, PartialEq)]
pub struct KvRuns {
    /// Each run's time in ms, in order.
    pub run_ms: Vec<f64>,
    /// The `rows N, database checksum X, reads checksum Y` line's fields
    /// after `sqlite-kv: `: equal on every platform for the same
    /// arguments.
    pub checksums: String,
}

/// sqlite-kv's lines in `text` (`run K: MS ms`, then the checksum line);
/// `None` if there is no checksum line or no run.
pub fn parse_kv(text: &str) -> Option<KvRuns> {
    let mut run_ms = Vec::new();
    let mut checksums = None;
    for line in text.lines() {
        // A console may prefix nothing, but a guest's may carry \r.
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("run ") {
            let ms = rest.split_once(": ").and_then(|(_, time)| {
                time.strip_suffix(" ms")
                    .and_then(|number| number.parse::<f64>().ok())
            });
            if let Some(ms) = ms {
                run_ms.push(ms);
            }
        } else if let Some(rest) = line.strip_prefix("sqlite-kv: rows ") {
            checksums = Some(format!("rows {rest}"));
        }
    }
    let checksums = checksums?;
    (!run_ms.is_empty()).then_some(KvRuns { run_ms, checksums })
}

/// speedtest1's `TOTAL....... S.SSSs` in seconds.
pub fn parse_speedtest_total(text: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("TOTAL")?;
        rest.trim_start_matches('.')
            .trim()
            .strip_suffix('s')?
            .trim()
            .parse()
            .ok()
    })
}

/// speedtest1's test lines (`NNN - description.... S.SSSs`) without
/// their times: the same tests on every platform.
pub fn speedtest_tests(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let (number, rest) = line.split_once(" - ")?;
            if number.len() != 3 || !number.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let name = rest.trim_end_matches(|c: char| c.is_ascii_digit() || ".s ".contains(c));
            Some(format!("{number} - {name}"))
        })
        .collect()
}

/// syscall_cost's `syscall_cost: getpid NS ns over N calls`, in ns.
pub fn parse_syscall_ns(text: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("syscall_cost: getpid ")?;
        rest.split_once(" ns")?.0.parse().ok()
    })
}

/// The lines of `text` after `begin` up to `end` (exclusive): one
/// program's share of a guest's console, framed by the batch script's
/// markers.
pub fn section<'a>(text: &'a str, begin: &str, end: &str) -> Option<&'a str> {
    let start = text.find(begin)? + begin.len();
    let length = text[start..].find(end)?;
    Some(&text[start..start + length])
}

/// The population standard deviation of `values` (`NaN` when empty).
pub fn stdev(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_output_is_read_among_other_lines() {
        let text = "ebbflow native: virtio-net up\r\n\
                    sqlite-kv: 10 records, 2 runs of 5 operations, 50% reads\n\
                    run 1: 103.767 ms\n[    1.2] random: crng init done\nrun 2: 99.5 ms\r\n\
                    sqlite-kv: rows 10, database checksum fa29, reads checksum deb8\n";
        let runs = parse_kv(text).unwrap();
        assert_eq!(runs.run_ms, [103.767, 99.5]);
        assert_eq!(
            runs.checksums,
            "rows 10, database checksum fa29, reads checksum deb8"
        );
        assert_eq!(parse_kv("run 1: 3 ms\n"), None, "no checksum line");
        assert_eq!(parse_kv("sqlite-kv: rows 1, x\n"), None, "no run");
    }

    #[test]
    fn speedtest1_total_and_tests_are_read() {
        let text = " 100 - 50000 INSERTs into table with no index.......    0.154s\n\
                    990 - ANALYZE...........................................    0.010s\n\
                    \x20      TOTAL.......................................................    1.234s\n";
        assert_eq!(parse_speedtest_total(text), Some(1.234));
        assert_eq!(
            speedtest_tests(text),
            [
                "100 - 50000 INSERTs into table with no index",
                "990 - ANALYZE"
            ]
        );
        assert_eq!(parse_speedtest_total("no total"), None);
    }

    #[test]
    fn syscall_cost_sections_and_spread_are_read() {
        assert_eq!(
            parse_syscall_ns("syscall_cost: getpid 116.8 ns over 200000 calls\n"),
            Some(116.8)
        );
        assert_eq!(parse_syscall_ns("syscall_cost: nothing"), None);
        let console = "boot\n== kv50\nrun 1: 2 ms\n== kv100\nrun 1: 3 ms\n== end\n";
        assert_eq!(section(console, "== kv50\n", "== "), Some("run 1: 2 ms\n"));
        assert_eq!(section(console, "== none\n", "== "), None);
        assert!((stdev(&[1.0, 3.0]) - 1.0).abs() < 1e-12);
        assert!(stdev(&[]).is_nan());
    }
}
