//! `./ebb bench netpipe`: NetPIPE-style latency and goodput of Ebbflow's
//! netpipe booted as its own image against the same application on Linux
//! (the Linux comparison guest with the hosted netpipe added,
//! `linux_guest::with_netpipe`), on the same virtual hardware: q35, one
//! vCPU, 512 MiB, `virtio-net-pci,disable-legacy=on` on one TAP device in a
//! network namespace the benchmark creates, QEMU pinned to host CPU 1, the
//! client (ebb-loadgen's netpipe client, blocking sockets, `TCP_NODELAY`)
//! on CPU 0, in the namespace. The accelerator is recorded (`accel`; TCG
//! here).
//!
//! Per run and guest: 64-byte ping-pongs (one-way latency = half the
//! median round trip, NetPIPE's definition), a goodput sweep over every
//! power of two from 1 B to 1 MiB (size / one-way time), and a 16 MiB bulk
//! transfer into the sink (checked with its Adler-32). The two guests
//! alternate, 3 runs each; figures are medians over runs.
//!
//! Key: `latency_ratio_64b` = ours / Linux one-way latency at 64 B
//! (target ≤ 0.7). Options (after `--`): `--runs N`, `--quick` (1 run,
//! shorter sweeps). QEMU and the client run at nice -10 (`vm::NICE`).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ebb_bench::report::{median, workspace_root};
use ebb_bench::vm::{self, Guest, GuestShape, VmBench, CLIENT_CPU, QEMU_CPU};
use ebb_loadgen::netpipe::{bulk, ping_pong, PingPongConfig};
use ebb_testbed::linux_guest::{self, default_cache_dir, GuestService, GuestSettings};

struct Plan {
    runs: usize,
    latency_trips: u32,
    time_per_size: Duration,
    bulk_bytes: u64,
}

/// One run's figures for one guest.
struct Figures {
    latency_us: f64,
    /// `(size, goodput Mbit/s)`.
    goodput: Vec<(usize, f64)>,
    bulk_mbps: f64,
    boot_s: f64,
}

fn sizes() -> Vec<usize> {
    (0..=20).map(|shift| 1usize << shift).collect()
}

/// Measures one booted guest from inside the namespace (`boot_s` is left
/// for the caller).
fn measure(
    bench: &VmBench<'_>,
    ping: SocketAddr,
    sink: SocketAddr,
    plan: &Plan,
) -> Result<Figures, String> {
    bench.client(|| {
        vm::wait_for_ping(ping, Duration::from_secs(30))?;
        let mut latency = PingPongConfig::new(ping);
        latency.sizes = vec![64];
        latency.warmup = 50;
        latency.min_repetitions = plan.latency_trips;
        latency.max_repetitions = plan.latency_trips;
        let latency_us = ping_pong(&latency)?[0].one_way_us();

        let mut sweep = PingPongConfig::new(ping);
        sweep.sizes = sizes();
        sweep.warmup = 2;
        sweep.min_repetitions = 3;
        sweep.max_repetitions = 500;
        sweep.time_per_size = plan.time_per_size;
        let goodput = ping_pong(&sweep)?
            .iter()
            .map(|point| (point.size, point.goodput_mbps()))
            .collect();
        let bulk = bulk(sink, plan.bulk_bytes, 64 << 10, Duration::from_secs(120))?;
        Ok(Figures {
            latency_us,
            goodput,
            bulk_mbps: bulk.goodput_mbps(),
            boot_s: f64::NAN,
        })
    })?
}

fn run(plan: &Plan) -> Result<(), String> {
    let started = Instant::now();
    let load_start = vm::load_average();
    let root = workspace_root();
    let shape = GuestShape::default();
    println!(
        "netpipe: building the native image, the hosted netpipe and the Linux guest ({})...",
        shape.accel
    );
    let native_image = vm::build_native(&root, "netpipe")?;
    let hosted = vm::build_hosted(&root, "netpipe")?;
    let built = linux_guest::build_or_reuse(&default_cache_dir(), false)?;
    let linux_image = linux_guest::with_netpipe(&built.image, &hosted)?;

    let namespace = vm::namespace("netpipe")?;
    let tap = vm::tap(&namespace)?;
    let bench = VmBench::new(&namespace, &tap);
    let ping = SocketAddr::from((bench.guest(), linux_guest::NETPIPE_PORTS[0]));
    let sink = SocketAddr::from((bench.guest(), linux_guest::NETPIPE_PORTS[1]));

    let mut results: [Vec<Figures>; 2] = [Vec::new(), Vec::new()];
    let mut commands = [String::new(), String::new()];
    for run in 0..plan.runs {
        let order = if run % 2 == 0 {
            [Guest::Ours, Guest::Linux]
        } else {
            [Guest::Linux, Guest::Ours]
        };
        for guest in order {
            let index = guest as usize;
            let figures = match guest {
                Guest::Ours => {
                    let booted = vm::boot_native(
                        &bench,
                        &native_image,
                        &shape,
                        &[],
                        "netpipe: ready: ping-pong",
                    )?;
                    commands[index].clone_from(&booted.command);
                    let figures = measure(&bench, ping, sink, plan).map_err(|e| {
                        format!("ours: {e}\n--- serial ---\n{}", booted.qemu.serial_tail(20))
                    })?;
                    Figures {
                        boot_s: booted.boot_to_ready.as_secs_f64(),
                        ..figures
                    }
                }
                Guest::Linux => {
                    let settings = GuestSettings {
                        service: GuestService::Netpipe,
                        ..GuestSettings::default()
                    };
                    let booted = vm::boot_linux(&bench, &linux_image, &shape, settings)?;
                    commands[index].clone_from(&booted.command);
                    let figures = measure(&bench, ping, sink, plan).map_err(|e| {
                        format!(
                            "linux: {e}\n--- serial ---\n{}",
                            booted.qemu.serial_tail(20)
                        )
                    })?;
                    Figures {
                        boot_s: booted.boot_to_ready.as_secs_f64(),
                        ..figures
                    }
                }
            };
            let at = |size: usize| {
                figures
                    .goodput
                    .iter()
                    .find(|&&(s, _)| s == size)
                    .map_or(f64::NAN, |&(_, g)| g)
            };
            println!(
                "  run {}/{} {:>5}: 64 B one-way {:7.1} us, goodput 1 KiB {:7.1} / 64 KiB {:7.1} / 1 MiB {:7.1} Mbit/s, bulk {:7.1} Mbit/s (boot {:.1} s, {:.0} s elapsed)",
                run + 1,
                plan.runs,
                guest.name(),
                figures.latency_us,
                at(1024),
                at(65_536),
                at(1 << 20),
                figures.bulk_mbps,
                figures.boot_s,
                started.elapsed().as_secs_f64()
            );
            results[index].push(figures);
        }
    }

    let med = |figures: &[Figures], f: &dyn Fn(&Figures) -> f64| {
        let mut values: Vec<f64> = figures.iter().map(f).collect();
        median(&mut values)
    };
    let goodput_at = |figures: &[Figures], size: usize| {
        med(figures, &|f: &Figures| {
            f.goodput
                .iter()
                .find(|&&(s, _)| s == size)
                .map_or(f64::NAN, |&(_, g)| g)
        })
    };
    let [ours, linux] = &results;
    let mut report = vm::new_report("netpipe", &shape.accel, load_start, "the client");
    let latency = [
        med(ours, &|f: &Figures| f.latency_us),
        med(linux, &|f: &Figures| f.latency_us),
    ];
    let note = format!(
        "half the median RTT of {} ping-pongs, median of {} runs",
        plan.latency_trips, plan.runs
    );
    report
        .metric("latency_ours_64b_us", latency[0], "us", note.clone())
        .metric("latency_linux_64b_us", latency[1], "us", note)
        .metric(
            "latency_ratio_64b",
            latency[0] / latency[1],
            "x",
            "ours / Linux one-way latency at 64 B; target <= 0.7",
        );
    println!("\n  size        ours Mbit/s   Linux Mbit/s   ours/Linux");
    for size in sizes() {
        let (g_ours, g_linux) = (goodput_at(ours, size), goodput_at(linux, size));
        println!(
            "  {size:>8}  {g_ours:>13.2}  {g_linux:>13.2}  {:>11.2}",
            g_ours / g_linux
        );
        report
            .metric(
                format!("goodput_ours_{size}b_mbps"),
                g_ours,
                "Mbit/s",
                "size / one-way time, median of runs",
            )
            .metric(
                format!("goodput_linux_{size}b_mbps"),
                g_linux,
                "Mbit/s",
                "size / one-way time, median of runs",
            );
    }
    println!();
    let big = 1 << 20;
    let bulk = [
        med(ours, &|f: &Figures| f.bulk_mbps),
        med(linux, &|f: &Figures| f.bulk_mbps),
    ];
    report
        .metric(
            "goodput_ratio_1mib",
            goodput_at(ours, big) / goodput_at(linux, big),
            "x",
            "ours / Linux ping-pong goodput at 1 MiB",
        )
        .metric(
            "bulk_ours_mbps",
            bulk[0],
            "Mbit/s",
            format!(
                "{} MiB into the sink, Adler-32 checked",
                plan.bulk_bytes >> 20
            ),
        )
        .metric(
            "bulk_linux_mbps",
            bulk[1],
            "Mbit/s",
            format!(
                "{} MiB into the sink, Adler-32 checked",
                plan.bulk_bytes >> 20
            ),
        )
        .metric("bulk_ratio", bulk[0] / bulk[1], "x", "ours / Linux")
        .metric(
            "boot_ours_s",
            med(ours, &|f: &Figures| f.boot_s),
            "s",
            "QEMU start to the application's ready line",
        )
        .metric(
            "boot_linux_s",
            med(linux, &|f: &Figures| f.boot_s),
            "s",
            "QEMU start to netpipe answering",
        )
        .metric("runs", plan.runs as f64, "", "per guest, alternating")
        .metric(
            "elapsed_s",
            started.elapsed().as_secs_f64(),
            "s",
            "the whole benchmark, builds included",
        )
        .command("./ebb bench netpipe")
        .command(commands[0].clone())
        .command(commands[1].clone())
        .command(format!(
            "client: ebb_loadgen::netpipe (TCP_NODELAY, blocking) on CPU {CLIENT_CPU} in namespace {}; QEMU on CPU {QEMU_CPU}",
            namespace.name()
        ));
    report.finish()?;
    Ok(())
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-netpipe",
    about = "./ebb bench netpipe: native netpipe against netpipe on Linux in a guest"
)]
struct Args {
    /// One short run per guest (fewer round trips, less time per size).
    #[arg(long)]
    quick: bool,
    /// Runs per guest (default 3, 1 with --quick).
    #[arg(long, value_name = "N")]
    runs: Option<std::num::NonZeroUsize>,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let mut plan = if args.quick {
        Plan {
            runs: 1,
            latency_trips: 500,
            time_per_size: Duration::from_millis(50),
            bulk_bytes: 4 << 20,
        }
    } else {
        Plan {
            runs: 3,
            latency_trips: 3000,
            time_per_size: Duration::from_millis(200),
            bulk_bytes: 16 << 20,
        }
    };
    if let Some(runs) = args.runs {
        plan.runs = runs.get();
    }
    match run(&plan) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("netpipe bench: {error}");
            ExitCode::FAILURE
        }
    }
}
