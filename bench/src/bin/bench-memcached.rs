//! `./ebb bench memcached`: Ebbflow's memcached (one core) against stock
//! memcached 1.6 (`-t 1`), both on CPU 1, the load generator on CPU 0, the
//! Facebook ETC workload, text and binary protocols.
//!
//! For each protocol, in one run:
//! 1. stock memcached's maximum throughput (closed loop, 4 connections ×
//!    depth 4, as mutilate's c4 d4; median of 3);
//! 2. open loop at 25 %, 50 % and 75 % of that maximum against both
//!    servers, alternating, 3 runs each: p99 and the server's CPU time per
//!    request (all its threads' on-CPU time from `/proc/PID/task/*/schedstat`
//!    over the run, divided by the replies);
//! 3. a sweep of offered load upward (×1.25 per step) against both, to the
//!    highest rate whose p99 stays ≤ 500 µs with achieved ≥ 95 % of offered.
//!
//! Keys: `cpu_ratio_{text,binary}` = stock CPU per request / ours, the worst
//! of the three matched loads; `p99_ratio_{text,binary}` = ours / stock p99
//! at 50 %; `sla_qps_{ours,stock}_{text,binary}`. Targets: CPU ratios ≥ 1.25,
//! p99 ratios ≤ 1.0. A throughput–p99 plot goes to target/bench/memcached.svg.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use ebb_bench::plot::{write_p99_svg, Curve, Panel};
use ebb_bench::report::{median, output_dir, workspace_root, Report};
use ebb_loadgen::{Config, ProtocolKind, Summary};

const STOCK: &str = "/usr/bin/memcached";
const SERVER_CPU: usize = 1;
const GENERATOR_CPU: usize = 0;
const SLA_P99_US: f64 = 500.0;

struct Plan {
    runs: usize,
    window: Duration,
    warmup: Duration,
}

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Stock,
    Ours,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Stock => "stock",
            Which::Ours => "ours",
        }
    }
}

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .map(|l| l.local_addr().map(|a| a.port()).unwrap_or(0))
        .unwrap_or(0)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

fn ours_binary() -> PathBuf {
    workspace_root().join("target/release/memcached")
}

fn start(which: Which) -> Result<Server, String> {
    let port = free_port();
    let port_text = port.to_string();
    let cpu = SERVER_CPU.to_string();
    let mut command = match which {
        Which::Stock => {
            let mut command = Command::new("taskset");
            command.args(["-c", &cpu, STOCK, "-U", "0"]);
            if is_root() {
                // memcached refuses to run as root without naming a user.
                command.args(["-u", "root"]);
            }
            command
        }
        Which::Ours => {
            let mut command = Command::new(ours_binary());
            command.args(["--cpus", &cpu]);
            command
        }
    };
    command
        .args([
            "-p",
            &port_text,
            "-l",
            "127.0.0.1",
            "-t",
            "1",
            "-m",
            "64",
            "-c",
            "1024",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start {} memcached: {e}", which.name()))?;
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(format!(
                "{} memcached did not listen on port {port}",
                which.name()
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(server)
}

/// On-CPU nanoseconds of every thread of `pid`.
fn cpu_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|text| {
            text.split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
        })
        .sum()
}

fn base_config(server: &Server, protocol: ProtocolKind, plan: &Plan) -> Config {
    let mut cfg = Config::new(format!("127.0.0.1:{}", server.port)).etc();
    cfg.protocol = protocol;
    cfg.cpus = vec![GENERATOR_CPU];
    cfg.threads = 1;
    cfg.connections = 4;
    cfg.depth = 4;
    cfg.duration = plan.window;
    cfg.warmup = plan.warmup;
    cfg.drain = Duration::from_millis(500);
    cfg
}

/// One measured run: the generator's summary and the server's CPU time per
/// reply (µs).
fn measure(server: &Server, cfg: &Config) -> Result<(Summary, f64), String> {
    let before = cpu_ns(server.child.id());
    let summary = ebb_loadgen::run(cfg).map_err(|e| e.to_string())?;
    let used = cpu_ns(server.child.id()).saturating_sub(before);
    if summary.errors_total > 0 {
        return Err(format!(
            "{} error replies from the server",
            summary.errors_total
        ));
    }
    let per_request = used as f64 / 1e3 / summary.replies_total.max(1) as f64;
    Ok((summary, per_request))
}

fn preload(server: &Server, protocol: ProtocolKind, plan: &Plan) -> Result<(), String> {
    let mut cfg = base_config(server, protocol, plan);
    cfg.preload = true;
    cfg.duration = Duration::from_millis(200);
    cfg.warmup = Duration::ZERO;
    ebb_loadgen::run(&cfg)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

struct Point {
    achieved: f64,
    p99: f64,
}

struct ProtocolResult {
    stock_max: f64,
    /// Per load (percent of the stock maximum): stock CPU µs per request,
    /// ours, stock p99, ours p99.
    matched: Vec<(u32, f64, f64, f64, f64)>,
    sla: [f64; 2],
    curves: [Vec<Point>; 2],
}

fn run_protocol(protocol: ProtocolKind, plan: &Plan) -> Result<ProtocolResult, String> {
    let name = protocol.name();
    let stock = start(Which::Stock)?;
    let ours = start(Which::Ours)?;
    preload(&stock, protocol, plan)?;
    preload(&ours, protocol, plan)?;
    let servers = [(Which::Stock, &stock), (Which::Ours, &ours)];

    println!("memcached/{name}: stock maximum (closed loop, c4 d4)...");
    let mut maxima = Vec::new();
    for _ in 0..plan.runs {
        let (summary, _) = measure(&stock, &base_config(&stock, protocol, plan))?;
        maxima.push(summary.achieved_qps);
    }
    let stock_max = median(&mut maxima);
    println!("  stock maximum {stock_max:.0} ops/s");

    let mut matched = Vec::new();
    for percent in [25u32, 50, 75] {
        let fraction = f64::from(percent) / 100.0;
        let rate = stock_max * fraction;
        let mut cpu = [Vec::new(), Vec::new()];
        let mut p99 = [Vec::new(), Vec::new()];
        for _ in 0..plan.runs {
            for (index, (which, server)) in servers.iter().enumerate() {
                let mut cfg = base_config(server, protocol, plan);
                cfg.rate = Some(rate);
                cfg.depth = 64;
                let (summary, per_request) = measure(server, &cfg)?;
                println!(
                    "  {:>4.0}% of stock max, {:5}: achieved {:.0}/{:.0} ops/s, p99 {:.0} us, server {:.2} us CPU/request",
                    fraction * 100.0,
                    which.name(),
                    summary.achieved_qps,
                    summary.offered_qps,
                    summary.p99_us,
                    per_request
                );
                cpu[index].push(per_request);
                p99[index].push(summary.p99_us);
            }
        }
        matched.push((
            percent,
            median(&mut cpu[0]),
            median(&mut cpu[1]),
            median(&mut p99[0]),
            median(&mut p99[1]),
        ));
    }

    let mut sla = [0.0; 2];
    let mut curves = [Vec::new(), Vec::new()];
    for (index, (which, server)) in servers.iter().enumerate() {
        let mut rate = stock_max * 0.1;
        println!(
            "memcached/{name}: sweeping {} up to p99 > {SLA_P99_US} us...",
            which.name()
        );
        for _ in 0..30 {
            let mut cfg = base_config(server, protocol, plan);
            cfg.rate = Some(rate);
            cfg.depth = 64;
            let (summary, _) = measure(server, &cfg)?;
            curves[index].push(Point {
                achieved: summary.achieved_qps,
                p99: summary.p99_us,
            });
            let ok =
                summary.p99_us <= SLA_P99_US && summary.achieved_qps >= 0.95 * summary.offered_qps;
            println!(
                "  {:5} offered {:.0} achieved {:.0} p99 {:.0} us {}",
                which.name(),
                summary.offered_qps,
                summary.achieved_qps,
                summary.p99_us,
                if ok { "" } else { "(past the SLA)" }
            );
            if !ok {
                break;
            }
            sla[index] = summary.achieved_qps;
            rate *= 1.25;
        }
    }
    Ok(ProtocolResult {
        stock_max,
        matched,
        sla,
        curves,
    })
}

fn plot(results: &[(&str, &ProtocolResult)], path: &Path) -> Result<(), String> {
    let curve = |label: &str, color: &str, points: &[Point]| Curve {
        label: label.to_owned(),
        color: color.to_owned(),
        points: points.iter().map(|p| (p.achieved, p.p99)).collect(),
    };
    let panels: Vec<Panel> = results
        .iter()
        .map(|(name, result)| Panel {
            title: (*name).to_owned(),
            curves: vec![
                curve("stock", "#d62728", &result.curves[0]),
                curve("ebbflow", "#1f77b4", &result.curves[1]),
            ],
        })
        .collect();
    write_p99_svg(&panels, SLA_P99_US, path)
}

fn run(plan: Plan) -> Result<(), String> {
    if !Path::new(STOCK).exists() {
        return Err(format!(
            "{STOCK} is missing: run via ./ebb bench memcached, which installs it"
        ));
    }
    println!("memcached: building our server...");
    let status = Command::new("cargo")
        .args(["build", "--release", "--quiet", "-p", "memcached"])
        .current_dir(workspace_root())
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err("building apps/memcached failed".to_owned());
    }
    let text = run_protocol(ProtocolKind::Text, &plan)?;
    let binary = run_protocol(ProtocolKind::Binary, &plan)?;

    let mut report = Report::new("memcached");
    for (name, result) in [("text", &text), ("binary", &binary)] {
        let worst_cpu_ratio = result
            .matched
            .iter()
            .map(|&(_, stock, ours, _, _)| stock / ours)
            .fold(f64::INFINITY, f64::min);
        let half = result
            .matched
            .iter()
            .find(|m| m.0 == 50)
            .ok_or("no 50% point")?;
        report.metric(
            format!("stock_max_qps_{name}"),
            result.stock_max,
            "ops/s",
            "closed loop c4 d4, median of 3",
        );
        for &(pct, stock_cpu, ours_cpu, stock_p99, ours_p99) in &result.matched {
            report
                .metric(
                    format!("stock_cpu_us_per_req_{name}_{pct}"),
                    stock_cpu,
                    "us",
                    "server CPU per request, median",
                )
                .metric(
                    format!("ours_cpu_us_per_req_{name}_{pct}"),
                    ours_cpu,
                    "us",
                    "server CPU per request, median",
                )
                .metric(
                    format!("stock_p99_us_{name}_{pct}"),
                    stock_p99,
                    "us",
                    "median of runs",
                )
                .metric(
                    format!("ours_p99_us_{name}_{pct}"),
                    ours_p99,
                    "us",
                    "median of runs",
                );
        }
        report
            .metric(
                format!("cpu_ratio_{name}"),
                worst_cpu_ratio,
                "x",
                "stock/ours CPU per request, worst matched load; target >= 1.25",
            )
            .metric(
                format!("p99_ratio_{name}"),
                half.4 / half.3,
                "x",
                "ours/stock p99 at 50%; target <= 1.0",
            )
            .metric(
                format!("sla_qps_stock_{name}"),
                result.sla[0],
                "ops/s",
                "highest achieved with p99 <= 500 us",
            )
            .metric(
                format!("sla_qps_ours_{name}"),
                result.sla[1],
                "ops/s",
                "highest achieved with p99 <= 500 us",
            );
    }
    report
        .command("./ebb bench memcached")
        .command(format!("taskset -c {SERVER_CPU} {STOCK} -U 0 [-u root] -p PORT -l 127.0.0.1 -t 1 -m 64 -c 1024"))
        .command(format!("target/release/memcached --cpus {SERVER_CPU} -p PORT -l 127.0.0.1 -t 1 -m 64 -c 1024"))
        .command(format!("ebb-loadgen (library): ETC, 1 thread on CPU {GENERATOR_CPU}, 4 connections, depth 4 closed / 64 open, {} s windows", plan.window.as_secs_f64()));
    let path = report.finish()?;
    let svg = output_dir().join("memcached.svg");
    plot(&[("text", &text), ("binary", &binary)], &svg)?;
    println!("wrote {} and {}", path.display(), svg.display());
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let plan = match args.as_slice() {
        [] => Plan {
            runs: 3,
            window: Duration::from_secs(3),
            warmup: Duration::from_millis(500),
        },
        [quick] if quick == "--quick" => Plan {
            runs: 1,
            window: Duration::from_secs(1),
            warmup: Duration::from_millis(200),
        },
        _ => {
            eprintln!("usage: memcached [--quick]");
            return ExitCode::from(2);
        }
    };
    match run(plan) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("memcached bench: {error}");
            ExitCode::FAILURE
        }
    }
}
