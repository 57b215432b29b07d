//! `./ebb bench cluster`: how long the NodeAllocator takes to give the
//! frontend a ready native node (needs root: the cluster network).
//!
//! * `allocate_ms`: `NodeAllocator::allocate` of one echo node, from the
//!   call to its return: the node's TAP device, QEMU's start and QMP
//!   connection, the boot, and readiness. Readiness is the console line
//!   `echo: ready:` until the Messenger's announcement takes its place
//!   (issue 16's `allocate_ms` is to the handshake); median of 10, after
//!   one unmeasured node. The node is stopped (QMP `quit`) between runs.
//! * `allocate_3_ms`: `allocate_all` of three nodes side by side, to the
//!   last one ready; median of 5.
//!
//! q35, TCG (unless the CPU has vmx/svm), 1 vCPU and 256 MiB per node, as
//! `./ebb cluster up` boots them. The minimum is reported too: the machine
//! is shared, and a busy host slows TCG guests down a lot.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ebb_bench::cluster::{echo_image, stop_on_signals};
use ebb_bench::report::{exit_code, median, minimum, workspace_root, Report};
use ebb_cli::native;
use ebb_cluster::{ConsoleLine, NodeAllocator, NodeSpec, QemuLauncher};
use ebb_testbed::cluster_net::{AddressPlan, ClusterNetwork};
use ebb_testbed::Need;

const RUNS: usize = 10;
const SIDE_BY_SIDE_RUNS: usize = 5;

fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn run() -> Result<(), String> {
    ebb_testbed::require(&[Need::Root, Need::Tun, Need::Ip, Need::Qemu])
        .map_err(|why| format!("needs root and QEMU for the cluster network ({why})"))?;
    let stopped = stop_on_signals();
    let root = workspace_root();
    let (command_line, kvm) = echo_image(&root)?;
    let network = ClusterNetwork::create("bench", AddressPlan::default_plan())?;
    let logs = root.join("target/bench/cluster-logs");
    let allocator = NodeAllocator::new(
        network,
        QemuLauncher::new(command_line),
        ConsoleLine::app_ready("echo"),
        &logs,
    )
    .map_err(|e| e.to_string())?;
    let spec = NodeSpec {
        image: native::image_path(&root, "echo"),
        cores: 1,
        memory: "256M".to_owned(),
        args: Vec::new(),
    };
    let stop_all = || {
        for node in allocator.nodes() {
            let _ = node.stop();
            let _ = node.wait_for_end(Duration::from_secs(10));
        }
    };

    let mut one = Vec::new();
    for run in 0..=RUNS {
        stopped()?;
        let started = Instant::now();
        allocator
            .allocate(spec.clone())
            .map_err(|e| e.to_string())?;
        if run > 0 {
            one.push(millis(started));
        }
        stop_all();
    }
    let mut three = Vec::new();
    for _ in 0..SIDE_BY_SIDE_RUNS {
        stopped()?;
        let started = Instant::now();
        for node in allocator.allocate_all(vec![spec.clone(); 3]) {
            node.map_err(|e| e.to_string())?;
        }
        three.push(millis(started));
        stop_all();
    }
    drop(allocator);

    let how = format!(
        "q35, {}, 1 vCPU, 256 MiB; to the console line `echo: ready:`",
        if kvm { "KVM" } else { "TCG" }
    );
    let mut report = Report::new("cluster");
    report
        .metric(
            "allocate_ms",
            median(&mut one.clone()),
            "ms",
            format!("median of {RUNS}; {how}"),
        )
        .metric(
            "allocate_ms_min",
            minimum(&one),
            "ms",
            "fastest of the same runs",
        )
        .metric(
            "allocate_3_ms",
            median(&mut three.clone()),
            "ms",
            format!("allocate_all of 3 nodes side by side, median of {SIDE_BY_SIDE_RUNS}; {how}"),
        )
        .metric(
            "allocate_3_ms_min",
            minimum(&three),
            "ms",
            "fastest of the same runs",
        )
        .label("accel", if kvm { "kvm" } else { "tcg" })
        .command("./ebb bench cluster");
    let path = report.finish()?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The command line: no options.
#[derive(clap::Parser)]
#[command(
    name = "bench-cluster",
    about = "./ebb bench cluster: NodeAllocator::allocate to a ready native node (root)"
)]
struct Args {}

fn main() -> ExitCode {
    <Args as clap::Parser>::parse();
    exit_code("cluster", run())
}
