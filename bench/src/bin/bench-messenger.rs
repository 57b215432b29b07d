//! `./ebb bench messenger`: the Messenger's round trips, throughput and
//! goodput between a hosted frontend and native echo nodes, against a
//! plain TCP ping-pong on the same path in the same run, and how long
//! `allocate()` takes to a node's Messenger handshake (needs root: the
//! cluster network).
//!
//! The setup is `./ebb cluster`'s: a namespace with a bridge
//! (`ebb_testbed::cluster_net`), the frontend (this process, a hosted node
//! of one core, kernel TCP) on the bridge's veth, native echo nodes (q35,
//! TCG, 1 vCPU, 256 MiB) started by the NodeAllocator with ebb-cluster's
//! Messenger hooks (`MessengerContract` from the frontend's registry, ready
//! once `Announced`). Round trips are made by one piece of code,
//! `echo::ping`, on both sides.
//!
//! 1. `allocate_ms`: `allocate()` of an echo node to its announcement,
//!    median of 10 (3 with `--quick`) after one unmeasured; each node is
//!    stopped before the next.
//! 2. Node T (echo) is allocated; the frontend times, against it: 64-byte
//!    Messenger calls to its echo Ebb and a 64-byte TCP ping-pong with its
//!    TCP echo (alternating halves), pipelined calls, and 1 MiB round trips
//!    of both kinds: the `hosted_native` keys.
//! 3. Node P (echo `--ping-node T`) is allocated and makes the same
//!    measurements against T over the bridge, printing its samples on its
//!    console: the `native` keys.
//! 4. The same between two Linux guests on the same bridge (Debian's
//!    kernel, the comparison guest of `ebb_testbed::linux_guest`, q35,
//!    TCG, 1 vCPU): echo's hosted build as nodes 200 and 201, 201 with
//!    `--ping-node 200`: the `linux` keys. Its TCP ping-pong is Linux's
//!    TCP between two guests; `linux_ratio` = `rtt_us_native_median` /
//!    `rtt_us_raw_linux_median` (target <= 0.5).
//!
//! Writes `target/bench/messenger.json` and `target/bench/messenger.svg`
//! (the CDFs of the four 64-byte round trips). Options (after `--`):
//! `--quick` (200 round trips of each kind instead of 1000, 3 allocations).

use std::net::{SocketAddr, SocketAddrV4};
use std::process::ExitCode;
use std::sync::mpsc::{self, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_bench::cluster::{echo_image, stop_on_signals};
use ebb_bench::messenger::{add_path, add_ratios, parse_console, Figures, IDS_PER_NODE};
use ebb_bench::plot::{cdf_points, cdf_svg, Curve};
use ebb_bench::report::{exit_code, median, minimum, output_dir, workspace_root, Report};
use ebb_bench::vm::{load_average, report_with_load};
use ebb_cli::native;
use ebb_cluster::{
    Announced, MessengerContract, NodeAllocator, NodeHandle, NodeSpec, QemuLauncher,
};
use ebb_core::{EbbId, NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_messenger::{acceptor, create_messenger, Frontend, MessengerSettings, FRONTEND_NODE};
use ebb_testbed::cluster_net::{AddressPlan, ClusterNetwork};
use ebb_testbed::Need;

/// The Messenger port of the frontend and of every node.
const MESSENGER_PORT: u16 = 7100;
/// How long a pinging node may take to finish.
const PING_LIMIT: Duration = Duration::from_secs(300);
/// The Linux target's node id (10.96.0.201; the pingers take the next
/// ones): far above the allocator's, which count from 1.
const LINUX_TARGET: u32 = 200;

struct Plan {
    /// 64-byte round trips of each kind, per path and round.
    count: usize,
    /// Rounds: each measures the three paths in turn.
    rounds: usize,
    /// Measured allocations.
    allocations: usize,
}

/// What the frontend's core is asked to do: measure against a node.
struct Measure {
    target: echo::ping::Target,
    count: usize,
    answer: mpsc::Sender<Result<Figures, String>>,
}

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// The frontend: a hosted node of one core in the cluster's namespace,
/// serving the registry and measuring what it is sent until `jobs` closes.
fn start_frontend(
    namespace: String,
    registry: Arc<Frontend>,
    listen: SocketAddr,
    jobs: mpsc::Receiver<Measure>,
) -> Result<std::thread::JoinHandle<Result<(), String>>, String> {
    let (listening, up) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let config = ebb_hosted::Config {
            cores: Some(1),
            pin: false,
            handle_signals: false,
            ..ebb_hosted::Config::default()
        };
        ebb_testbed::netns::run_inside_named(&namespace, move || {
            ebb_hosted::run_task(config, move || serve(registry, listen, jobs, listening))
                .map_err(|error| format!("the frontend node: {error}"))?
        })?
    });
    match up.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => Ok(thread),
        Ok(Err(error)) => Err(error),
        Err(_) => Err("the frontend did not start listening within 30 s".to_owned()),
    }
}

async fn serve(
    registry: Arc<Frontend>,
    listen: SocketAddr,
    jobs: mpsc::Receiver<Measure>,
    listening: mpsc::Sender<Result<(), String>>,
) -> Result<(), String> {
    let started = (|| {
        let messenger = create_messenger(MessengerSettings::new(FRONTEND_NODE))
            .map_err(|e| format!("the frontend's Messenger: {e}"))?;
        registry
            .serve(messenger)
            .map_err(|e| format!("the frontend's registry: {e}"))?;
        ebb_net::listen(listen, acceptor(messenger))
            .map_err(|e| format!("listening on {listen}: {e}"))?;
        messenger
            .get()
            .map_err(|e| format!("the frontend's Messenger: {e}"))
    })();
    let _ = listening.send(started.as_ref().map(|_| ()).map_err(Clone::clone));
    let rep = started?;
    loop {
        match jobs.try_recv() {
            Ok(job) => {
                let measured = echo::ping::measure(rep, job.target, job.count)
                    .await
                    .and_then(|(samples, ns)| {
                        Figures::from_samples(&samples, ns, (job.count * 4) as u64)
                    });
                let _ = job.answer.send(measured);
            }
            // The main thread's requests come over a std channel: looked at
            // every 2 ms, outside every measurement.
            Err(TryRecvError::Empty) => ebb_event::sleep(Duration::from_millis(2)).await,
            Err(TryRecvError::Disconnected) => return Ok(()),
        }
    }
}

/// Waits for `node`'s console to hold a finished ping run.
fn wait_for_ping(node: &NodeHandle) -> Result<Figures, String> {
    let deadline = Instant::now() + PING_LIMIT;
    loop {
        let text = std::fs::read_to_string(node.console_log()).unwrap_or_default();
        if text.contains("echo: error:") {
            return Err(format!(
                "node {} failed:\n{}",
                node.id(),
                node.console_tail(20)
            ));
        }
        if let Ok(figures) = parse_console(&text) {
            return Ok(figures);
        }
        if node.state().is_over() || Instant::now() >= deadline {
            return Err(format!(
                "node {} did not finish its round trips:\n{}",
                node.id(),
                node.console_tail(20)
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run(plan: &Plan) -> Result<(), String> {
    ebb_testbed::require(&[Need::Root, Need::Tun, Need::Ip, Need::Qemu])
        .map_err(|why| format!("needs root and QEMU for the cluster network ({why})"))?;
    let stopped = stop_on_signals();
    let began = Instant::now();
    let load_start = load_average();
    let root = workspace_root();
    println!("messenger: building echo's native image...");
    let (command_line, kvm) = echo_image(&root)?;
    let network = ClusterNetwork::create("mbench", AddressPlan::default_plan())?;
    let namespace = network.namespace().name().to_owned();
    let frontend = SocketAddrV4::new(network.frontend(), MESSENGER_PORT);
    let registry = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
    let contract = Arc::new(MessengerContract::new(
        Arc::clone(&registry),
        IDS_PER_NODE,
        MESSENGER_PORT,
    ));
    let logs = root.join("target/bench/messenger-logs");
    let allocator = NodeAllocator::new(
        network,
        QemuLauncher::new(command_line),
        Announced::new(Arc::clone(&registry)),
        &logs,
    )
    .map_err(|e| e.to_string())?
    .with_boot_contract(Arc::clone(&contract));
    let (jobs, queue) = mpsc::channel();
    let frontend_thread = start_frontend(
        namespace,
        Arc::clone(&registry),
        SocketAddr::V4(frontend),
        queue,
    )?;
    let spec = |args: Vec<String>| NodeSpec {
        image: native::image_path(&root, "echo"),
        cores: 1,
        memory: "256M".to_owned(),
        args,
    };

    // 1. allocate() to the announcement.
    println!(
        "messenger: {} allocations to the handshake...",
        plan.allocations + 1
    );
    let mut allocate = Vec::new();
    for run in 0..=plan.allocations {
        stopped()?;
        let started = Instant::now();
        let node = allocator
            .allocate(spec(Vec::new()))
            .map_err(|e| e.to_string())?;
        if run > 0 {
            allocate.push(millis(started));
        }
        let _ = node.stop();
        let _ = node.wait_for_end(Duration::from_secs(10));
    }

    // 2–4, in rounds: the frontend, a native node and a Linux guest,
    // each against its own target.
    stopped()?;
    let target_node = allocator
        .allocate(spec(Vec::new()))
        .map_err(|e| e.to_string())?;
    let ids = contract
        .range(target_node.id())
        .ok_or("the target node has no id range")?;
    let target = echo::ping::Target {
        node: target_node.id(),
        ebb: EbbId::new(ids.start).map_err(|e| e.to_string())?,
        tcp: SocketAddr::from((target_node.address(), echo::DEFAULT_PORT)),
    };
    println!("messenger: booting the Linux target...");
    let linux_pair = LinuxPair::start(&root, &allocator, &contract, &registry, kvm)?;
    let (mut hosted, mut native_figures, mut linux) =
        (Figures::default(), Figures::default(), Figures::default());
    for round in 0..plan.rounds {
        stopped()?;
        println!(
            "messenger: round {} of {}: {} round trips of each kind, hosted to native...",
            round + 1,
            plan.rounds,
            plan.count
        );
        let (answer, answered) = mpsc::channel();
        jobs.send(Measure {
            target,
            count: plan.count,
            answer,
        })
        .map_err(|_| "the frontend ended")?;
        hosted.merge(
            answered
                .recv_timeout(PING_LIMIT)
                .map_err(|_| "the frontend did not finish its round trips")??,
        );

        stopped()?;
        println!("messenger: ... native to native...");
        let pinger = allocator
            .allocate(spec(vec![
                format!("--ping-node={}", target.node.0),
                format!("--ping-ebb={}", ids.start),
                format!("--ping-tcp={}", target.tcp),
                format!("--ping-count={}", plan.count),
            ]))
            .map_err(|e| e.to_string())?;
        native_figures.merge(wait_for_ping(&pinger)?);
        let _ = pinger.stop();
        let _ = pinger.wait_for_end(Duration::from_secs(10));

        stopped()?;
        println!("messenger: ... Linux guest to Linux guest...");
        linux.merge(linux_pair.ping(round, plan.count)?);
    }
    drop(linux_pair);
    let _ = target_node.stop();
    drop(jobs);
    drop(allocator);
    let _ = frontend_thread.join();

    let how = format!(
        "q35, {}, 1 vCPU and 256 MiB per node, on the cluster bridge",
        if kvm { "KVM" } else { "TCG" }
    );
    let mut report = report_with_load("messenger", if kvm { "kvm" } else { "tcg" }, load_start);
    add_path(&mut report, "native", "native to native", &native_figures);
    add_path(
        &mut report,
        "hosted_native",
        "hosted frontend to native",
        &hosted,
    );
    add_path(
        &mut report,
        "linux",
        "between two Linux guests (echo's hosted build)",
        &linux,
    );
    add_ratios(&mut report);
    add_linux_ratio(&mut report);
    report
        .metric(
            "allocate_ms",
            median(&mut allocate.clone()),
            "ms",
            format!(
                "allocate() to the node's Messenger announcement, median of {}; {how} (target <= 300)",
                plan.allocations
            ),
        )
        .metric(
            "allocate_ms_min",
            minimum(&allocate),
            "ms",
            "fastest of the same runs",
        )
        .metric(
            "wall_s",
            began.elapsed().as_secs_f64(),
            "s",
            "the whole benchmark, builds included",
        )
        .command(format!(
            "./ebb bench messenger{}",
            if plan.count < 1000 { " -- --quick" } else { "" }
        ));
    let curve = |label: &str, color: &str, ns: &[u64]| Curve {
        label: label.to_owned(),
        color: color.to_owned(),
        points: cdf_points(&ns.iter().map(|&n| n as f64 / 1e3).collect::<Vec<_>>()),
    };
    let svg = cdf_svg(
        "64-byte round trips",
        &[
            curve(
                "Messenger native to native",
                "#1f77b4",
                &native_figures.messenger_ns,
            ),
            curve("TCP native to native", "#aec7e8", &native_figures.tcp_ns),
            curve(
                "Messenger hosted to native",
                "#d62728",
                &hosted.messenger_ns,
            ),
            curve("TCP hosted to native", "#ff9896", &hosted.tcp_ns),
            curve("TCP Linux guest to Linux guest", "#2ca02c", &linux.tcp_ns),
        ],
    );
    let plot = output_dir().join("messenger.svg");
    std::fs::create_dir_all(output_dir()).map_err(|e| e.to_string())?;
    std::fs::write(&plot, svg).map_err(|e| format!("writing {}: {e}", plot.display()))?;
    let path = report.finish()?;
    println!("wrote {} and {}", path.display(), plot.display());
    Ok(())
}

/// Two Linux guests on the cluster's bridge, each running echo's hosted
/// build as a node (the boot contract in `EBB_NODE`): a target, started
/// once, and in each round a new pinger (`--ping-node` against the
/// target) whose samples are read from its console.
struct LinuxPair<'a> {
    allocator: &'a NodeAllocator,
    contract: &'a MessengerContract,
    image: ebb_testbed::linux_guest::GuestImage,
    program: std::path::PathBuf,
    settings: ebb_testbed::linux_guest::GuestSettings,
    target: NodeId,
    target_ebb: u32,
    target_tcp: SocketAddr,
    _target_guest: ebb_testbed::linux_guest::ReadyGuest,
}

impl<'a> LinuxPair<'a> {
    /// Boots the target (node [`LINUX_TARGET`]) and waits for its
    /// announcement.
    fn start(
        root: &std::path::Path,
        allocator: &'a NodeAllocator,
        contract: &'a MessengerContract,
        registry: &Frontend,
        kvm: bool,
    ) -> Result<Self, String> {
        use ebb_cluster::BootContract;
        use ebb_testbed::linux_guest::{self, GuestService, GuestSettings};
        let program = ebb_bench::vm::build_hosted(root, "echo")?;
        let image = linux_guest::build_or_reuse(&linux_guest::default_cache_dir(), false)?.image;
        let settings = GuestSettings {
            service: GuestService::Program {
                port: echo::DEFAULT_PORT,
            },
            accel: if kvm { "kvm" } else { "tcg" }.to_owned(),
            ready_limit: Duration::from_secs(120),
            timeout_secs: 900,
            ..GuestSettings::default()
        };
        let network = allocator.network();
        let target = NodeId(LINUX_TARGET);
        let link = network.add_node(target.0)?;
        let words = contract.boot_args(target, &link)?;
        let ids = contract
            .range(target)
            .ok_or("the Linux target has no id range")?;
        let target_image = linux_guest::with_program(
            &image,
            "mbench-target",
            &program,
            &start_script(&words, &[]),
        )?;
        let target_guest =
            linux_guest::boot_on_link(&target_image, &settings, network.namespace(), &link)?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while registry.announced(target).is_none() {
            if Instant::now() >= deadline {
                return Err("the Linux target did not announce itself within 60 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(LinuxPair {
            allocator,
            contract,
            image,
            program,
            settings,
            target,
            target_ebb: ids.start,
            target_tcp: SocketAddr::from((link.address, echo::DEFAULT_PORT)),
            _target_guest: target_guest,
        })
    }

    /// Boots round `round`'s pinger (node [`LINUX_TARGET`] + 1 + `round`)
    /// and returns its figures once it is done; stops it.
    fn ping(&self, round: usize, count: usize) -> Result<Figures, String> {
        use ebb_cluster::BootContract;
        use ebb_testbed::linux_guest;
        let network = self.allocator.network();
        let pinger = NodeId(LINUX_TARGET + 1 + u32::try_from(round).map_err(|e| e.to_string())?);
        let link = network.add_node(pinger.0)?;
        let words = self.contract.boot_args(pinger, &link)?;
        let ping = [
            format!("--ping-node={}", self.target.0),
            format!("--ping-ebb={}", self.target_ebb),
            format!("--ping-tcp={}", self.target_tcp),
            format!("--ping-count={count}"),
        ];
        let image = linux_guest::with_program(
            &self.image,
            "mbench-pinger",
            &self.program,
            &start_script(&words, &ping),
        )?;
        let figures = linux_guest::boot_on_link(&image, &self.settings, network.namespace(), &link)
            .and_then(|mut guest| {
                guest.qemu.wait_for("echo: ping done", PING_LIMIT)?;
                // The line that woke us is kept before it is sent.
                parse_console(&guest.qemu.serial_tail(400))
            });
        network.remove_node(pinger.0);
        figures
    }
}

/// The Linux guest's start script for echo's hosted build as a node
/// (`words`: its boot contract) with `args`.
fn start_script(words: &[String], args: &[String]) -> String {
    use ebb_testbed::linux_guest::PROGRAM_BINARY;
    let port = echo::DEFAULT_PORT;
    // `exec`: echo is the script's process, whose exit `/init` reports.
    format!(
        "#!/bin/sh\n# Written by ./ebb bench messenger: echo's hosted build as a Messenger node.\n\
         export EBB_NODE='{}'\n\
         exec /{PROGRAM_BINARY} --cores 1 --no-pin --listen 0.0.0.0 --tcp-port {port} --udp-port {port} {}\n",
        words.join(" "),
        args.join(" ")
    )
}

/// `linux_ratio`: the Messenger's native round trip over Linux's TCP
/// ping-pong between two Linux guests (target <= 0.5).
fn add_linux_ratio(report: &mut Report) {
    if let (Some(native), Some(linux)) = (
        report.value("rtt_us_native_median"),
        report.value("rtt_us_raw_linux_median"),
    ) {
        report.metric(
            "linux_ratio",
            native / linux,
            "",
            "rtt_us_native_median / rtt_us_raw_linux_median (target <= 0.5)",
        );
    }
}

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "bench-messenger",
    about = "./ebb bench messenger: Messenger round trips, calls/s and goodput against plain TCP, and allocate() to the handshake (root)"
)]
struct Args {
    /// One round of 200 round trips of each kind and 3 allocations instead
    /// of 3 rounds of 1000 and 10.
    #[arg(long)]
    quick: bool,
}

fn main() -> ExitCode {
    let args = <Args as clap::Parser>::parse();
    let plan = if args.quick {
        Plan {
            count: 200,
            rounds: 1,
            allocations: 3,
        }
    } else {
        Plan {
            count: 1000,
            rounds: 3,
            allocations: 10,
        }
    };
    exit_code("messenger", run(&plan))
}
