//! `./ebb bench loadgen`: what the load generator itself can measure.
//!
//! * Ceiling: closed loop against the trivial responder (in this process,
//!   its thread pinned to CPU 1; gets hit with a 128-byte value, about the
//!   mean ETC value), the generator on CPU 0 with 1 thread × 4 connections
//!   × depth 4 (mutilate's `-c 4 -d 4`), ETC workload, text protocol (the
//!   costlier one to parse). `ceiling_binary_qps` is the same in binary.
//! * Stock memcached (`/usr/bin/memcached -t 1`, pinned to CPU 1 with
//!   `taskset`), same generator settings, ETC with preload, text and binary
//!   runs alternating; memcached's own CPU time per request from
//!   `/proc/PID/stat` over the same window.
//! * `mutilate_*_ratio`: ours over the midpoint of mutilate's range in
//!   BENCH-NOTES.md (text 107k–136k, binary 265k–338k ops/s); 0.75–1.25 is
//!   the expected band, the README's "Cross-check" explains differences.
//!
//! Each figure is the median of `--runs` runs (default 3) of `--duration`
//! seconds (default 4) after `--warmup` (default 1).

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use ebb_bench::report::{median, Report};
use ebb_loadgen::responder::{Responder, ResponderConfig};
use ebb_loadgen::{run, Config, ProtocolKind, Summary};

const MEMCACHED: &str = "/usr/bin/memcached";
/// mutilate's stock memcached figures (BENCH-NOTES.md), ops/s.
const MUTILATE_TEXT: (f64, f64) = (107_000.0, 136_000.0);
const MUTILATE_BINARY: (f64, f64) = (265_000.0, 338_000.0);
const GEN_CPU: usize = 0;
const SERVER_CPU: usize = 1;

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-loadgen",
    about = "./ebb bench loadgen: what the load generator itself can measure"
)]
struct Opts {
    /// Runs per figure (the median is reported).
    #[arg(long, value_name = "N", default_value = "3")]
    runs: std::num::NonZeroUsize,
    /// Seconds per run.
    #[arg(long, value_name = "S", default_value_t = 4.0, value_parser = positive_seconds)]
    duration: f64,
    /// Seconds of warm-up before each run.
    #[arg(long, value_name = "S", default_value_t = 1.0, value_parser = positive_seconds)]
    warmup: f64,
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("'{text}' is not a positive number of seconds"))
}

fn parse_args() -> Result<Opts, String> {
    Ok(<Opts as clap::Parser>::parse())
}

/// The generator's settings for every run here.
fn config(server: String, protocol: ProtocolKind, o: &Opts, pin: bool) -> Config {
    let mut cfg = Config::new(server).etc();
    cfg.protocol = protocol;
    cfg.threads = 1;
    cfg.connections = 4;
    cfg.depth = 4;
    if pin {
        cfg.cpus = vec![GEN_CPU];
    }
    cfg.duration = Duration::from_secs_f64(o.duration);
    cfg.warmup = Duration::from_secs_f64(o.warmup);
    cfg
}

/// The equivalent command line, for the report.
fn command_line(cfg: &Config) -> String {
    format!(
        "ebb-loadgen --server {} --protocol {} --workload etc --threads {} --connections {} \
         --depth {} {}--duration {} --warmup {}{}",
        cfg.server,
        cfg.protocol.name(),
        cfg.threads,
        cfg.connections,
        cfg.depth,
        cfg.cpus
            .first()
            .map_or(String::new(), |c| format!("--cpus {c} ")),
        cfg.duration.as_secs_f64(),
        cfg.warmup.as_secs_f64(),
        if cfg.preload { " --preload" } else { "" }
    )
}

/// The 1-minute load average.
fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// A process's user + system CPU seconds from `/proc/PID/stat`.
fn proc_cpu_secs(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are
    // fields 14 and 15 (1-based), i.e. 11 and 12 after the name.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    Some((utime + stime) / hz)
}

struct Memcached {
    child: Child,
    port: u16,
    command: String,
}

impl Memcached {
    fn start(pin: bool) -> Result<Self, String> {
        if !std::path::Path::new(MEMCACHED).exists() {
            return Err(format!(
                "{MEMCACHED} is missing: run via ./ebb bench loadgen, which installs memcached"
            ));
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let mut words: Vec<String> = Vec::new();
        if pin {
            words.extend(["taskset", "-c", "1"].map(str::to_owned));
        }
        words.push(MEMCACHED.to_owned());
        words.extend(
            [
                "-p",
                &port.to_string(),
                "-l",
                "127.0.0.1",
                "-U",
                "0",
                "-t",
                "1",
            ]
            .map(str::to_owned),
        );
        if ebb_loadgen::sys::is_root() {
            words.extend(["-u", "root"].map(str::to_owned));
        }
        let child = Command::new(&words[0])
            .args(&words[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", words.join(" ")))?;
        let mut mc = Memcached {
            child,
            port,
            command: words.join(" "),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = mc.child.try_wait() {
                return Err(format!("{} exited at start: {status}", mc.command));
            }
            if Instant::now() > deadline {
                return Err(format!("{} did not listen within 10 s", mc.command));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(mc)
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Default)]
struct Series {
    qps: Vec<f64>,
    cpu: Vec<f64>,
    p99: Vec<f64>,
    cpu_per_req: Vec<f64>,
    server_cpu_per_req: Vec<f64>,
}

impl Series {
    fn push(&mut self, s: &Summary) {
        self.qps.push(s.achieved_qps);
        self.cpu.push(s.cpu_percent);
        self.p99.push(s.p99_us);
        self.cpu_per_req.push(s.cpu_us_per_request);
    }

    fn note(values: &[f64], runs: usize) -> String {
        let list: Vec<String> = values.iter().map(|v| format!("{v:.0}")).collect();
        format!("median of {runs} runs ({})", list.join(", "))
    }
}

fn check(s: &Summary, what: &str) -> Result<(), String> {
    if s.errors_total > 0 || s.preload_errors > 0 || s.replies == 0 {
        return Err(format!(
            "{what}: {} errors, {} preload errors, {} replies:\n{}",
            s.errors_total,
            s.preload_errors,
            s.replies,
            s.table()
        ));
    }
    Ok(())
}

fn bench() -> Result<Report, String> {
    let o = parse_args()?;
    let load_before = loadavg();
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let pin = cpus >= 2;
    let mut report = Report::new("loadgen");
    let pin_note = if pin {
        "generator on CPU 0, server on CPU 1"
    } else {
        "NOT pinned: fewer than 2 CPUs"
    };

    // Ceiling against the trivial responder.
    let responder = Responder::start(ResponderConfig {
        value_len: Some(128),
        stall: None,
        cpu: pin.then_some(SERVER_CPU),
    })
    .map_err(|e| format!("cannot start the responder: {e}"))?;
    let mut ceiling = Series::default();
    let mut ceiling_bin = Series::default();
    let mut ceiling_deep = Series::default();
    let mut last_cmd = (String::new(), String::new(), String::new());
    for _ in 0..o.runs.get() {
        for (protocol, series) in [
            (ProtocolKind::Text, &mut ceiling),
            (ProtocolKind::Binary, &mut ceiling_bin),
        ] {
            let cfg = config(responder.addr().to_string(), protocol, &o, pin);
            let s = run(&cfg).map_err(|e| format!("ceiling run: {e}"))?;
            check(&s, "ceiling")?;
            eprintln!("ceiling {}: {}", protocol.name(), s.table());
            series.push(&s);
            if protocol == ProtocolKind::Text {
                last_cmd.0 = command_line(&cfg);
            } else {
                last_cmd.1 = command_line(&cfg);
            }
        }
        // The same with 8 connections x depth 32: enough in flight that
        // the generator's CPU, not the round trip, sets the pace.
        let mut cfg = config(responder.addr().to_string(), ProtocolKind::Text, &o, pin);
        cfg.connections = 8;
        cfg.depth = 32;
        let s = run(&cfg).map_err(|e| format!("deep ceiling run: {e}"))?;
        check(&s, "deep ceiling")?;
        eprintln!("ceiling c8 d32: {}", s.table());
        ceiling_deep.push(&s);
        last_cmd.2 = command_line(&cfg);
    }
    drop(responder);
    report.command(format!(
        "in-process trivial responder (ebb_loadgen::responder, 128-byte hits){}",
        if pin { ", thread pinned to CPU 1" } else { "" }
    ));
    report.command(last_cmd.0);
    report.command(last_cmd.1);
    report.command(last_cmd.2);

    // Stock memcached, text and binary alternating.
    let mc = Memcached::start(pin)?;
    report.command(mc.command.clone());
    let mut text = Series::default();
    let mut bin = Series::default();
    for _ in 0..o.runs.get() {
        for (protocol, series) in [
            (ProtocolKind::Text, &mut text),
            (ProtocolKind::Binary, &mut bin),
        ] {
            let mut cfg = config(format!("127.0.0.1:{}", mc.port), protocol, &o, pin);
            cfg.preload = true;
            // memcached's CPU time, sampled from 0.2 s after the warm-up
            // (the preload, about 0.1 s, comes first) to 0.2 s before the
            // end: an approximation of the window, in CPU-seconds per
            // second.
            let (s, server_cpu) = {
                let warm = cfg.warmup;
                let pid = mc.child.id();
                let window = cfg.duration;
                let handle = std::thread::spawn(move || {
                    std::thread::sleep(warm + Duration::from_millis(200));
                    let a = proc_cpu_secs(pid)?;
                    let ta = Instant::now();
                    std::thread::sleep(window.saturating_sub(Duration::from_millis(400)));
                    let b = proc_cpu_secs(pid)?;
                    Some((b - a) / ta.elapsed().as_secs_f64())
                });
                let s = run(&cfg).map_err(|e| format!("memcached run: {e}"))?;
                let busy = handle.join().ok().flatten().unwrap_or(f64::NAN);
                (s, busy)
            };
            check(&s, "memcached")?;
            eprintln!("memcached {}: {}", protocol.name(), s.table());
            series.push(&s);
            // Server CPU seconds per second over requests per second.
            series
                .server_cpu_per_req
                .push(server_cpu * 1e6 / s.achieved_qps.max(1.0));
            report.command(command_line(&cfg));
        }
    }
    drop(mc);

    let runs = o.runs.get();
    let mut put = |key: &str, values: &mut Vec<f64>, unit: &str, extra: &str| -> f64 {
        let note = format!("{}{extra}", Series::note(values, runs));
        let m = median(values);
        report.metric(key, m, unit, note);
        m
    };
    put(
        "ceiling_qps",
        &mut ceiling.qps,
        "req/s",
        &format!("; trivial responder, text, c4 d4, ETC; {pin_note}"),
    );
    put("ceiling_gen_cpu_percent", &mut ceiling.cpu, "%", "");
    put(
        "ceiling_gen_cpu_us_per_req",
        &mut ceiling.cpu_per_req,
        "µs",
        "",
    );
    put(
        "ceiling_binary_qps",
        &mut ceiling_bin.qps,
        "req/s",
        "; trivial responder, binary",
    );
    put(
        "ceiling_binary_gen_cpu_percent",
        &mut ceiling_bin.cpu,
        "%",
        "",
    );
    put(
        "ceiling_c8d32_qps",
        &mut ceiling_deep.qps,
        "req/s",
        "; trivial responder, text, 8 connections x depth 32 (CPU-bound ceiling)",
    );
    put(
        "ceiling_c8d32_gen_cpu_percent",
        &mut ceiling_deep.cpu,
        "%",
        "",
    );
    let text_qps = put(
        "stock_text_qps",
        &mut text.qps,
        "req/s",
        &format!("; memcached -t 1, ETC, preload, c4 d4; {pin_note}"),
    );
    put("stock_text_gen_cpu_percent", &mut text.cpu, "%", "");
    put("stock_text_p99_us", &mut text.p99, "µs", "");
    put(
        "stock_text_server_cpu_us_per_req",
        &mut text.server_cpu_per_req,
        "µs",
        "; /proc/PID/stat, approximate window",
    );
    let bin_qps = put("stock_binary_qps", &mut bin.qps, "req/s", "");
    put("stock_binary_gen_cpu_percent", &mut bin.cpu, "%", "");
    put("stock_binary_p99_us", &mut bin.p99, "µs", "");
    put(
        "stock_binary_server_cpu_us_per_req",
        &mut bin.server_cpu_per_req,
        "µs",
        "",
    );
    let load = [load_before, loadavg()];
    report.metric(
        "loadavg_1min",
        load.iter().copied().fold(f64::NAN, f64::max),
        "",
        format!(
            "the larger of /proc/loadavg before and after ({:.2}, {:.2}); above ~0.5 other work \
             shared these 2 CPUs and the figures are low",
            load[0], load[1]
        ),
    );
    let mid = |(a, b): (f64, f64)| (a + b) / 2.0;
    let ratio_note = |r: f64| {
        if (0.75..=1.25).contains(&r) {
            "within the expected ±25 %".to_owned()
        } else {
            "OUTSIDE ±25 %: see crates/ebb-loadgen/README.md, Cross-check".to_owned()
        }
    };
    let rt = text_qps / mid(MUTILATE_TEXT);
    let rb = bin_qps / mid(MUTILATE_BINARY);
    report.metric(
        "mutilate_text_ratio",
        rt,
        "ratio",
        format!("ours / 121.5k (mutilate 107k–136k); {}", ratio_note(rt)),
    );
    report.metric(
        "mutilate_binary_ratio",
        rb,
        "ratio",
        format!("ours / 301.5k (mutilate 265k–338k); {}", ratio_note(rb)),
    );
    Ok(report)
}

fn main() -> ExitCode {
    match bench().and_then(|r| r.finish().map(|_| ())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench loadgen: error: {e}");
            ExitCode::FAILURE
        }
    }
}
