//! `./ebb bench redis-vm`: Redis 7.0.15 from Debian's source, unchanged,
//! booted as its own Ebbflow image, against Debian's stock Redis 7.0.15
//! in the Linux comparison guest, on the same virtual hardware: q35, one
//! vCPU, 512 MiB, `virtio-net-pci,disable-legacy=on` on one TAP device in
//! a network namespace the benchmark creates, the same QEMU and
//! accelerator, QEMU pinned to host CPU 1 and the client to CPU 0, both
//! at nice -10 (`vm::NICE`).
//!
//! Both servers run without persistence (`--save "" --appendonly no`: an
//! in-memory server, and ours cannot fork a BGSAVE) and with protected
//! mode off (clients come from the TAP link). Stock Redis is Debian's
//! binary with Debian's jemalloc; ours links musl's allocator
//! (`MALLOC=libc`, crates/ebb-cbuild/src/redis.rs), a handicap kept.
//!
//! Per run, each guest is booted, its key space filled (`redis-benchmark
//! -t set -n 50000 -c 50 -r 10000`: 99 % of the 10,000 keys), and swept
//! with Debian's `redis-benchmark` (closed loop, one request in flight
//! per client), GET then SET, at 1, 2, 5, 10, 20 and 50 clients
//! (`-n` = 800 per client, at least 4,000; `-r 10000`, `-d 3`). The
//! throughput at the SLA is the highest whose p99 is within 5 ms under
//! TCG (500 µs under KVM). Then, for host CPU per request at matched
//! loads, `ebb-loadgen` offers 1,000, 2,000, 4,000, ... requests/s open
//! loop (RESP, half GET and half SET, 16-byte keys, 3-byte values, 4
//! connections) while QEMU's CPU time (user + system, all threads,
//! `/proc/PID/stat`) is read around each window. The guests alternate,
//! 3 runs each.
//!
//! Keys: `ratio_get`, `ratio_set` = ours / Linux throughput at the SLA
//! (medians of runs), target ≥ 2; `cpu_ratio` = Linux / ours QEMU CPU
//! per request at the highest offered load both sustained in every run
//! with QEMU below 80 % of a core.
//!
//! Then, in the same run and namespace, the hosted half
//! (`ebb_bench::redis_hosted`, which says how each runs): our Redis on
//! Ebbflow's user-space stack over the bench's TAP device against
//! Debian's stock Redis on kernel TCP at the kernel's side of it, swept
//! the same way, alternating, with each server's own CPU per request.
//! `ratio_hosted_get`, `ratio_hosted_set`: ours / stock throughput at the
//! SLA; `ratio_hosted` the lower, target ≥ 1.5. A throughput–p99 plot
//! (guests and hosted) goes to `target/bench/redis-vm.svg`. Options:
//! `--runs N`, `--quick`.

use std::net::{SocketAddr, SocketAddrV4};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ebb_bench::plot::{write_p99_svg, Curve, Panel};
use ebb_bench::redis_hosted::{self, Start, Which};
use ebb_bench::redis_vm::{throughput_at_sla, Invocation, SweepPoint};
use ebb_bench::report::{exit_code, median, output_dir, workspace_root};
use ebb_bench::vm::{self, Booted, Guest, GuestShape, VmBench, CLIENT_CPU, QEMU_CPU};
use ebb_cli::c_apps;
use ebb_loadgen::{Config, ProtocolKind, SizeDist};
use ebb_testbed::linux_guest::qemu::GUEST_MAC;
use ebb_testbed::linux_guest::{
    self, default_cache_dir, GuestService, GuestSettings, RedisSettings, REDIS_PORT,
};
use ebb_testbed::qemu::{process_cpu_seconds, qemu_cpu_seconds};

/// The tests of every sweep, in order (`redis-benchmark -t`).
const TESTS: [&str; 2] = ["get", "set"];
/// `-r`: the key space of `redis-benchmark` and of the load generator.
const KEYSPACE: u32 = 10_000;
/// `-d`: `redis-benchmark`'s default value size.
const VALUE_BYTES: u32 = 3;
/// Requests of the fill that precedes the sweeps: 5 per key, so that
/// 1 - e^-5 = 99.3 % of the key space is set before GET is measured.
const FILL_REQUESTS: u32 = 50_000;
/// The fewest requests of one sweep point.
const MIN_REQUESTS: u32 = 4_000;
/// Offered loads for CPU per request, requests/s, tried in order until a
/// guest no longer sustains one or QEMU nears a full core.
const CPU_RATES: [f64; 6] = [1_000.0, 2_000.0, 4_000.0, 8_000.0, 16_000.0, 32_000.0];
/// QEMU's CPU use (cores) above which a guest counts as saturated: its
/// CPU per request is then only the core divided by the rate.
const MAX_BUSY: f64 = 0.8;
/// Each `redis-benchmark` run's limit.
const BENCHMARK_LIMIT: Duration = Duration::from_secs(120);
/// Past this, no new run starts (the whole benchmark stays near 15 min).
const BUDGET: Duration = Duration::from_secs(12 * 60);

struct Plan {
    runs: usize,
    clients: Vec<u32>,
    requests_per_client: u32,
    window: Duration,
    warmup: Duration,
}

/// One matched-load point: CPU per request at an offered rate.
#[derive(Clone, Debug)]
struct CpuPoint {
    rate: f64,
    achieved: f64,
    cpu_us: f64,
    busy: f64,
    sustained: bool,
}

/// What one run measured on one guest: a sweep per test, then the CPU
/// ladder.
#[derive(Clone, Debug, Default)]
struct GuestRun {
    sweeps: [Vec<SweepPoint>; 2],
    cpu: Vec<CpuPoint>,
}

/// Whose CPU time a point counts.
#[derive(Clone, Copy)]
enum CpuOf {
    /// QEMU's, started as or under this process.
    Qemu(u32),
    /// This process's (a hosted server).
    Process(u32),
}

impl CpuOf {
    fn seconds(self) -> Result<f64, String> {
        match self {
            CpuOf::Qemu(pid) => qemu_cpu_seconds(pid),
            CpuOf::Process(pid) => process_cpu_seconds(pid),
        }
    }
}

/// What a guest (or a hosted server) is measured through.
struct Target<'a> {
    bench: &'a VmBench<'a>,
    server: SocketAddrV4,
    cpu: CpuOf,
    name: &'static str,
    plan: &'a Plan,
}

impl Target<'_> {
    fn invocation(&self, test: &str, clients: u32, requests: u32) -> Invocation {
        Invocation {
            server: *self.server.ip(),
            port: self.server.port(),
            clients,
            requests,
            keyspace: KEYSPACE,
            test: test.to_owned(),
            value_bytes: VALUE_BYTES,
        }
    }

    /// Sets (nearly) every key of `redis-benchmark`'s key space.
    fn fill(&self) -> Result<(), String> {
        self.invocation("set", 50, FILL_REQUESTS)
            .run(self.bench.namespace(), BENCHMARK_LIMIT)
            .map(|_| ())
    }

    /// One `redis-benchmark` point, with the server's CPU time (QEMU's
    /// for a guest) around it.
    fn point(&self, test: &str, clients: u32) -> Result<SweepPoint, String> {
        let requests = (clients * self.plan.requests_per_client).max(MIN_REQUESTS);
        let before = self.cpu.seconds()?;
        let row = self
            .invocation(test, clients, requests)
            .run(self.bench.namespace(), BENCHMARK_LIMIT)?;
        let used = self.cpu.seconds()? - before;
        let point = SweepPoint {
            clients,
            rps: row.rps,
            p50_us: row.p50_ms * 1e3,
            p99_us: row.p99_ms * 1e3,
            cpu_us: used * 1e6 / f64::from(requests),
        };
        println!(
            "    {:12} {test} {clients:3} clients: {:8.0} requests/s, p50 {:7.0} p99 {:7.0} us, server {:6.1} us CPU/request",
            self.name,
            point.rps,
            point.p50_us,
            point.p99_us,
            point.cpu_us
        );
        Ok(point)
    }

    /// The load generator's configuration for the matched loads.
    fn loadgen(&self) -> Config {
        let mut cfg = Config::new(SocketAddr::V4(self.server).to_string());
        cfg.protocol = ProtocolKind::Resp;
        cfg.cpus = vec![CLIENT_CPU];
        cfg.threads = 1;
        cfg.connections = 4;
        cfg.depth = 64;
        cfg.key_size = SizeDist::Fixed(16);
        cfg.value_size = SizeDist::Fixed(VALUE_BYTES as usize);
        cfg.update = 0.5;
        cfg.keys = u64::from(KEYSPACE);
        cfg.duration = self.plan.window;
        cfg.warmup = self.plan.warmup;
        cfg.drain = Duration::from_millis(500);
        cfg
    }

    /// CPU per request at the offered loads of [`CPU_RATES`], up to the
    /// first that is not sustained or keeps QEMU busier than [`MAX_BUSY`].
    fn cpu_ladder(&self) -> Result<Vec<CpuPoint>, String> {
        let mut preload = self.loadgen();
        preload.preload = true;
        preload.depth = 4;
        preload.duration = Duration::from_millis(200);
        preload.warmup = Duration::ZERO;
        self.bench
            .client(|| ebb_loadgen::run(&preload).map_err(|e| e.to_string()))??;
        let mut points = Vec::new();
        for rate in CPU_RATES {
            let mut cfg = self.loadgen();
            cfg.rate = Some(rate);
            let before = self.cpu.seconds()?;
            let summary = self
                .bench
                .client(|| ebb_loadgen::run(&cfg).map_err(|e| e.to_string()))??;
            let used = self.cpu.seconds()? - before;
            let cpu_us = used * 1e6 / summary.replies_total.max(1) as f64;
            // QEMU's share of a core while the window's rate ran: CPU per
            // request times that rate (the elapsed time would also count
            // the connects and the idle drain, and call a saturated guest
            // unsaturated).
            let busy = cpu_us * 1e-6 * summary.achieved_qps;
            let point = CpuPoint {
                rate,
                achieved: summary.achieved_qps,
                cpu_us,
                busy,
                sustained: summary.achieved_qps >= 0.95 * summary.offered_qps
                    && summary.errors_total == 0,
            };
            println!(
                "    {:12} matched load {rate:6.0}/s: achieved {:7.0}, p99 {:7.0} us, QEMU {:6.1} us CPU/request, {:3.0} % of a core",
                self.name,
                point.achieved,
                summary.p99_us,
                point.cpu_us,
                busy * 100.0
            );
            let stop = !point.sustained || busy > MAX_BUSY;
            points.push(point);
            if stop {
                break;
            }
        }
        Ok(points)
    }

    /// The key space filled, then a GET and a SET sweep.
    fn sweeps(&self) -> Result<[Vec<SweepPoint>; 2], String> {
        self.fill()?;
        let mut sweeps: [Vec<SweepPoint>; 2] = Default::default();
        for (t, test) in TESTS.into_iter().enumerate() {
            for &clients in &self.plan.clients {
                sweeps[t].push(self.point(test, clients)?);
            }
        }
        Ok(sweeps)
    }

    fn measure(&self) -> Result<GuestRun, String> {
        Ok(GuestRun {
            sweeps: self.sweeps()?,
            cpu: self.cpu_ladder()?,
        })
    }
}

/// Boots `guest` on the bench's TAP device.
fn boot(
    guest: Guest,
    bench: &VmBench<'_>,
    shape: &GuestShape,
    native_image: &std::path::Path,
    linux_image: &linux_guest::GuestImage,
) -> Result<Booted, String> {
    Ok(match guest {
        Guest::Ours => {
            let args: Vec<String> = ["--save", "", "--appendonly", "no"]
                .map(str::to_owned)
                .to_vec();
            Booted::Ours(vm::boot_native(
                bench,
                native_image,
                shape,
                &c_apps::native_args("redis", &args),
                "Ready to accept connections",
            )?)
        }
        Guest::Linux => {
            let settings = GuestSettings {
                service: GuestService::Redis(RedisSettings::default()),
                ..GuestSettings::default()
            };
            Booted::Linux(vm::boot_linux(bench, linux_image, shape, settings)?)
        }
    })
}

/// `[guest]` → one measurement per run.
type Runs = [Vec<GuestRun>; 2];

fn run(plan: &Plan) -> Result<(), String> {
    let started = Instant::now();
    let load_start = vm::load_average();
    let root = workspace_root();
    let shape = GuestShape::default();
    let sla_us = if shape.accel == "kvm" { 500.0 } else { 5000.0 };
    println!(
        "redis-vm: building Redis's native image and the Linux guest (accel {}, p99 SLA {sla_us} us)...",
        shape.accel
    );
    let built_redis = c_apps::build(&root, "redis")?;
    // The c-program image links the program named here (apps/c-program's
    // build script), as `./ebb run redis --native` does.
    std::env::set_var(c_apps::LINK_ENV, &built_redis.native_inputs);
    let native_image = vm::build_native(&root, c_apps::IMAGE)?;
    let built = linux_guest::build_or_reuse(&default_cache_dir(), false)?;
    println!("redis-vm: building Redis on the user-space stack, for ratio_hosted...");
    let userstack = c_apps::build_userstack(&root, "redis")?;
    let stock = redis_hosted::stock_binary(&output_dir())?;

    let namespace = vm::namespace("redis-vm")?;
    let tap = vm::tap(&namespace)?;
    let bench = VmBench::new(&namespace, &tap);
    let server = SocketAddrV4::new(bench.guest(), REDIS_PORT);

    let mut runs: Runs = Default::default();
    let mut commands = [String::new(), String::new()];
    let mut runs_done = 0;
    for run in 0..plan.runs {
        if started.elapsed() > BUDGET {
            println!("redis-vm: time budget spent after {runs_done} runs; stopping");
            break;
        }
        for guest in vm::alternating(run) {
            println!(
                "  run {}/{}: booting {} ({:.0} s elapsed)",
                run + 1,
                plan.runs,
                guest.name(),
                started.elapsed().as_secs_f64()
            );
            let booted = boot(guest, &bench, &shape, &native_image, &built.image)?;
            commands[guest as usize] = booted.command();
            let target = Target {
                bench: &bench,
                server,
                cpu: CpuOf::Qemu(booted.qemu().pid()),
                name: guest.name(),
                plan,
            };
            let measured = target.measure().map_err(|e| {
                format!(
                    "{}: {e}\n--- serial ---\n{}",
                    guest.name(),
                    booted.qemu().serial_tail(20)
                )
            })?;
            for (t, test) in TESTS.into_iter().enumerate() {
                println!(
                    "  run {}/{} {} {test}: {:.0} requests/s within p99 <= {sla_us} us",
                    run + 1,
                    plan.runs,
                    guest.name(),
                    throughput_at_sla(&measured.sweeps[t], sla_us)
                );
            }
            runs[guest as usize].push(measured);
        }
        runs_done += 1;
    }
    if runs_done == 0 {
        return Err("no run completed".to_owned());
    }
    let hosted = hosted_runs(plan, &bench, &userstack, &stock)?;
    let mut report = vm::new_report("redis-vm", &shape.accel, load_start, "redis-benchmark");
    report.metric(
        "sla_p99_us",
        sla_us,
        "us",
        "5 ms under TCG, 500 us under KVM",
    );
    let mut panels = Vec::new();
    for (t, test) in TESTS.into_iter().enumerate() {
        let sla = |g: usize| {
            let mut values: Vec<f64> = runs[g]
                .iter()
                .map(|r| throughput_at_sla(&r.sweeps[t], sla_us))
                .collect();
            median(&mut values)
        };
        let (ours, linux) = (sla(0), sla(1));
        for (g, guest) in [Guest::Ours, Guest::Linux].into_iter().enumerate() {
            for (r, measured) in runs[g].iter().enumerate() {
                report.metric(
                    format!("sla_rps_{}_{test}_run{}", guest.name(), r + 1),
                    throughput_at_sla(&measured.sweeps[t], sla_us),
                    "requests/s",
                    "highest redis-benchmark throughput with p99 within the SLA",
                );
            }
            // The top of the sweep (50 clients in a full run), median of runs.
            let top = |f: fn(&SweepPoint) -> f64| {
                let mut values: Vec<f64> = runs[g]
                    .iter()
                    .filter_map(|r| r.sweeps[t].last().map(f))
                    .collect();
                median(&mut values)
            };
            let clients = plan.clients.last().copied().unwrap_or(0);
            report
                .metric(
                    format!("rps_{}_{test}_c{clients}", guest.name()),
                    top(|p| p.rps),
                    "requests/s",
                    "median of runs",
                )
                .metric(
                    format!("p99_us_{}_{test}_c{clients}", guest.name()),
                    top(|p| p.p99_us),
                    "us",
                    "median of runs",
                );
        }
        report
            .metric(
                format!("sla_rps_ours_{test}"),
                ours,
                "requests/s",
                "median of runs",
            )
            .metric(
                format!("sla_rps_linux_{test}"),
                linux,
                "requests/s",
                "median of runs",
            );
        if ours > 0.0 && linux > 0.0 {
            report.metric(
                format!("ratio_{test}"),
                ours / linux,
                "x",
                "ours / Linux throughput at the SLA; target >= 2",
            );
        } else {
            report.label(
                format!("ratio_{test}"),
                "not measured: no point of a guest's sweep had its p99 within the SLA",
            );
        }
        let curve = |g: usize, label: &str, color: &str| {
            let points = plan
                .clients
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    let at: Vec<&SweepPoint> =
                        runs[g].iter().filter_map(|r| r.sweeps[t].get(i)).collect();
                    let mut rps: Vec<f64> = at.iter().map(|p| p.rps).collect();
                    let mut p99: Vec<f64> = at.iter().map(|p| p.p99_us).collect();
                    (median(&mut rps), median(&mut p99))
                })
                .collect();
            Curve {
                label: label.to_owned(),
                color: color.to_owned(),
                points,
            }
        };
        panels.push(Panel {
            title: format!("redis-benchmark {}", test.to_ascii_uppercase()),
            curves: vec![
                curve(1, "linux guest, Debian's redis-server", "#d62728"),
                curve(0, "ebbflow native, the same Redis", "#1f77b4"),
            ],
        });
    }
    cpu_figures(&runs, &mut report);
    // The hosted servers run on no accelerator: their SLA is the TCG
    // one wherever the benchmark runs.
    hosted_figures(&hosted, plan, HOSTED_SLA_US, &mut report, &mut panels);
    report
        .metric("runs", runs_done as f64, "", "per guest, alternating")
        .metric(
            "elapsed_s",
            started.elapsed().as_secs_f64(),
            "s",
            "the whole benchmark",
        )
        .command("./ebb bench redis-vm")
        .command(commands[0].clone())
        .command(commands[1].clone())
        .command(format!(
            "redis-benchmark (Debian's redis-tools) in namespace {} on CPU {CLIENT_CPU}: -c {:?} -n max(800 x clients, {MIN_REQUESTS}) -r {KEYSPACE} -d {VALUE_BYTES} -t get / -t set --csv; QEMU on CPU {QEMU_CPU}",
            namespace.name(),
            plan.clients
        ))
        .command(redis_hosted::describe())
        .command(format!(
            "ebb-loadgen (library), RESP, half GET half SET, 1 thread, 4 connections, open loop at {CPU_RATES:?} requests/s, {} s windows after {} s warm-up",
            plan.window.as_secs_f64(),
            plan.warmup.as_secs_f64()
        ));
    report.finish()?;
    let svg = output_dir().join("redis-vm.svg");
    write_p99_svg(&panels, sla_us, &svg)?;
    println!("  wrote {}", svg.display());
    Ok(())
}

/// The hosted half's p99 SLA, µs (issue 19: "throughput at p99 ≤ 5 ms").
const HOSTED_SLA_US: f64 = 5000.0;

/// `[ours, stock]` on the host → the GET and SET sweeps of each run.
type HostedRuns = [Vec<[Vec<SweepPoint>; 2]>; 2];

/// The hosted half (`ebb_bench::redis_hosted`): our Redis on the
/// user-space stack over the bench's TAP device and stock Redis on the
/// kernel's side of it, alternating, `plan.runs` runs each, swept as the
/// guests are, with the server's own CPU time per request.
fn hosted_runs(
    plan: &Plan,
    bench: &VmBench<'_>,
    userstack: &Path,
    stock: &Path,
) -> Result<HostedRuns, String> {
    let config = bench.tap().config();
    let mut runs: HostedRuns = Default::default();
    for run in 0..plan.runs {
        let order = if run % 2 == 0 {
            [Which::Ours, Which::Stock]
        } else {
            [Which::Stock, Which::Ours]
        };
        for which in order {
            println!("  hosted run {}/{}: {}", run + 1, plan.runs, which.name());
            let start = match which {
                Which::Ours => Start {
                    which,
                    binary: userstack,
                    namespace: bench.namespace().name(),
                    addr: bench.guest(),
                    tap: Some((&config.ifname, config.prefix_len, GUEST_MAC)),
                },
                Which::Stock => Start {
                    which,
                    binary: stock,
                    namespace: bench.namespace().name(),
                    addr: bench.tap().host(),
                    tap: None,
                },
            };
            let server = redis_hosted::start(&start)?;
            let target = Target {
                bench,
                server: SocketAddrV4::new(server.addr, server.port),
                cpu: CpuOf::Process(server.pid()),
                name: match which {
                    Which::Ours => "ours-hosted",
                    Which::Stock => "stock-hosted",
                },
                plan,
            };
            let sweeps = target
                .sweeps()
                .map_err(|e| format!("{} hosted: {e}\n{}", which.name(), server.log_tail()))?;
            runs[which as usize].push(sweeps);
        }
    }
    Ok(runs)
}

/// `ratio_hosted_get`, `ratio_hosted_set` (ours / stock throughput at the
/// SLA, medians of runs), `ratio_hosted` (the lower of the two), the
/// servers' CPU per request at the top of the sweep, and a panel per test.
fn hosted_figures(
    runs: &HostedRuns,
    plan: &Plan,
    sla_us: f64,
    report: &mut ebb_bench::report::Report,
    panels: &mut Vec<Panel>,
) {
    let mut ratios = Vec::new();
    let clients = plan.clients.last().copied().unwrap_or(0);
    for (t, test) in TESTS.into_iter().enumerate() {
        let sla = |w: usize| {
            let mut values: Vec<f64> = runs[w]
                .iter()
                .map(|sweeps| throughput_at_sla(&sweeps[t], sla_us))
                .collect();
            median(&mut values)
        };
        let top = |w: usize, f: fn(&SweepPoint) -> f64| {
            let mut values: Vec<f64> = runs[w]
                .iter()
                .filter_map(|sweeps| sweeps[t].last().map(f))
                .collect();
            median(&mut values)
        };
        for which in [Which::Ours, Which::Stock] {
            let w = which as usize;
            report
                .metric(
                    format!("sla_rps_hosted_{}_{test}", which.name()),
                    sla(w),
                    "requests/s",
                    "median of runs",
                )
                .metric(
                    format!("cpu_us_per_req_hosted_{}_{test}_c{clients}", which.name()),
                    top(w, |p| p.cpu_us),
                    "us",
                    "the server's own CPU (user + system) per request, median of runs",
                );
        }
        let (ours, stock) = (sla(0), sla(1));
        if ours > 0.0 && stock > 0.0 {
            ratios.push(ours / stock);
            report.metric(
                format!("ratio_hosted_{test}"),
                ours / stock,
                "x",
                "ours on the user-space stack / stock on kernel TCP, throughput at the SLA",
            );
        }
        let curve = |w: usize, label: &str, color: &str| Curve {
            label: label.to_owned(),
            color: color.to_owned(),
            points: (0..plan.clients.len())
                .map(|i| {
                    let at: Vec<&SweepPoint> = runs[w]
                        .iter()
                        .filter_map(|sweeps| sweeps[t].get(i))
                        .collect();
                    let mut rps: Vec<f64> = at.iter().map(|p| p.rps).collect();
                    let mut p99: Vec<f64> = at.iter().map(|p| p.p99_us).collect();
                    (median(&mut rps), median(&mut p99))
                })
                .collect(),
        };
        panels.push(Panel {
            title: format!("hosted, redis-benchmark {}", test.to_ascii_uppercase()),
            curves: vec![
                curve(1, "stock Redis, kernel TCP", "#d62728"),
                curve(
                    0,
                    "the same Redis on Ebbflow's user-space stack, TAP",
                    "#1f77b4",
                ),
            ],
        });
    }
    if ratios.len() == TESTS.len() {
        report.metric(
            "ratio_hosted",
            ratios.iter().copied().fold(f64::INFINITY, f64::min),
            "x",
            "the lower of ratio_hosted_get and ratio_hosted_set; target >= 1.5",
        );
    } else {
        report.label(
            "ratio_hosted",
            "not measured: no point of a hosted sweep had its p99 within the SLA",
        );
    }
}

/// CPU per request at the matched loads and `cpu_ratio`: at the highest
/// offered load both guests sustained in every run with QEMU below
/// [`MAX_BUSY`] of a core (at saturation CPU per request is only one core
/// / rate for both).
fn cpu_figures(runs: &Runs, report: &mut ebb_bench::report::Report) {
    let cpu_at = |g: usize, rate: f64| -> Option<f64> {
        let mut values = Vec::new();
        for measured in &runs[g] {
            let point = measured.cpu.iter().find(|p| p.rate == rate)?;
            if !point.sustained || point.busy > MAX_BUSY {
                return None;
            }
            values.push(point.cpu_us);
        }
        Some(median(&mut values))
    };
    let mut matched = None;
    for rate in CPU_RATES {
        let (Some(ours), Some(linux)) = (cpu_at(0, rate), cpu_at(1, rate)) else {
            continue;
        };
        report
            .metric(
                format!("cpu_us_per_req_ours_at_{rate:.0}"),
                ours,
                "us",
                "QEMU host CPU per request, median of runs",
            )
            .metric(
                format!("cpu_us_per_req_linux_at_{rate:.0}"),
                linux,
                "us",
                "QEMU host CPU per request, median of runs",
            );
        matched = Some((rate, linux / ours));
    }
    let (rate, ratio) = matched.unwrap_or((f64::NAN, f64::NAN));
    report.metric(
        "cpu_ratio",
        ratio,
        "x",
        format!(
            "Linux / ours host CPU per request at {rate:.0} requests/s offered, the highest load both sustained in every run with QEMU below 80 % of a core"
        ),
    );
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-redis-vm",
    about = "./ebb bench redis-vm: Redis as its own Ebbflow image against stock Redis in a Linux guest"
)]
struct Args {
    /// One short run per guest (1, 10 and 50 clients; 800 ms windows).
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
            clients: vec![1, 10, 50],
            requests_per_client: 200,
            window: Duration::from_millis(800),
            warmup: Duration::from_millis(200),
        }
    } else {
        Plan {
            runs: 3,
            clients: vec![1, 2, 5, 10, 20, 50],
            requests_per_client: 800,
            window: Duration::from_secs(2),
            warmup: Duration::from_millis(500),
        }
    };
    if let Some(runs) = args.runs {
        plan.runs = runs.get();
    }
    exit_code("redis-vm bench", run(&plan))
}
