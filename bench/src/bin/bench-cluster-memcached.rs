//! `./ebb bench cluster-memcached`: memcached as one cache across 3 native
//! Ebbflow nodes against what users run today, 3 Linux guests running
//! stock memcached with the client hashing keys across them
//! (libmemcached's ketama). Issue 17, "Benchmarks".
//!
//! The Linux cluster: the project's comparison Linux guest (q35, one vCPU,
//! 512 MiB, `virtio-net-pci,disable-legacy=on`, TCG; Debian's memcached
//! `-t 1 -m 64 -c 1024`), three of them as nodes 1–3 of a cluster network
//! (`ebb_testbed::cluster_net`: one namespace, a bridge, a TAP device per
//! node, node k at 10.96.0.(k+1)), the QEMUs at nice -10 and not
//! pinned (the kernel spreads them over both host cores), the load
//! generator pinned to CPU 0 inside the namespace.
//!
//! The client: ebb-loadgen, ETC keys and values over 10,000 keys, memcached
//! text (a cluster of Ebbflow nodes forwards the text protocol), open loop
//! (Poisson, latency from the scheduled send), as one run per target at
//! once (`ebb_bench::cluster_memcached`): for the Linux cluster each server
//! gets the keys ketama gives it; an Ebbflow cluster is asked through every
//! node for every key. Every key is set once first. Per run, a bounded
//! search (`Search`: ×1.5 from 100 ops/s, at most 14 steps, a step past
//! the SLA measured once more before the ramp ends there, then 3
//! bisections) finds `aggregate_at_sla`, the highest achieved throughput
//! with p99 ≤ 5 ms, errors none and achieved ≥ 95 % of offered.
//!
//! Keys (medians of runs): `aggregate_at_sla_linux_cluster`,
//! `aggregate_at_sla` (Ebbflow, 3 nodes), `ratio_vs_linux_cluster` (target
//! ≥ 2), `remote_hop_ratio` (remote p50 / local p50 at the highest load
//! within the SLA, target ≤ 2), `scaling` (3 nodes / 1 node,
//! informational), and per-run figures; a latency–throughput plot in
//! `target/bench/cluster-memcached.svg`.
//!
//! The Ebbflow side: memcached as one cache on 3 native nodes, then on
//! 1 (for `scaling`), booted by the frontend runtime as `./ebb cluster up
//! memcached --nodes N` boots them (`ebb_bench::native_memcached_cluster`:
//! one vCPU and 512 MiB per node, `-m 64 -c 1024`, a private etcd, the
//! QEMUs not pinned, as the Linux guests), every node asked for every key,
//! each node's gets split by the nodes' shard map into its own keys
//! (local) and forwarded ones (remote). The clusters run one after the
//! other in one invocation (2 host cores: one cluster at a time), each
//! preloaded and searched `runs` times. `--linux-only` measures the Linux
//! cluster alone.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ebb_bench::cluster::stop_on_signals;
use ebb_bench::cluster_memcached::{
    drive, ketama_targets, window_for, Found, Point, Search, Target, SLA_P99_US,
};
use ebb_bench::native_memcached_cluster::{NativeCluster, NodeSettings};
use ebb_bench::plot::{write_p99_svg, Curve, Panel};
use ebb_bench::report::{exit_code, median, output_dir};
use ebb_bench::vm::{load_average, report_with_load, CLIENT_CPU, NICE};
use ebb_loadgen::workload::KeySpace;
use ebb_loadgen::{Config, ProtocolKind, SizeDist, Summary};
use ebb_testbed::cluster_net::{AddressPlan, ClusterNetwork};
use ebb_testbed::linux_guest::{
    self, default_cache_dir, GuestService, GuestSettings, MemcachedSettings, ReadyGuest,
    MEMCACHED_PORT,
};
use ebb_testbed::Need;

/// Nodes of each cluster.
const NODES: u32 = 3;
/// The key space (ETC key sizes).
const KEYS: u64 = 10_000;
/// `-m` and `-c` of every memcached (memcached's defaults).
const MEMORY_MB: u32 = 64;
const CONNECTIONS: u32 = 1024;
/// The search over offered loads: at most 14 + 3 measurements per run.
const SEARCH: Search = Search {
    start: 100.0,
    factor: 1.5,
    max_steps: 14,
    refine: 3,
    confirm: 1,
};
/// Past this, no new run of a cluster starts (each cluster has its own:
/// three clusters are measured one after the other).
const BUDGET: Duration = Duration::from_secs(12 * 60);

/// Each native node's VM memory: the Linux guests' 512 MiB, the same
/// virtual hardware on both sides.
const NATIVE_VM_MEMORY: &str = "512M";

struct Plan {
    runs: usize,
    window: Duration,
    warmup: Duration,
    linux_only: bool,
}

fn client_config(plan: &Plan) -> Config {
    let mut cfg = Config::new(String::new()).etc();
    cfg.protocol = ProtocolKind::Text;
    cfg.keys = KEYS;
    cfg.cpus = vec![CLIENT_CPU];
    cfg.threads = 1;
    cfg.connections = 2;
    cfg.depth = 64;
    cfg.duration = plan.window;
    cfg.warmup = plan.warmup;
    cfg.drain = Duration::from_millis(500);
    // Three TCG guests share one host core: a handshake can take seconds
    // while the machine is loaded.
    cfg.connect_timeout = Duration::from_secs(15);
    cfg
}

/// A booted cluster of stock memcached guests and the client's targets.
struct LinuxCluster {
    /// Declared first so that they are dropped (QEMU stopped) before the
    /// network they are on.
    guests: Vec<ReadyGuest>,
    network: ClusterNetwork,
    targets: Vec<Target>,
}

impl LinuxCluster {
    fn boot(keys: &KeySpace) -> Result<LinuxCluster, String> {
        let built = linux_guest::build_or_reuse(&default_cache_dir(), false)?;
        let network = ClusterNetwork::create("cmbench", AddressPlan::default_plan())?;
        let settings = GuestSettings {
            service: GuestService::Memcached(MemcachedSettings {
                memory_mb: MEMORY_MB,
                connections: CONNECTIONS,
            }),
            // Not pinned: three TCG guests on one host core left each a
            // third of it (p50 2.9 ms at 280 ops/s in a trial); the kernel
            // spreads them over both cores, as `./ebb cluster up` leaves
            // native nodes. The client alone is pinned, to CPU 0.
            pin_cpus: None,
            priority: vec!["nice".into(), "-n".into(), NICE.to_string()],
            ready_limit: Duration::from_secs(120),
            timeout_secs: 1200,
            ..GuestSettings::default()
        };
        let mut guests = Vec::new();
        let mut servers = Vec::new();
        for node in 1..=NODES {
            let link = network.add_node(node)?;
            let began = Instant::now();
            let guest =
                linux_guest::boot_on_link(&built.image, &settings, network.namespace(), &link)?;
            println!(
                "  linux node {node} at {}: memcached ready after {:.1} s",
                link.address,
                began.elapsed().as_secs_f64()
            );
            servers.push(SocketAddr::from((link.address, MEMCACHED_PORT)));
            guests.push(guest);
        }
        let targets = ketama_targets(&servers, keys)?;
        for target in &targets {
            println!(
                "  ketama: {} holds {} keys ({:.1} % of requests)",
                target.server,
                target.keys.len(),
                100.0 * target.share
            );
        }
        Ok(LinuxCluster {
            guests,
            network,
            targets,
        })
    }

    fn serial_tails(&self) -> String {
        self.guests
            .iter()
            .enumerate()
            .map(|(i, g)| format!("--- node {} serial ---\n{}", i + 1, g.qemu.serial_tail(10)))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Drives every target at `rate` (or preloads their keys) from inside
    /// the cluster's namespace (threads started there inherit it).
    fn drive(&self, cfg: &Config, rate: f64, preload: bool) -> Result<Vec<Summary>, String> {
        let targets = &self.targets;
        self.network
            .namespace()
            .run_inside(move || drive(targets, cfg, rate, preload))?
    }

    fn measure(&self, cfg: &Config, rate: f64) -> Result<Point, String> {
        let mut cfg = cfg.clone();
        cfg.duration = window_for(cfg.duration, rate);
        let summaries = self.drive(&cfg, rate, false)?;
        let point = Point::merge(&self.targets, &summaries);
        say("linux cluster", &point);
        Ok(point)
    }
}

/// What one cluster's runs found.
struct Side {
    label: &'static str,
    found: Vec<Found>,
}

impl Side {
    fn median_sla(&self) -> f64 {
        let mut values: Vec<f64> = self.found.iter().map(|f| f.sla_qps).collect();
        median(&mut values)
    }

    /// The run whose throughput at the SLA is the median.
    fn middle(&self) -> &Found {
        let mut order: Vec<usize> = (0..self.found.len()).collect();
        order.sort_by(|&a, &b| self.found[a].sla_qps.total_cmp(&self.found[b].sla_qps));
        &self.found[order[order.len() / 2]]
    }
}

/// `plan.runs` searches of one cluster (fewer if the cluster's time
/// budget is spent), `measure` measuring one offered load.
fn search_runs(
    plan: &Plan,
    label: &'static str,
    stopped: &dyn Fn() -> Result<(), String>,
    mut measure: impl FnMut(f64) -> Result<Point, String>,
) -> Result<Side, String> {
    let started = Instant::now();
    let mut found = Vec::new();
    for run in 0..plan.runs {
        stopped()?;
        if started.elapsed() > BUDGET {
            println!("cluster-memcached: time budget spent after {run} runs of {label}");
            break;
        }
        println!("  run {}/{}: {label}", run + 1, plan.runs);
        let result = SEARCH.run(SLA_P99_US, |rate| {
            stopped()?;
            measure(rate)
        })?;
        println!(
            "  run {}/{}: {label}: {:.0} ops/s within p99 <= {SLA_P99_US} us{}",
            run + 1,
            plan.runs,
            result.sla_qps,
            if result.capped {
                " (never left the SLA: a lower bound)"
            } else {
                ""
            }
        );
        found.push(result);
    }
    if found.is_empty() {
        return Err(format!("no run of {label} completed"));
    }
    Ok(Side { label, found })
}

/// Prints one measured point of `label`.
fn say(label: &str, point: &Point) {
    let split = match (point.local, point.remote) {
        (Some(local), Some(remote)) => {
            format!("  local p50 {:.0} / remote p50 {:.0} us", local.0, remote.0)
        }
        _ => String::new(),
    };
    println!(
        "    {label}: offered {:7.0} achieved {:7.0} ops/s, p50 {:6.0} p99 {:8.0} us{split}{}",
        point.offered,
        point.achieved,
        point.p50_us,
        point.p99_us,
        if point.within(SLA_P99_US) {
            ""
        } else {
            "  (past the SLA)"
        }
    );
}

/// The Ebbflow cluster of `nodes` native nodes: booted, preloaded,
/// searched, stopped.
fn ebbflow_side(
    plan: &Plan,
    nodes: u32,
    label: &'static str,
    keys: &KeySpace,
    cfg: &Config,
    stopped: &dyn Fn() -> Result<(), String>,
) -> Result<(Side, String), String> {
    let image =
        ebb_testbed::native_image::build(&ebb_bench::report::workspace_root(), "memcached")?;
    println!("cluster-memcached: booting {nodes} native memcached node(s) (TCG)...");
    let log_dir = std::env::temp_dir().join(format!(
        "ebb-bench-cluster-memcached-{}",
        std::process::id()
    ));
    let settings = NodeSettings {
        memory_mb: MEMORY_MB,
        connections: CONNECTIONS,
        vm_memory: NATIVE_VM_MEMORY.to_owned(),
    };
    let began = Instant::now();
    let cluster = NativeCluster::boot(&image, nodes, &settings, keys, &log_dir)?;
    println!(
        "  {nodes} native node(s) serving one cache after {:.1} s (shard map epoch {})",
        began.elapsed().as_secs_f64(),
        cluster.map.epoch()
    );
    cluster.drive(cfg, 1.0, true)?;
    let side = search_runs(plan, label, stopped, |rate| {
        let mut cfg = cfg.clone();
        cfg.duration = window_for(cfg.duration, rate);
        let summaries = cluster.drive(&cfg, rate, false)?;
        let point = Point::merge(&cluster.targets, &summaries);
        say(label, &point);
        Ok(point)
    });
    let command = cluster.command.clone();
    let stopped_cleanly = cluster.stop();
    let side = side?;
    stopped_cleanly?;
    let _ = std::fs::remove_dir_all(&log_dir);
    Ok((side, command))
}

fn run(plan: &Plan) -> Result<(), String> {
    let mut needs = vec![Need::Root, Need::Tun, Need::Ip, Need::Qemu];
    if !plan.linux_only {
        needs.push(Need::Etcd);
    }
    ebb_testbed::require(&needs)
        .map_err(|why| format!("needs root, QEMU and etcd for the clusters ({why})"))?;
    let stopped = stop_on_signals();
    let started = Instant::now();
    let load_start = load_average();
    let keys = KeySpace::new(KEYS, SizeDist::Etc)?;
    let cfg = client_config(plan);

    println!("cluster-memcached: booting {NODES} Linux guests with stock memcached (TCG)...");
    let (linux, linux_command, namespace) = {
        let cluster = LinuxCluster::boot(&keys)?;
        let with_serial = |e: String| format!("{e}\n{}", cluster.serial_tails());
        cluster.drive(&cfg, 1.0, true).map_err(with_serial)?;
        let side = search_runs(plan, "linux cluster", &stopped, |rate| {
            cluster.measure(&cfg, rate)
        })
        .map_err(with_serial)?;
        (
            side,
            cluster.guests[0].command.clone(),
            cluster.network.namespace().name().to_owned(),
        )
    };

    let ebbflow = if plan.linux_only {
        None
    } else {
        let (three, command) = ebbflow_side(plan, NODES, "ebbflow 3 nodes", &keys, &cfg, &stopped)?;
        let (one, _) = ebbflow_side(plan, 1, "ebbflow 1 node", &keys, &cfg, &stopped)?;
        Some((three, one, command))
    };

    let mut report = report_with_load("cluster-memcached", "tcg", load_start);
    report.metric("sla_p99_us", SLA_P99_US, "us", "TCG").metric(
        "nodes",
        f64::from(NODES),
        "",
        "per cluster",
    );
    let mut sides = vec![&linux];
    for (r, result) in linux.found.iter().enumerate() {
        report.metric(
            format!("aggregate_at_sla_linux_cluster_run{}", r + 1),
            result.sla_qps,
            "ops/s",
            "highest achieved with p99 within the SLA",
        );
    }
    report.metric(
        "aggregate_at_sla_linux_cluster",
        linux.median_sla(),
        "ops/s",
        "3 Linux guests, stock memcached, client-side ketama; median of runs",
    );
    match &ebbflow {
        None => {
            report.label("ebbflow_side", "not measured (--linux-only)");
        }
        Some((three, one, command)) => {
            sides.push(three);
            sides.push(one);
            for (r, result) in three.found.iter().enumerate() {
                report.metric(
                    format!("aggregate_at_sla_run{}", r + 1),
                    result.sla_qps,
                    "ops/s",
                    "Ebbflow 3 native nodes, highest achieved with p99 within the SLA",
                );
            }
            let aggregate = three.median_sla();
            report
                .metric(
                    "aggregate_at_sla",
                    aggregate,
                    "ops/s",
                    "3 native Ebbflow nodes, one cache, every node asked for every key; median of runs",
                )
                .metric(
                    "aggregate_at_sla_1_node",
                    one.median_sla(),
                    "ops/s",
                    "1 native Ebbflow node; median of runs",
                )
                .metric(
                    "ratio_vs_linux_cluster",
                    aggregate / linux.median_sla().max(f64::MIN_POSITIVE),
                    "x",
                    "target >= 2.0",
                )
                .metric(
                    "scaling",
                    aggregate / one.median_sla().max(f64::MIN_POSITIVE),
                    "x",
                    "3 nodes / 1 node; informational (2 host cores)",
                );
            // The local/remote split at the highest load within the SLA
            // of each run, medians.
            let mut local_p50 = Vec::new();
            let mut remote_p50 = Vec::new();
            let mut local_p99 = Vec::new();
            let mut remote_p99 = Vec::new();
            for found in &three.found {
                if let Some(Point {
                    local: Some(local),
                    remote: Some(remote),
                    ..
                }) = found.best_within(SLA_P99_US)
                {
                    local_p50.push(local.0);
                    local_p99.push(local.1);
                    remote_p50.push(remote.0);
                    remote_p99.push(remote.1);
                }
            }
            if local_p50.is_empty() {
                report.label("remote_hop", "no run had a point within the SLA");
            } else {
                let local = median(&mut local_p50);
                let remote = median(&mut remote_p50);
                report
                    .metric(
                        "local_get_p50_us",
                        local,
                        "us",
                        "keys owned by the node asked",
                    )
                    .metric("local_get_p99_us", median(&mut local_p99), "us", "")
                    .metric(
                        "remote_get_p50_us",
                        remote,
                        "us",
                        "keys forwarded to their owner",
                    )
                    .metric("remote_get_p99_us", median(&mut remote_p99), "us", "")
                    .metric(
                        "remote_hop_ratio",
                        remote / local.max(f64::MIN_POSITIVE),
                        "x",
                        "remote p50 / local p50 at the highest load within the SLA; target <= 2.0",
                    );
            }
            report.command(command.clone());
        }
    }
    report
        .metric(
            "runs",
            linux.found.len() as f64,
            "",
            "per cluster",
        )
        .metric(
            "elapsed_s",
            started.elapsed().as_secs_f64(),
            "s",
            "the whole benchmark",
        )
        .command(if plan.linux_only {
            "./ebb bench cluster-memcached -- --linux-only"
        } else {
            "./ebb bench cluster-memcached"
        })
        .command(linux_command)
        .command(format!(
            "ebb-loadgen (library) in the cluster's namespace ({namespace} for the Linux cluster): ETC over {KEYS} keys, text; Linux: one run per server (ketama's keys, its share of the rate); Ebbflow: per node one run of its own keys and one of the others' (every node asked for every key, 1/N of the rate each); 1 thread on CPU {CLIENT_CPU}, 2 connections, open loop, depth <= 64, windows of {} s (longer at low rates, for 1000 requests, up to 4x) after {} s warm-up; QEMUs not pinned",
            plan.window.as_secs_f64(),
            plan.warmup.as_secs_f64()
        ));
    report.finish()?;
    // The plot: each cluster's run with the median throughput, by
    // offered load.
    let colors = ["#d62728", "#1f77b4", "#2ca02c"];
    let curves = sides
        .iter()
        .zip(colors)
        .map(|(side, color)| {
            let mut points: Vec<&Point> = side.middle().points.iter().collect();
            points.sort_by(|a, b| a.offered.total_cmp(&b.offered));
            Curve {
                label: side.label.to_owned(),
                color: color.to_owned(),
                points: points.iter().map(|p| (p.achieved, p.p99_us)).collect(),
            }
        })
        .collect();
    let panels = [Panel {
        title: "ETC text: 3 Linux guests (client ketama) vs Ebbflow native nodes (one cache)"
            .to_owned(),
        curves,
    }];
    let svg = output_dir().join("cluster-memcached.svg");
    write_p99_svg(&panels, SLA_P99_US, &svg)?;
    println!("  wrote {}", svg.display());
    Ok(())
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-cluster-memcached",
    about = "./ebb bench cluster-memcached: memcached as one cache on 3 native nodes against 3 Linux guests with client-side ketama"
)]
struct Args {
    /// One short run (1 s windows).
    #[arg(long)]
    quick: bool,
    /// Runs per cluster (default 3, 1 with --quick).
    #[arg(long, value_name = "N")]
    runs: Option<std::num::NonZeroUsize>,
    /// Measure the Linux cluster baseline alone.
    #[arg(long)]
    linux_only: bool,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let mut plan = if args.quick {
        Plan {
            runs: 1,
            window: Duration::from_secs(1),
            warmup: Duration::from_millis(300),
            linux_only: args.linux_only,
        }
    } else {
        Plan {
            runs: 3,
            window: Duration::from_secs(2),
            warmup: Duration::from_millis(500),
            linux_only: args.linux_only,
        }
    };
    if let Some(runs) = args.runs {
        plan.runs = runs.get();
    }
    exit_code("cluster-memcached", run(&plan))
}
