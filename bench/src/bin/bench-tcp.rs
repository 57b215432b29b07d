//! `./ebb bench tcp`: Ebbflow's own TCP (`crates/ebb-netstack`).
//!
//! 1. **Simulated link** (no latency, no bandwidth limit, no faults; both
//!    stacks in this one thread, so one core does all the work of both
//!    ends): bulk transfer of 64 KiB application messages (256 MiB per
//!    run, every byte compared) and request–response with 64-byte
//!    messages over one connection (one in flight, 300 000 per run, every
//!    reply compared). Rates per CPU second of the thread (the headline:
//!    the machine is shared) and per wall second; medians of 5 runs after
//!    a warm-up run.
//! 2. **TAP in a network namespace** (root and `/dev/net/tun`; otherwise
//!    SKIPPED with the reason, and part 1 is still written): our memcached
//!    on the user-space stack (`--tap`, `crates/ebb-userstack`) at
//!    192.168.77.2 behind TAP device `ebbtap0`, against Debian's memcached
//!    on the kernel's TCP at the TAP's kernel side 192.168.77.1 in the same
//!    namespace (the kernel delivers to its own address over loopback),
//!    both `-t 1 -m 64 -c 1024` pinned to CPU 1, `ebb-loadgen` (ETC, text)
//!    in the namespace on CPU 0. Closed-loop maxima (c4 d4, 3 runs each;
//!    the best run is the maximum, since interference from other work on
//!    the machine only ever lowers it), then open loop (depth 64) at
//!    25/50/75 % of stock's maximum, alternating, 3 runs each: server CPU
//!    per request (`/proc/PID/task/*/schedstat`), generator CPU per
//!    request, p99, achieved rate, and the TCP segments the namespace's
//!    kernel retransmitted (a lost or late segment costs an RTO, ≥ 200 ms,
//!    which shows in p99 and throughput).
//!
//! Keys: `sim_throughput_gbps_64k`, `sim_rr_per_sec_64b` (and `_wall`
//! variants); `userstack_cpu_ratio` = stock server CPU per request / ours,
//! median over the three matched loads (> 1: ours uses less);
//! `userstack_cpu_ratio_with_client` the same for server + load generator
//! (the kernel does part of a server's receive work in the sender's
//! context, so this view is the fairer one). No targets yet.
//!
//! `--quick`: 3 simulated runs of a quarter the size, 1 TAP run of 1 s each.
//! `--sim-only`: part 1 only (part 2 is recorded as not run), for
//! comparing builds of the stack quickly or under a profiler.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ebb_bench::memcached::{
    build_ours, closed_loop_max, matched_loads, ClosedLoop, Launch, MatchedLoad, Plan, Server,
    Which, STOCK,
};
use ebb_bench::report::{median, Report};
use ebb_bench::tcp_sim::{self, Timed};
use ebb_loadgen::ProtocolKind;
use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{require, Need};

const SERVER_CPU: usize = 1;
const GENERATOR_CPU: usize = 0;
const MESSAGE: usize = 64 << 10;
const RR_SIZE: usize = 64;
/// Our stack's Ethernet address (the TAP's permanent neighbour entry).
const OURS_MAC: &str = "02:eb:00:00:00:02";
const LOADS: [u32; 3] = [25, 50, 75];

struct Settings {
    sim_only: bool,
    sim_runs: usize,
    bulk_messages: u64,
    rr_transactions: u64,
    tap: Plan,
}

/// Medians of `runs` timed runs of `work` (after one untimed warm-up):
/// (per CPU second, per wall second), times `scale`, printed with
/// `decimals`.
fn timed_medians(
    what: &str,
    runs: usize,
    (scale, decimals): (f64, usize),
    unit: &str,
    mut work: impl FnMut() -> Result<Timed, String>,
) -> Result<(f64, f64), String> {
    work()?;
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for run in 1..=runs {
        let timed = work()?;
        let (c, w) = (
            timed.per_cpu_second() * scale,
            timed.per_wall_second() * scale,
        );
        println!(
            "  {what} run {run}/{runs}: {c:.decimals$} {unit} per CPU second, {w:.decimals$} per wall second ({:.0} ms CPU, {} segments, {:.0} ns CPU each)",
            timed.cpu.as_secs_f64() * 1e3,
            timed.frames,
            timed.cpu.as_secs_f64() * 1e9 / timed.frames.max(1) as f64
        );
        cpu.push(c);
        wall.push(w);
    }
    Ok((median(&mut cpu), median(&mut wall)))
}

fn simulated(report: &mut Report, settings: &Settings) -> Result<(), String> {
    println!("tcp/sim: bulk transfer of 64 KiB messages between two stacks, one thread...");
    let (gbps, gbps_wall) = timed_medians("bulk", settings.sim_runs, (8e-9, 2), "Gbit/s", || {
        tcp_sim::bulk(MESSAGE, settings.bulk_messages)
    })?;
    println!("tcp/sim: request-response with 64-byte messages, one connection...");
    let (rr, rr_wall) = timed_medians("rr", settings.sim_runs, (1.0, 0), "transactions", || {
        tcp_sim::request_response(RR_SIZE, settings.rr_transactions)
    })?;
    let runs = settings.sim_runs;
    let bulk_note = format!(
        "simulated link, both ends on one core, {} MiB per run, per CPU second; median of {runs}",
        (settings.bulk_messages * MESSAGE as u64) >> 20
    );
    let rr_note = format!(
        "simulated link, one in flight, {} per run, per CPU second; median of {runs}",
        settings.rr_transactions
    );
    report
        .metric("sim_throughput_gbps_64k", gbps, "Gbit/s", bulk_note)
        .metric(
            "sim_throughput_gbps_64k_wall",
            gbps_wall,
            "Gbit/s",
            format!("per wall second; median of {runs} (machine shared)"),
        )
        .metric("sim_rr_per_sec_64b", rr, "1/s", rr_note)
        .metric(
            "sim_rr_per_sec_64b_wall",
            rr_wall,
            "1/s",
            format!("per wall second; median of {runs} (machine shared)"),
        )
        .metric(
            "sim_rr_us_per_transaction_64b",
            1e6 / rr,
            "us",
            "CPU for both ends' stacks per transaction",
        );
    Ok(())
}

/// Why part 2 cannot run here, if it cannot.
fn tap_unusable() -> Option<String> {
    if let Err(why) = require(&[Need::Root, Need::Tun, Need::Ip, Need::Memcached]) {
        return Some(why.reason);
    }
    if !Path::new(STOCK).exists() {
        return Some(format!(
            "{STOCK} is missing (./ebb bench tcp installs Debian's memcached)"
        ));
    }
    None
}

/// What part 2 measured.
struct TapResult {
    maxima: [ClosedLoop; 2],
    loads: Vec<MatchedLoad>,
    commands: Vec<String>,
}

fn tap(plan: &Plan) -> Result<TapResult, String> {
    println!("tcp/tap: building our memcached...");
    build_ours()?;
    let namespace = NetNamespace::for_this_process("benchtcp")?;
    let config = TapConfig::guest_link(OURS_MAC);
    let device = TapDevice::create(&namespace, &config)?;
    println!(
        "tcp/tap: namespace {}, TAP {} (kernel {}, our stack {})",
        namespace.name(),
        device.ifname(),
        device.host(),
        config
            .guest
            .as_ref()
            .map_or_else(String::new, |(addr, _)| addr.to_string())
    );
    let stock_launch = Launch::on_tap(Which::Stock, SERVER_CPU, &namespace, &config);
    let ours_launch = Launch::on_tap(Which::Ours, SERVER_CPU, &namespace, &config);
    let commands = vec![
        ebb_cli::child::describe(&stock_launch.command()),
        ebb_cli::child::describe(&ours_launch.command()),
    ];
    let stock = Server::start(&stock_launch)?;
    let ours = Server::start(&ours_launch)?;
    let protocol = ProtocolKind::Text;
    stock.preload(protocol, GENERATOR_CPU)?;
    ours.preload(protocol, GENERATOR_CPU)?;

    let mut maxima = Vec::new();
    for server in [&stock, &ours] {
        println!(
            "tcp/tap: {} maximum (closed loop, c4 d4, ETC text)...",
            server.which().name()
        );
        let max = closed_loop_max(server, protocol, plan, GENERATOR_CPU)?;
        println!(
            "  {} maximum {:.0} ops/s (best run; median {:.0}), p99 {:.0} us",
            server.which().name(),
            max.best_qps,
            max.median_qps,
            max.best_p99_us
        );
        maxima.push(max);
    }
    println!("tcp/tap: open loop at 25/50/75 % of stock's maximum, alternating...");
    let loads = matched_loads(
        [&stock, &ours],
        maxima[0].best_qps,
        &LOADS,
        protocol,
        plan,
        GENERATOR_CPU,
    )?;
    let maxima = [maxima[0], maxima[1]];
    Ok(TapResult {
        maxima,
        loads,
        commands,
    })
}

fn record_tap(report: &mut Report, result: &TapResult, plan: &Plan) {
    let runs = plan.runs;
    let mut ratios = Vec::new();
    let mut with_client = Vec::new();
    for (index, which) in ["stock", "ours"].into_iter().enumerate() {
        let max = &result.maxima[index];
        report
            .metric(
                format!("tap_{which}_max_qps"),
                max.best_qps,
                "ops/s",
                format!(
                    "closed loop c4 d4, ETC text; best of {runs} (interference only lowers it)"
                ),
            )
            .metric(
                format!("tap_{which}_max_p99_us"),
                max.best_p99_us,
                "us",
                "p99 of that run",
            )
            .metric(
                format!("tap_{which}_max_qps_median"),
                max.median_qps,
                "ops/s",
                format!("median of the {runs} closed-loop runs"),
            )
            .metric(
                format!("tap_{which}_max_kernel_retransmits"),
                max.kernel_retransmits.map_or(f64::NAN, |n| n as f64),
                "segments",
                format!("the namespace's kernel TCP, all {runs} closed-loop runs together"),
            );
    }
    for load in &result.loads {
        let pct = load.percent;
        for (index, which) in ["stock", "ours"].into_iter().enumerate() {
            report
                .metric(
                    format!("tap_{which}_cpu_us_per_req_{pct}"),
                    load.server_us[index],
                    "us",
                    format!("server CPU per request at {:.0} ops/s offered", load.rate),
                )
                .metric(
                    format!("tap_{which}_client_cpu_us_per_req_{pct}"),
                    load.generator_us[index],
                    "us",
                    "load generator CPU per request",
                )
                .metric(
                    format!("tap_{which}_p99_us_{pct}"),
                    load.p99_us[index],
                    "us",
                    "open loop, depth 64",
                )
                .metric(
                    format!("tap_{which}_achieved_qps_{pct}"),
                    load.achieved[index],
                    "ops/s",
                    "",
                )
                .metric(
                    format!("tap_{which}_kernel_retransmits_{pct}"),
                    load.kernel_retransmits[index].map_or(f64::NAN, |n| n as f64),
                    "segments",
                    format!("the namespace's kernel TCP, all {runs} runs together"),
                );
        }
        ratios.push(load.server_us[0] / load.server_us[1]);
        with_client.push(
            (load.server_us[0] + load.generator_us[0]) / (load.server_us[1] + load.generator_us[1]),
        );
    }
    report
        .metric(
            "userstack_cpu_ratio",
            median(&mut ratios),
            "x",
            format!("stock/ours server CPU per request, median over 25/50/75 % of stock's max (each a median of {runs}); no target yet"),
        )
        .metric(
            "userstack_cpu_ratio_with_client",
            median(&mut with_client),
            "x",
            "the same for server + load generator CPU",
        );
    for command in &result.commands {
        report.command(command.clone());
    }
    report.command(format!(
        "ebb-loadgen (library) in the namespace: ETC text, 1 thread on CPU {GENERATOR_CPU}, 4 connections, depth 4 closed / 64 open, {} s windows",
        plan.window.as_secs_f64()
    ));
}

fn run(settings: &Settings) -> Result<bool, String> {
    let started = Instant::now();
    let mut report = Report::new("tcp");
    let args: Vec<String> = std::env::args().skip(1).collect();
    report.command(if args.is_empty() {
        "./ebb bench tcp".to_owned()
    } else {
        format!("./ebb bench tcp -- {}", args.join(" "))
    });
    simulated(&mut report, settings)?;
    let mut tap_ok = true;
    let skipped = |report: &mut Report, why: &str| {
        report.metric("userstack_cpu_ratio", f64::NAN, "x", why.to_owned());
    };
    let unusable = if settings.sim_only {
        Some("not run (--sim-only)".to_owned())
    } else {
        tap_unusable()
    };
    match unusable {
        Some(reason) => {
            println!("tcp/tap: SKIPPED: {reason}");
            skipped(&mut report, &format!("SKIPPED: {reason}"));
        }
        None => match tap(&settings.tap) {
            Ok(result) => record_tap(&mut report, &result, &settings.tap),
            Err(error) => {
                eprintln!("tcp/tap: FAILED: {error}");
                skipped(&mut report, &format!("FAILED: {error}"));
                tap_ok = false;
            }
        },
    }
    let path = report.finish()?;
    println!(
        "wrote {} in {:.0} s",
        path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(tap_ok)
}

/// The command line (`./ebb bench tcp [-- --quick --sim-only]`).
#[derive(clap::Parser)]
#[command(
    name = "bench-tcp",
    about = "./ebb bench tcp: our TCP on the simulated link and on TAP against Linux's"
)]
struct Args {
    /// 3 simulated runs of a quarter the size, 1 TAP run of 1 s each.
    #[arg(long)]
    quick: bool,
    /// Only the simulated link (part 2, TAP, is skipped).
    #[arg(long)]
    sim_only: bool,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let settings = if args.quick {
        Settings {
            sim_only: args.sim_only,
            sim_runs: 3,
            bulk_messages: 1024,
            rr_transactions: 75_000,
            tap: Plan {
                runs: 1,
                window: Duration::from_secs(1),
                warmup: Duration::from_millis(200),
            },
        }
    } else {
        Settings {
            sim_only: args.sim_only,
            sim_runs: 5,
            bulk_messages: 4096,
            rr_transactions: 300_000,
            tap: Plan {
                runs: 3,
                window: Duration::from_secs(3),
                warmup: Duration::from_millis(500),
            },
        }
    };
    match run(&settings) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("tcp bench: {error}");
            ExitCode::FAILURE
        }
    }
}
