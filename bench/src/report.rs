//! What every benchmark reports, and how.
//!
//! A [`Report`] collects metrics in order and the exact command lines used;
//! [`Report::finish`] prints them as a table and writes
//! `target/bench/NAME.json`:
//!
//! ```json
//! {
//!   "bench": "ebbref",
//!   "date": "2026-01-02T03:04:05Z",
//!   "commands": ["valgrind --tool=callgrind ..."],
//!   "versions": {"rustc": "...", "kernel": "...", "cpu": "...", "git": "1a2b3c4"},
//!   "units": {"deref_ns": "ns"},
//!   "notes": {"deref_ns": "median of 5 runs"},
//!   "deref_ns": 1.5
//! }
//! ```
//!
//! Metric keys sit at the top level next to those six reserved keys, so a
//! reader takes `json["deref_ns"]` directly. A value that is not finite is
//! written as `null`.
//!
//! The module also has the statistics ([`median`], [`percentile`]) and the
//! instruction counter ([`run_callgrind`]) the benchmarks share.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

/// Keys of the JSON file that metrics cannot use.
pub const RESERVED_KEYS: [&str; 6] = ["bench", "date", "commands", "versions", "units", "notes"];

/// One measured figure.
#[derive(Debug, Clone, PartialEq)]
struct Metric {
    key: String,
    value: f64,
    unit: String,
    note: String,
}

/// The figures of one benchmark run; see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    name: String,
    metrics: Vec<Metric>,
    labels: Vec<(String, String)>,
    commands: Vec<String>,
}

/// The versions a result depends on, as written under `"versions"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions {
    /// `rustc --version`.
    pub rustc: String,
    /// `uname -r`.
    pub kernel: String,
    /// The first `model name` of `/proc/cpuinfo`.
    pub cpu: String,
    /// `git rev-parse --short HEAD` of the workspace.
    pub git: String,
}

const UNKNOWN: &str = "unknown";

impl Versions {
    /// Asks this machine; anything that cannot be found is `"unknown"`.
    pub fn detect(root: &Path) -> Self {
        let kernel = command_output(Command::new("uname").arg("-r")).or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        });
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| cpu_model(&text));
        Versions {
            rustc: command_output(Command::new("rustc").arg("--version"))
                .unwrap_or_else(|| UNKNOWN.to_owned()),
            kernel: kernel.unwrap_or_else(|| UNKNOWN.to_owned()),
            cpu: cpu.unwrap_or_else(|| UNKNOWN.to_owned()),
            git: command_output(Command::new("git").arg("-C").arg(root).args([
                "rev-parse",
                "--short",
                "HEAD",
            ]))
            .unwrap_or_else(|| UNKNOWN.to_owned()),
        }
    }
}

/// The trimmed stdout of a successful `command`, if not empty.
fn command_output(command: &mut Command) -> Option<String> {
    let out = command.stderr(std::process::Stdio::null()).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The first `model name` value of a `/proc/cpuinfo` text.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name").then(|| value.trim().to_owned())
    })
}

impl Report {
    /// A report for the benchmark `name` (the `NAME` of `./ebb bench NAME`).
    pub fn new(name: impl Into<String>) -> Self {
        Report {
            name: name.into(),
            ..Report::default()
        }
    }

    /// The benchmark's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Adds a metric; the table keeps this order. `key` becomes a top-level
    /// JSON key (use `snake_case` and put the unit in it, e.g. `deref_ns`);
    /// `unit` is shown and written under `"units"`; `note` (may be empty) says
    /// how the figure was taken, e.g. `"median of 5 runs"`.
    pub fn metric(
        &mut self,
        key: impl Into<String>,
        value: f64,
        unit: impl Into<String>,
        note: impl Into<String>,
    ) -> &mut Self {
        self.metrics.push(Metric {
            key: key.into(),
            value,
            unit: unit.into(),
            note: note.into(),
        });
        self
    }

    /// Adds a top-level string, e.g. `"accel": "tcg"`: a setting the
    /// figures depend on that is not a number. Keys share the metrics'
    /// rules (unique, not reserved).
    pub fn label(&mut self, key: impl Into<String>, value: impl Into<String>) -> &mut Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// Records an exact command line used to produce the figures.
    pub fn command(&mut self, line: impl Into<String>) -> &mut Self {
        self.commands.push(line.into());
        self
    }

    /// The value of metric `key`, if added.
    pub fn value(&self, key: &str) -> Option<f64> {
        self.metrics.iter().find(|m| m.key == key).map(|m| m.value)
    }

    /// Checks the name and keys: a plain file name; keys unique, not empty,
    /// not reserved.
    fn validate(&self) -> Result<(), String> {
        let plain = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
                && !s.starts_with('.')
        };
        if !plain(&self.name) {
            return Err(format!(
                "benchmark name '{}' is not a plain file name (letters, digits, - _ .)",
                self.name
            ));
        }
        let mut seen = HashSet::new();
        let keys = self
            .metrics
            .iter()
            .map(|m| &m.key)
            .chain(self.labels.iter().map(|(key, _)| key));
        for key in keys {
            if key.is_empty() {
                return Err(format!(
                    "benchmark '{}' has a metric with an empty key",
                    self.name
                ));
            }
            if RESERVED_KEYS.contains(&key.as_str()) {
                return Err(format!(
                    "metric key '{key}' is reserved (reserved: {})",
                    RESERVED_KEYS.join(", ")
                ));
            }
            if !seen.insert(key.as_str()) {
                return Err(format!("metric key '{key}' is used twice"));
            }
        }
        Ok(())
    }

    /// The JSON document (see the [module docs](self)) with the given
    /// versions and date.
    pub fn to_json(&self, versions: &Versions, date: &str) -> Result<Value, String> {
        self.validate()?;
        let mut doc = Map::new();
        doc.insert("bench".into(), json!(self.name));
        doc.insert("date".into(), json!(date));
        doc.insert("commands".into(), json!(self.commands));
        doc.insert(
            "versions".into(),
            json!({
                "rustc": versions.rustc,
                "kernel": versions.kernel,
                "cpu": versions.cpu,
                "git": versions.git,
            }),
        );
        for (key, value) in &self.labels {
            doc.insert(key.clone(), json!(value));
        }
        let mut units = Map::new();
        let mut notes = Map::new();
        for m in &self.metrics {
            // `From<f64>` gives `null` for NaN and infinities.
            doc.insert(m.key.clone(), Value::from(m.value));
            units.insert(m.key.clone(), json!(m.unit));
            if !m.note.is_empty() {
                notes.insert(m.key.clone(), json!(m.note));
            }
        }
        doc.insert("units".into(), Value::Object(units));
        doc.insert("notes".into(), Value::Object(notes));
        Ok(Value::Object(doc))
    }

    /// The table for people: a title line, then key, value, unit and note
    /// columns, aligned, then the commands.
    pub fn table(&self) -> String {
        let rows: Vec<[String; 4]> = self
            .metrics
            .iter()
            .map(|m| {
                [
                    m.key.clone(),
                    format_value(m.value),
                    m.unit.clone(),
                    m.note.clone(),
                ]
            })
            .collect();
        let header = ["key", "value", "unit", "note"].map(str::to_owned);
        let mut widths = [0usize; 4];
        for row in std::iter::once(&header).chain(&rows) {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let [wk, wv, wu, _] = widths;
        let mut out = format!("bench {}\n", self.name);
        for (key, value) in &self.labels {
            let _ = writeln!(out, "  {key}: {value}");
        }
        for row in std::iter::once(&header).chain(&rows) {
            let line = format!(
                "  {:<wk$}  {:>wv$}  {:<wu$}  {}",
                row[0], row[1], row[2], row[3]
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
        for c in &self.commands {
            let _ = writeln!(out, "  $ {c}");
        }
        out
    }

    /// Prints the table to stdout and writes `target/bench/NAME.json` under
    /// the workspace root ([`output_dir`]); returns the file's path.
    pub fn finish(&self) -> Result<PathBuf, String> {
        self.finish_in(&output_dir())
    }

    /// Like [`finish`](Self::finish), writing `NAME.json` into `dir` (created
    /// if missing).
    pub fn finish_in(&self, dir: &Path) -> Result<PathBuf, String> {
        let root = workspace_root();
        let doc = self.to_json(&Versions::detect(&root), &utc_now())?;
        print!("{}", self.table());
        let path = write_json(dir, &self.name, &doc)?;
        println!("  wrote {}", path.display());
        Ok(path)
    }
}

/// Writes `doc` as pretty JSON to `dir/NAME.json`, creating `dir`.
fn write_json(dir: &Path, name: &str, doc: &Value) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(format!("{name}.json"));
    let mut text = serde_json::to_string_pretty(doc)
        .map_err(|e| format!("cannot encode the report of '{name}': {e}"))?;
    text.push('\n');
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// A value for the table: integers without decimals, else about four
/// significant digits.
fn format_value(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        v.to_string()
    } else if v.fract() == 0.0 && a < 1e15 {
        format!("{v:.0}")
    } else if a >= 1000.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else if a >= 1e-9 {
        let (mut decimals, mut x) = (3usize, a);
        while x < 1.0 {
            x *= 10.0;
            decimals += 1;
        }
        format!("{v:.decimals$}")
    } else {
        format!("{v:.3e}")
    }
}

pub use ebb_testbed::workspace_root;

/// `target/bench` under [`workspace_root`].
pub fn output_dir() -> PathBuf {
    workspace_root().join("target").join("bench")
}

/// The current time as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_iso8601(i64::try_from(secs).unwrap_or(i64::MAX))
}

/// `secs` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (proleptic
/// Gregorian calendar, UTC).
pub fn utc_iso8601(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The median of `values` (the mean of the two middle ones for an even
/// count); sorts `values` ascending. `NaN` when empty.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// The smallest of `values`; infinity when empty.
pub fn minimum(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

/// A benchmark binary's exit: success, or `NAME: error` on stderr and
/// failure.
pub fn exit_code(name: &str, result: Result<(), String>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The `p`-th percentile (`p` in 0..=100, clamped) of ascending `sorted`,
/// interpolating linearly between the closest ranks (as numpy's default).
/// `NaN` when `sorted` is empty or `p` is `NaN`.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() || p.is_nan() {
        return f64::NAN;
    }
    let last = sorted.len() - 1;
    let rank = p.clamp(0.0, 100.0) / 100.0 * (last as f64);
    // `rank` is finite and in 0..=last, so its floor is a valid index.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let lo = (rank.floor() as usize).min(last);
    let frac = rank - lo as f64;
    if lo == last || frac == 0.0 {
        sorted[lo]
    } else {
        sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac
    }
}

/// What [`run_callgrind`] says when `valgrind` is not installed.
pub const VALGRIND_MISSING: &str = "valgrind not found: run via ./ebb bench, which installs it";

/// Runs `binary args...` under `valgrind --tool=callgrind` and returns the
/// total number of instructions executed (the `summary:`/`totals:` line of
/// the callgrind output file, which is deleted afterwards). The program's
/// own output is captured and shown only on failure.
pub fn run_callgrind(binary: &Path, args: &[&str]) -> Result<u64, String> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let out_file = std::env::temp_dir().join(format!(
        "ebb-callgrind-{}-{}.out",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut out_arg = std::ffi::OsString::from("--callgrind-out-file=");
    out_arg.push(&out_file);
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(out_arg)
        .arg(binary)
        .args(args)
        .output();
    let result = match output {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(VALGRIND_MISSING.to_owned()),
        Err(e) => Err(format!("cannot start valgrind: {e}")),
        Ok(out) if !out.status.success() => Err(format!(
            "valgrind --tool=callgrind {} failed ({}):\n{}",
            binary.display(),
            out.status,
            tail(&String::from_utf8_lossy(&out.stderr), 20)
        )),
        Ok(_) => std::fs::read_to_string(&out_file)
            .map_err(|e| format!("cannot read callgrind output {}: {e}", out_file.display()))
            .and_then(|text| {
                callgrind_total(&text).ok_or_else(|| {
                    format!(
                        "no summary: or totals: line in callgrind output {}",
                        out_file.display()
                    )
                })
            }),
    };
    let _ = std::fs::remove_file(&out_file);
    result
}

/// The first number of the first `summary:` or `totals:` line.
fn callgrind_total(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line
            .strip_prefix("summary:")
            .or_else(|| line.strip_prefix("totals:"))?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let path = std::env::temp_dir().join(format!(
                "ebb-bench-test-{tag}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&path);
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn versions() -> Versions {
        Versions {
            rustc: "rustc 1.0.0".into(),
            kernel: "6.1.0".into(),
            cpu: "Test CPU".into(),
            git: "abc1234".into(),
        }
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [7.0]), 7.0);
        assert!(median(&mut []).is_nan());
        let mut v = [5.0, -1.0, 3.0];
        median(&mut v);
        assert_eq!(v, [-1.0, 3.0, 5.0]);
    }

    #[test]
    fn minimum_of_some_and_none() {
        assert_eq!(minimum(&[3.0, -1.5, 2.0]), -1.5);
        assert_eq!(minimum(&[]), f64::INFINITY);
    }

    #[test]
    fn percentile_interpolates_between_ranks() {
        let s = [10.0, 20.0, 30.0, 40.0, 50.0];
        assert_eq!(percentile(&s, 0.0), 10.0);
        assert_eq!(percentile(&s, 50.0), 30.0);
        assert_eq!(percentile(&s, 100.0), 50.0);
        assert_eq!(percentile(&s, 25.0), 20.0);
        assert!((percentile(&s, 90.0) - 46.0).abs() < 1e-9);
        assert!((percentile(&s, 99.0) - 49.6).abs() < 1e-9);
        assert_eq!(percentile(&s, 150.0), 50.0);
        assert_eq!(percentile(&s, -5.0), 10.0);
        assert_eq!(percentile(&[42.0], 99.0), 42.0);
        assert!(percentile(&[], 50.0).is_nan());
        assert!(percentile(&s, f64::NAN).is_nan());
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert!((percentile(&hundred, 99.0) - 99.01).abs() < 1e-9);
    }

    #[test]
    fn dates_are_utc_iso8601() {
        assert_eq!(utc_iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_iso8601(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc_iso8601(-1), "1969-12-31T23:59:59Z");
        let now = utc_now();
        assert_eq!(now.len(), 20, "{now}");
        assert!(now.ends_with('Z') && now.as_bytes()[10] == b'T', "{now}");
    }

    #[test]
    fn json_has_flat_metrics_and_context() {
        let mut r = Report::new("demo");
        r.metric("deref_ns", 1.5, "ns", "median of 5 runs")
            .metric("instructions", 1234.0, "instr", "")
            .metric("broken", f64::NAN, "x", "")
            .command("valgrind --tool=callgrind target/release/demo");
        let doc = r
            .to_json(&versions(), "2026-01-02T03:04:05Z")
            .expect("valid");
        assert_eq!(doc["bench"], "demo");
        assert_eq!(doc["date"], "2026-01-02T03:04:05Z");
        assert_eq!(doc["deref_ns"], 1.5);
        assert_eq!(doc["instructions"], 1234.0);
        assert!(doc["broken"].is_null());
        assert_eq!(
            doc["commands"],
            json!(["valgrind --tool=callgrind target/release/demo"])
        );
        assert_eq!(doc["versions"]["cpu"], "Test CPU");
        assert_eq!(doc["versions"]["git"], "abc1234");
        assert_eq!(doc["units"]["deref_ns"], "ns");
        assert_eq!(doc["notes"], json!({"deref_ns": "median of 5 runs"}));
        assert_eq!(r.value("instructions"), Some(1234.0));
        assert_eq!(r.value("absent"), None);
    }

    #[test]
    fn bad_names_and_keys_are_refused() {
        let v = versions();
        let mut r = Report::new("x");
        r.metric("a", 1.0, "", "").metric("a", 2.0, "", "");
        assert_eq!(
            r.to_json(&v, "d"),
            Err("metric key 'a' is used twice".into())
        );
        let mut r = Report::new("x");
        r.metric("commands", 1.0, "", "");
        assert!(r
            .to_json(&v, "d")
            .expect_err("reserved")
            .contains("reserved"));
        for name in ["../evil", ""] {
            let error = Report::new(name).to_json(&v, "d").expect_err(name);
            assert!(error.contains("is not a plain file name"), "{error}");
        }
        let mut r = Report::new("x");
        r.metric("", 1.0, "", "");
        let error = r.to_json(&v, "d").expect_err("empty key");
        assert!(error.contains("has a metric with an empty key"), "{error}");
    }

    #[test]
    fn finish_in_writes_the_json_file() {
        let dir = TempDir::new("finish");
        let out = dir.0.join("nested").join("bench");
        let mut r = Report::new("writetest");
        r.metric("ops_per_sec", 2.5e6, "ops/s", "").command("true");
        let path = r.finish_in(&out).expect("written");
        assert_eq!(path, out.join("writetest.json"));
        let text = std::fs::read_to_string(&path).expect("read back");
        let doc: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(doc["bench"], "writetest");
        assert_eq!(doc["ops_per_sec"], 2.5e6);
        assert_eq!(doc["commands"], json!(["true"]));
        for key in ["rustc", "kernel", "cpu", "git"] {
            assert!(
                doc["versions"][key].as_str().is_some_and(|s| !s.is_empty()),
                "{key}"
            );
        }
        let date = doc["date"].as_str().expect("date");
        assert!(date.ends_with('Z') && date.len() == 20, "{date}");
        // A refused report writes nothing.
        let mut bad = Report::new("badtest");
        bad.metric("bench", 1.0, "", "");
        let error = bad.finish_in(&out).expect_err("reserved key");
        assert!(error.contains("'bench' is reserved"), "{error}");
        assert!(!out.join("badtest.json").exists());
    }

    #[test]
    fn table_is_aligned() {
        let mut r = Report::new("t");
        r.metric("short", 3.0, "ns", "median of 5")
            .metric("a_longer_key", 0.25, "ratio", "")
            .metric("big", 1234.5678, "µs", "p99")
            .command("echo hi");
        assert_eq!(
            r.table(),
            "bench t\n\
             \x20 key            value  unit   note\n\
             \x20 short              3  ns     median of 5\n\
             \x20 a_longer_key  0.2500  ratio\n\
             \x20 big           1234.6  µs     p99\n\
             \x20 $ echo hi\n"
        );
    }

    #[test]
    fn values_are_formatted_readably() {
        assert_eq!(format_value(42.0), "42");
        assert_eq!(format_value(-3.0), "-3");
        assert_eq!(format_value(12.3456), "12.346");
        assert_eq!(format_value(0.000_123_4), "0.0001234");
        assert_eq!(format_value(1e-12), "1.000e-12");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "inf");
    }

    #[test]
    fn cpu_model_is_the_first_model_name() {
        let info = "processor\t: 0\nvendor_id\t: X\nmodel name\t: Fancy CPU @ 2GHz\n\n\
                    processor\t: 1\nmodel name\t: Other\n";
        assert_eq!(cpu_model(info), Some("Fancy CPU @ 2GHz".into()));
        assert_eq!(cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn callgrind_totals_are_parsed() {
        let out = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\n\
                   fn=main\n1 5\nsummary: 123456\ntotals: 123456\n";
        assert_eq!(callgrind_total(out), Some(123_456));
        assert_eq!(callgrind_total("events: Ir Dr\ntotals: 99 7\n"), Some(99));
        assert_eq!(callgrind_total("events: Ir\n"), None);
        assert_eq!(callgrind_total("summary: lots\n"), None);
    }

    #[test]
    fn run_callgrind_counts_instructions_or_says_valgrind_is_missing() {
        let has_valgrind = Command::new("valgrind")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        let result = run_callgrind(Path::new("/bin/true"), &[]);
        if has_valgrind {
            let count = result.expect("callgrind on /bin/true");
            assert!(count > 1000, "{count}");
            let err = run_callgrind(Path::new("/bin/false"), &[]).expect_err("false fails");
            assert!(err.contains("failed"), "{err}");
        } else {
            assert_eq!(result, Err(VALGRIND_MISSING.to_owned()));
        }
        // No output files are left behind.
        let leftover = std::fs::read_dir(std::env::temp_dir())
            .expect("temp dir")
            .filter_map(Result::ok)
            .any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("ebb-callgrind-{}-", std::process::id()))
            });
        assert!(!leftover);
    }

    #[test]
    fn labels_are_top_level_strings_and_share_the_key_rules() {
        let mut report = Report::new("vm");
        report.metric("ratio", 2.5, "x", "").label("accel", "tcg");
        let versions = Versions {
            rustc: "r".into(),
            kernel: "k".into(),
            cpu: "c".into(),
            git: "g".into(),
        };
        let doc = report.to_json(&versions, "d").expect("valid");
        assert_eq!(doc["accel"], "tcg");
        assert_eq!(doc["ratio"], 2.5);
        assert!(report.table().contains("  accel: tcg\n"));
        report.label("ratio", "x");
        assert_eq!(
            report.to_json(&versions, "d"),
            Err("metric key 'ratio' is used twice".into())
        );
        let mut reserved = Report::new("vm");
        reserved.label("date", "x");
        let error = reserved.to_json(&versions, "d").expect_err("reserved");
        assert!(error.contains("'date' is reserved"), "{error}");
    }
}
