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
//!    over the run, divided by the replies), and its sleeps per request
//!    (voluntary context switches), printed with each run;
//! 3. a sweep of offered load upward (×1.25 per step) against both, to the
//!    highest rate whose p99 stays ≤ 500 µs with achieved ≥ 95 % of offered.
//!
//! 4. with `-m 1024` and 1 MB values, the median time of a `set` that
//!    must evict, once the server is full (issue 15: ours took 7.2 ms
//!    where stock took 0.8).
//!
//! Keys: `evict_set_us_ratio` = ours / stock median µs per evicting set
//! (target ≤ 1.0), with `evict_set_p50_us_{stock,ours}`;
//! `cpu_ratio_{text,binary}` = stock CPU per request / ours, the worst
//! of the three matched loads, and `cpu_ratio_{text,binary}_75` the same at
//! 75 % (issue 20's figure); `p99_ratio_{text,binary}` = ours / stock p99
//! at 50 %; `sla_qps_{ours,stock}_{text,binary}`. Targets: CPU ratios ≥ 1.25,
//! p99 ratios ≤ 1.0. A throughput–p99 plot goes to target/bench/memcached.svg.
//!
//! To compare settings of our server: `--matched-only` measures only step
//! 2 (to `memcached-matched.json`, no plot), and `--ours-arg=ARG` (repeatable) passes ARG to our server, e.g.
//! `--ours-arg=--poll-max-us --ours-arg=0` for the loop without adaptive
//! polling.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use ebb_bench::evict::{evicting_set_p50_us, TIMED_SETS, VALUE_LEN};
use ebb_bench::memcached::{
    build_ours, closed_loop_max, matched_loads, Launch, MatchedLoad, Plan, Server, Which, STOCK,
};
use ebb_bench::plot::{write_p99_svg, Curve, Panel};
use ebb_bench::report::{output_dir, Report};
use ebb_loadgen::ProtocolKind;

const SERVER_CPU: usize = 1;
const GENERATOR_CPU: usize = 0;
const SLA_P99_US: f64 = 500.0;
/// `-m` for the eviction measurement, in MiB (the issue's).
const EVICT_MEMORY_MIB: usize = 1024;

struct Point {
    achieved: f64,
    p99: f64,
}

struct ProtocolResult {
    stock_max: f64,
    /// Per load (percent of the stock maximum): stock's and our CPU per
    /// request and p99.
    matched: Vec<MatchedLoad>,
    sla: [f64; 2],
    curves: [Vec<Point>; 2],
}

/// What a run measures, beyond the plan's windows.
struct Options {
    /// More arguments for our server (e.g. `--poll-max-us 0`), to compare
    /// settings.
    ours_args: Vec<String>,
    /// Only the matched loads: no eviction measurement, no sweeps.
    matched_only: bool,
}

fn run_protocol(
    protocol: ProtocolKind,
    plan: &Plan,
    options: &Options,
) -> Result<ProtocolResult, String> {
    let name = protocol.name();
    let stock = Server::start(&Launch::loopback(Which::Stock, SERVER_CPU))?;
    let mut ours_launch = Launch::loopback(Which::Ours, SERVER_CPU);
    ours_launch.extra.clone_from(&options.ours_args);
    let ours = Server::start(&ours_launch)?;
    stock.preload(protocol, GENERATOR_CPU)?;
    ours.preload(protocol, GENERATOR_CPU)?;
    let servers = [(Which::Stock, &stock), (Which::Ours, &ours)];

    println!("memcached/{name}: stock maximum (closed loop, c4 d4)...");
    let stock_max = closed_loop_max(&stock, protocol, plan, GENERATOR_CPU)?.median_qps;
    println!("  stock maximum {stock_max:.0} ops/s");

    let matched = matched_loads(
        [&stock, &ours],
        stock_max,
        &[25, 50, 75],
        protocol,
        plan,
        GENERATOR_CPU,
    )?;

    let mut sla = [0.0; 2];
    let mut curves = [Vec::new(), Vec::new()];
    let swept = if options.matched_only {
        &[][..]
    } else {
        &servers[..]
    };
    for (index, (which, server)) in swept.iter().enumerate() {
        let mut rate = stock_max * 0.1;
        println!(
            "memcached/{name}: sweeping {} up to p99 > {SLA_P99_US} us...",
            which.name()
        );
        for _ in 0..30 {
            let mut cfg = server.load(protocol, plan, GENERATOR_CPU);
            cfg.rate = Some(rate);
            cfg.depth = 64;
            let summary = server.measure(&cfg)?.summary;
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

/// Median µs per evicting set, stock's then ours (one server at a time:
/// each holds `-m` of values).
fn evict_sets(ours_args: &[String]) -> Result<[f64; 2], String> {
    let mut p50 = [0.0; 2];
    for (index, which) in [Which::Stock, Which::Ours].into_iter().enumerate() {
        let mut launch = Launch::loopback(which, SERVER_CPU);
        launch.memory_mib = EVICT_MEMORY_MIB;
        if which == Which::Ours {
            launch.extra = ours_args.to_vec();
        }
        let server = Server::start(&launch)?;
        println!(
            "memcached: evicting sets, {} with -m {EVICT_MEMORY_MIB}...",
            which.name()
        );
        p50[index] = evicting_set_p50_us(&server, EVICT_MEMORY_MIB)?;
        println!(
            "  {} p50 {:.0} us per evicting set",
            which.name(),
            p50[index]
        );
    }
    Ok(p50)
}

/// The eviction figures.
fn report_evict(report: &mut Report, [stock, ours]: [f64; 2]) {
    let note = format!("median of {TIMED_SETS} sets of {VALUE_LEN} B, -m {EVICT_MEMORY_MIB}, full");
    report
        .metric("evict_set_p50_us_stock", stock, "us", note.clone())
        .metric("evict_set_p50_us_ours", ours, "us", note)
        .metric(
            "evict_set_us_ratio",
            ours / stock,
            "x",
            "ours/stock p50 per evicting set; target <= 1.0",
        );
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

fn run(plan: Plan, evict_only: bool, options: &Options) -> Result<(), String> {
    if !Path::new(STOCK).exists() {
        return Err(format!(
            "{STOCK} is missing: run via ./ebb bench memcached, which installs it"
        ));
    }
    println!("memcached: building our server...");
    build_ours()?;
    if evict_only {
        let mut report = Report::new("memcached-evict");
        if !options.ours_args.is_empty() {
            report.label("ours_args", options.ours_args.join(" "));
        }
        report_evict(&mut report, evict_sets(&options.ours_args)?);
        let path = report.finish()?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    let evict = if options.matched_only {
        None
    } else {
        Some(evict_sets(&options.ours_args)?)
    };
    let text = run_protocol(ProtocolKind::Text, &plan, options)?;
    let binary = run_protocol(ProtocolKind::Binary, &plan, options)?;

    // A partial run must not overwrite the full run's figures and plot.
    let mut report = Report::new(if options.matched_only {
        "memcached-matched"
    } else {
        "memcached"
    });
    if let Some(evict) = evict {
        report_evict(&mut report, evict);
    }
    if !options.ours_args.is_empty() {
        report.label("ours_args", options.ours_args.join(" "));
    }
    for (name, result) in [("text", &text), ("binary", &binary)] {
        let worst_cpu_ratio = result
            .matched
            .iter()
            .map(|m| m.server_us[0] / m.server_us[1])
            .fold(f64::INFINITY, f64::min);
        let half = result
            .matched
            .iter()
            .find(|m| m.percent == 50)
            .ok_or("no 50% point")?;
        report.metric(
            format!("stock_max_qps_{name}"),
            result.stock_max,
            "ops/s",
            "closed loop c4 d4, median of 3",
        );
        for load in &result.matched {
            let pct = load.percent;
            let [stock_cpu, ours_cpu] = load.server_us;
            let [stock_p99, ours_p99] = load.p99_us;
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
        if let Some(three_quarters) = result.matched.iter().find(|m| m.percent == 75) {
            report.metric(
                format!("cpu_ratio_{name}_75"),
                three_quarters.server_us[0] / three_quarters.server_us[1],
                "x",
                "stock/ours CPU per request at 75% of stock's maximum; target >= 1.25",
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
                half.p99_us[1] / half.p99_us[0],
                "x",
                "ours/stock p99 at 50%; target <= 1.0",
            );
        if options.matched_only {
            continue;
        }
        report
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
        .command(format!("target/release/memcached --cpus {SERVER_CPU} {}-p PORT -l 127.0.0.1 -t 1 -m 64 -c 1024", options.ours_args.iter().map(|arg| format!("{arg} ")).collect::<String>()))
        .command(format!("evicting sets: the same servers with -m {EVICT_MEMORY_MIB}, one blocking client"))
        .command(format!("ebb-loadgen (library): ETC, 1 thread on CPU {GENERATOR_CPU}, 4 connections, depth 4 closed / 64 open, {} s windows", plan.window.as_secs_f64()));
    let path = report.finish()?;
    if options.matched_only {
        println!("wrote {}", path.display());
        return Ok(());
    }
    let svg = output_dir().join("memcached.svg");
    plot(&[("text", &text), ("binary", &binary)], &svg)?;
    println!("wrote {} and {}", path.display(), svg.display());
    Ok(())
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-memcached",
    about = "./ebb bench memcached: ours against stock memcached on loopback"
)]
struct Args {
    /// One run of 1 s instead of three of 3 s.
    #[arg(long)]
    quick: bool,
    /// Only the eviction measurement (to `memcached-evict.json`).
    #[arg(long)]
    evict_only: bool,
    /// Only the matched loads (no eviction measurement, no sweeps), to
    /// `memcached-matched.json`: for comparing settings of our server.
    #[arg(long, conflicts_with = "evict_only")]
    matched_only: bool,
    /// One more argument for our server, e.g. `--ours-arg=--poll-max-us
    /// --ours-arg=0` (repeatable; recorded in the report's labels).
    #[arg(long = "ours-arg", value_name = "ARG", allow_hyphen_values = true)]
    ours_args: Vec<String>,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let plan = if args.quick {
        Plan {
            runs: 1,
            window: Duration::from_secs(1),
            warmup: Duration::from_millis(200),
        }
    } else {
        Plan {
            runs: 3,
            window: Duration::from_secs(3),
            warmup: Duration::from_millis(500),
        }
    };
    let options = Options {
        ours_args: args.ours_args,
        matched_only: args.matched_only,
    };
    match run(plan, args.evict_only, &options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("memcached bench: {error}");
            ExitCode::FAILURE
        }
    }
}
