//! `./ebb bench insns`: guest instructions per request, the one figure
//! TCG cannot inflate (issue 20), for Ebbflow's native memcached and for
//! stock memcached in the Linux comparison guest, over the same requests.
//!
//! Both guests run as in `./ebb bench memcached-vm` (q35, one vCPU,
//! 512 MiB, virtio-net on one TAP device in a namespace, QEMU on CPU 1,
//! the load generator on CPU 0, both `-m 64 -c 1024`, stock `-t 1`), with
//! QEMU loading the `insn_count` TCG plugin (`ebb-cbuild qemu-plugin`):
//! it counts every instruction the vCPU executes, by address range, and
//! the benchmark reads the counts before and after each run of requests.
//! Natively the ranges are the image's functions by layer
//! (`ebb_bench::insns`: driver, IP/TCP, memcached, event loop, memory,
//! IOBufs, runtime, libraries); in the Linux guest, kernel and user space.
//!
//! Requests: `ebb-loadgen`'s Facebook ETC mix (1 set per 30 gets, ETC key
//! and value sizes), after a preload so gets hit, text and binary, at two
//! loads: one request at a time (1 connection, depth 1: every request
//! pays an interrupt, a wake-up and a halt) and loaded (4 connections,
//! 16 requests in flight each, closed loop). Instructions per request =
//! the count's growth over the run / the replies (warm-up and drain
//! included in both). The guests alternate, 3 runs each; medians.
//!
//! Keys: `insns_per_req_ours`, `insns_per_req_linux` (text, loaded;
//! target ours ≤ 4,000), `insns_ratio` = Linux / ours (target ≥ 3.4),
//! every protocol and load as `insns_per_req_{ours,linux}_{text,binary}_
//! {one,loaded}`, and per layer `insns_per_req_ours_LAYER` and
//! `insns_per_req_linux_{kernel,user}` (text, loaded), each with `_other`
//! (addresses in no range: assembly stubs without a size). Each layer's
//! figure is its own median of runs, so the layers need not add up to
//! the total's median exactly. A function's inlined callees count in it.
//! Always TCG: a plugin sees nothing under KVM. EbbRT reports 5,557 for
//! its memcached against 13,604 for Linux.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ebb_bench::insns::{difference, image_ranges, read_counts, LINUX_RANGES};
use ebb_bench::report::{exit_code, median, workspace_root};
use ebb_bench::vm::{self, Booted, Guest, GuestShape, VmBench, CLIENT_CPU};
use ebb_loadgen::{Config, ProtocolKind};
use ebb_testbed::linux_guest::{
    self, default_cache_dir, GuestService, GuestSettings, MemcachedSettings, MEMCACHED_PORT,
};
use ebb_testbed::qemu::qmp::SocketDir;

const PROTOCOLS: [ProtocolKind; 2] = [ProtocolKind::Text, ProtocolKind::Binary];
/// The loads: name, connections, requests in flight per connection.
const LOADS: [(&str, usize, usize); 2] = [("one", 1, 1), ("loaded", 4, 16)];
const MEMORY_MB: u32 = 64;
const CONNECTIONS: u32 = 1024;

struct Plan {
    runs: usize,
    window: Duration,
    /// A layer of ours counted by function.
    functions_of: Option<String>,
}

/// One guest's counts per (protocol, load): instructions per request by
/// name (`total`, then the ranges' names, then `other`).
type Measured = Vec<((ProtocolKind, &'static str), Vec<(String, f64)>)>;

fn config(server: SocketAddr, protocol: ProtocolKind, plan: &Plan) -> Config {
    let mut cfg = Config::new(server.to_string()).etc();
    cfg.protocol = protocol;
    cfg.cpus = vec![CLIENT_CPU];
    cfg.threads = 1;
    cfg.duration = plan.window;
    cfg.warmup = Duration::ZERO;
    cfg.drain = Duration::from_millis(500);
    cfg
}

/// Every (protocol, load) run on the booted guest behind `server`, the
/// plugin's counts read around each.
fn measure(
    bench: &VmBench<'_>,
    server: SocketAddr,
    socket: &Path,
    guest: Guest,
    plan: &Plan,
) -> Result<Measured, String> {
    let mut preload = config(server, ProtocolKind::Text, plan);
    preload.preload = true;
    preload.duration = Duration::from_millis(200);
    preload.connections = 1;
    bench.client(|| ebb_loadgen::run(&preload).map_err(|e| e.to_string()))??;
    let mut measured = Vec::new();
    for protocol in PROTOCOLS {
        for (load, connections, depth) in LOADS {
            let mut cfg = config(server, protocol, plan);
            cfg.connections = connections;
            cfg.depth = depth;
            let before = read_counts(socket)?;
            let summary = bench.client(|| ebb_loadgen::run(&cfg).map_err(|e| e.to_string()))??;
            let after = read_counts(socket)?;
            let grown = difference(&before, &after)
                .first()
                .map_or(0, |(_, count)| *count);
            if summary.errors_total > 0
                || summary.replies_total == 0
                || summary.unanswered_after_drain > 0
                || grown == 0
            {
                return Err(format!(
                    "{} {} {load}: {} replies, {} errors, {} unanswered, {grown} instructions counted",
                    guest.name(),
                    protocol.name(),
                    summary.replies_total,
                    summary.errors_total,
                    summary.unanswered_after_drain
                ));
            }
            let replies = summary.replies_total as f64;
            let per_request: Vec<(String, f64)> = difference(&before, &after)
                .into_iter()
                .map(|(name, count)| (name, count as f64 / replies))
                .collect();
            println!(
                "    {:5} {:6} {load:6}: {:8.0} instructions per request ({} replies, {:.0}/s){}",
                guest.name(),
                protocol.name(),
                per_request[0].1,
                summary.replies_total,
                summary.achieved_qps,
                per_request[1..]
                    .iter()
                    .filter(|(_, n)| *n >= 1.0)
                    .map(|(name, n)| format!(" {name} {n:.0}"))
                    .collect::<String>()
            );
            measured.push(((protocol, load), per_request));
        }
    }
    Ok(measured)
}

/// The plugin's QEMU arguments: its socket, and the ranges file.
fn plugin_args(plugin: &Path, socket: &Path, ranges: &Path) -> Vec<String> {
    vec![
        "-plugin".to_owned(),
        format!(
            "{},sock={},ranges={}",
            plugin.display(),
            socket.display(),
            ranges.display()
        ),
    ]
}

fn run(plan: &Plan) -> Result<(), String> {
    let started = Instant::now();
    let load_start = vm::load_average();
    let root = workspace_root();
    println!("insns: building the plugin, native memcached and the Linux guest...");
    let target = root.join("target");
    let plugin = ebb_cbuild::qemu_plugin::prepare(&target.join("debian-src"), &target)
        .map_err(|e| format!("building the QEMU plugin: {e}"))?;
    let native_image = vm::build_native(&root, "memcached")?;
    let built = linux_guest::build_or_reuse(&default_cache_dir(), false)?;

    // A private directory made anew (mode 0700; as root, never one
    // someone else placed in /tmp), deleted on drop.
    let scratch_dir = SocketDir::create(&format!("ebb-bench-insns-{}", std::process::id()))?;
    let scratch = scratch_dir.path();
    let ranges_ours = scratch.join("ranges-ours");
    let ranges_linux = scratch.join("ranges-linux");
    std::fs::write(
        &ranges_ours,
        image_ranges(&native_image, plan.functions_of.as_deref())?,
    )
    .and_then(|()| std::fs::write(&ranges_linux, LINUX_RANGES))
    .map_err(|e| format!("writing the ranges files: {e}"))?;

    let namespace = vm::namespace("insns")?;
    let tap = vm::tap(&namespace)?;
    let bench = VmBench::new(&namespace, &tap);
    let server = SocketAddr::from((bench.guest(), MEMCACHED_PORT));
    let native_args: Vec<String> = ["-m", &MEMORY_MB.to_string(), "-c", &CONNECTIONS.to_string()]
        .map(str::to_owned)
        .to_vec();

    let mut all: [Vec<Measured>; 2] = Default::default();
    let mut commands = [String::new(), String::new()];
    for run in 0..plan.runs {
        for guest in vm::alternating(run) {
            println!(
                "  run {}/{}: booting {} with the plugin ({:.0} s elapsed)",
                run + 1,
                plan.runs,
                guest.name(),
                started.elapsed().as_secs_f64()
            );
            let socket = scratch.join(format!("counts-{}-{run}.sock", guest.name()));
            let ranges = match guest {
                Guest::Ours => &ranges_ours,
                Guest::Linux => &ranges_linux,
            };
            let shape = GuestShape {
                qemu_args: plugin_args(&plugin.path, &socket, ranges),
                // TCG plugins see only what TCG translates: under KVM
                // nothing would be counted.
                accel: "tcg".to_owned(),
                ..GuestShape::default()
            };
            let booted = match guest {
                Guest::Ours => Booted::Ours(vm::boot_native(
                    &bench,
                    &native_image,
                    &shape,
                    &native_args,
                    "memcached: ready: listening on",
                )?),
                Guest::Linux => {
                    let settings = GuestSettings {
                        service: GuestService::Memcached(MemcachedSettings {
                            memory_mb: MEMORY_MB,
                            connections: CONNECTIONS,
                        }),
                        ..GuestSettings::default()
                    };
                    Booted::Linux(vm::boot_linux(&bench, &built.image, &shape, settings)?)
                }
            };
            commands[guest as usize] = booted.command();
            let measured = measure(&bench, server, &socket, guest, plan).map_err(|e| {
                format!(
                    "{}: {e}\n--- serial ---\n{}",
                    guest.name(),
                    booted.qemu().serial_tail(20)
                )
            })?;
            all[guest as usize].push(measured);
        }
    }
    report(&all, plan, load_start, started, &commands, &plugin.path)
}

/// The median over runs of `name`'s instructions per request at
/// (`protocol`, `load`) for guest `g`; `None` if no run has it.
fn median_of(
    all: &[Vec<Measured>; 2],
    g: usize,
    key: (ProtocolKind, &str),
    name: &str,
) -> Option<f64> {
    let mut values: Vec<f64> = all[g]
        .iter()
        .filter_map(|measured| {
            let (_, counts) = measured.iter().find(|(k, _)| *k == key)?;
            counts.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
        })
        .collect();
    (!values.is_empty()).then(|| median(&mut values))
}

fn report(
    all: &[Vec<Measured>; 2],
    plan: &Plan,
    load_start: f64,
    started: Instant,
    commands: &[String; 2],
    plugin: &Path,
) -> Result<(), String> {
    let mut report = vm::new_report("insns", "tcg", load_start, "the load generator");
    let headline = (ProtocolKind::Text, "loaded");
    let ours = median_of(all, 0, headline, "total").unwrap_or(f64::NAN);
    let linux = median_of(all, 1, headline, "total").unwrap_or(f64::NAN);
    report
        .metric(
            "insns_per_req_ours",
            ours,
            "insns",
            "native memcached, ETC text, 4 connections x 16 in flight; target <= 4000 (EbbRT 5557)",
        )
        .metric(
            "insns_per_req_linux",
            linux,
            "insns",
            "stock memcached in the Linux guest, the same requests (EbbRT's Linux: 13604)",
        )
        .metric(
            "insns_ratio",
            linux / ours,
            "x",
            "Linux / ours; target >= 3.4 (EbbRT 2.45)",
        );
    for protocol in PROTOCOLS {
        for (load, _, _) in LOADS {
            for (g, guest) in [Guest::Ours, Guest::Linux].into_iter().enumerate() {
                if let Some(value) = median_of(all, g, (protocol, load), "total") {
                    report.metric(
                        format!("insns_per_req_{}_{}_{load}", guest.name(), protocol.name()),
                        value,
                        "insns",
                        "median of runs",
                    );
                }
            }
        }
    }
    // The layers, at the headline load: every name the plugin answered.
    for (g, guest) in [Guest::Ours, Guest::Linux].into_iter().enumerate() {
        let names: Vec<String> = all[g]
            .first()
            .and_then(|measured| measured.iter().find(|(k, _)| *k == headline))
            .map(|(_, counts)| counts.iter().skip(1).map(|(n, _)| n.clone()).collect())
            .unwrap_or_default();
        for name in names {
            if let Some(value) = median_of(all, g, headline, &name) {
                report.metric(
                    format!("insns_per_req_{}_{name}", guest.name()),
                    value,
                    "insns",
                    "per request in this layer or range, ETC text loaded, median of runs",
                );
            }
        }
    }
    report
        .metric("runs", plan.runs as f64, "", "per guest, alternating")
        .metric(
            "elapsed_s",
            started.elapsed().as_secs_f64(),
            "s",
            "the whole benchmark",
        )
        .command(match &plan.functions_of {
            Some(layer) => format!("./ebb bench insns -- --functions-of {layer}"),
            None => "./ebb bench insns".to_owned(),
        })
        .command(commands[0].clone())
        .command(commands[1].clone())
        .command(format!(
            "ebb-loadgen (library): ETC, 1 thread on CPU {CLIENT_CPU}, closed loop, 1x1 and 4x16 in flight, {} s windows; counts from {} (sock=, ranges=)",
            plan.window.as_secs_f64(),
            plugin.display()
        ));
    report.finish()?;
    Ok(())
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-insns",
    about = "./ebb bench insns: guest instructions per request, native memcached against stock memcached in a Linux guest"
)]
struct Args {
    /// One short run per guest (1 s windows).
    #[arg(long)]
    quick: bool,
    /// Runs per guest (default 3, 1 with --quick).
    #[arg(long, value_name = "N")]
    runs: Option<std::num::NonZeroUsize>,
    /// Count this layer of ours (iobuf, memcached, ip_tcp, ...) by
    /// function: its `insns_per_req_ours_*` keys name functions. As
    /// `LAYER:TEXT`, only the functions whose names hold TEXT (at most
    /// 48 names; the rest of the layer is `LAYER_rest`).
    #[arg(long, value_name = "LAYER")]
    functions_of: Option<String>,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let mut plan = if args.quick {
        Plan {
            runs: 1,
            window: Duration::from_secs(1),
            functions_of: None,
        }
    } else {
        Plan {
            runs: 3,
            window: Duration::from_secs(2),
            functions_of: None,
        }
    };
    if let Some(runs) = args.runs {
        plan.runs = runs.get();
    }
    plan.functions_of = args.functions_of;
    exit_code("insns bench", run(&plan))
}
