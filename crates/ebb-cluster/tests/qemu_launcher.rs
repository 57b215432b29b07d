//! `QemuLauncher` against real QEMU (root, /dev/net/tun, `ip`, QEMU;
//! skipped otherwise), without a guest image: with `-S` the machine waits
//! in `prelaunch`, which is enough to drive it over QMP. Its NIC is on the
//! node's TAP device in the cluster's namespace. Shows: status and vCPU
//! thread ids over QMP, an orderly stop, and QEMU dying with the thread
//! that started it (PR_SET_PDEATHSIG: what ends the nodes when the
//! frontend is killed), then nothing left.

use std::process::Command;
use std::time::{Duration, Instant};

use ebb_cluster::{
    ClusterError, Exit, LaunchSpec, NodeAllocator, NodeSpec, NodeState, NotReady, QemuCommandLine,
    QemuLauncher, Readiness, ReadyProbe,
};
use ebb_testbed::cluster_net::{AddressPlan, ClusterNetwork};
use ebb_testbed::{netns, skip_unless, Need};

/// QEMU with no guest, stopped before its first instruction.
struct Prelaunch;

impl QemuCommandLine for Prelaunch {
    fn command(&self, spec: &LaunchSpec) -> Result<Command, String> {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &spec.namespace, ebb_testbed::qemu::QEMU])
            .args(["-machine", "q35", "-accel", "tcg", "-S", "-display", "none"])
            .args(["-nodefaults", "-no-user-config"])
            .args([
                "-smp",
                &spec.node.cores.to_string(),
                "-m",
                &spec.node.memory,
            ])
            .args([
                "-netdev",
                &format!(
                    "tap,id=net0,ifname={},script=no,downscript=no",
                    spec.link.tap
                ),
                "-device",
                &format!("virtio-net-pci,netdev=net0,mac={}", spec.link.mac),
            ]);
        Ok(command)
    }
}

/// QEMU booting the spec's image (a missing one, in the test).
struct Kernel;

impl QemuCommandLine for Kernel {
    fn command(&self, spec: &LaunchSpec) -> Result<Command, String> {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &spec.namespace, ebb_testbed::qemu::QEMU])
            .args(["-machine", "q35", "-accel", "tcg", "-display", "none"])
            .args(["-nodefaults", "-no-user-config", "-m", &spec.node.memory])
            .arg("-kernel")
            .arg(&spec.node.image);
        Ok(command)
    }
}

/// Ready as soon as it runs (there is no guest to say more).
struct Started;

impl Readiness for Started {
    fn awaited(&self) -> String {
        "QEMU to start".to_owned()
    }
    fn wait_ready(&self, node: &ReadyProbe<'_>, _: Instant) -> Result<(), NotReady> {
        if (node.ended)() {
            Err(NotReady::Ended)
        } else {
            Ok(())
        }
    }
}

fn spec(cores: usize) -> NodeSpec {
    NodeSpec {
        image: "/none".into(),
        cores,
        memory: "64M".to_owned(),
        args: Vec::new(),
    }
}

#[test]
fn qemu_nodes_are_driven_over_qmp_stop_in_order_and_die_with_their_thread() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    let logs = std::env::temp_dir().join(format!("ebb-cluster-qemu-{}", std::process::id()));
    let (namespace, pids);
    {
        let network = ClusterNetwork::create("qemu", AddressPlan::default_plan()).expect("network");
        namespace = network.namespace().name().to_owned();
        let allocator = NodeAllocator::new(network, QemuLauncher::new(Prelaunch), Started, &logs)
            .expect("allocator");
        let node = allocator.allocate(spec(2)).expect("node 1");
        assert_eq!(node.status().as_deref(), Ok("prelaunch"));
        let threads = node.vcpu_threads().expect("vCPU threads");
        assert_eq!(threads.len(), 2, "{threads:?}");
        for thread in &threads {
            let task = format!("/proc/{}/task/{thread}", node.pid());
            assert!(std::path::Path::new(&task).exists(), "{task}");
        }
        // The NIC is on the node's TAP device, a port of the bridge.
        let tap = allocator
            .network()
            .namespace()
            .ip(&["-o", "link", "show", "ebbtap1"])
            .expect("tap");
        assert!(tap.contains("master ebbbr0"), "{tap}");

        // Started on a thread that then ends: QEMU gets SIGKILL with it.
        let orphan = std::thread::scope(|scope| {
            scope
                .spawn(|| allocator.allocate(spec(1)).expect("node 2"))
                .join()
                .expect("thread")
        });
        assert_eq!(
            orphan.wait_for_end(Duration::from_secs(20)),
            Some(NodeState::Lost(Exit::Signal(9)))
        );

        node.stop().expect("QMP quit");
        assert_eq!(
            node.wait_for_end(Duration::from_secs(20)),
            Some(NodeState::Stopped)
        );
        let third = allocator.allocate(spec(1)).expect("node 3");
        pids = [node.pid(), orphan.pid(), third.pid()];
        // Dropping the allocator stops node 3 and deletes the namespace.
    }
    assert!(!netns::exists(&namespace), "{namespace} is gone");
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "QEMU {pid} is gone"
        );
    }
    let _ = std::fs::remove_dir_all(&logs);
}

#[test]
fn a_wrong_image_is_a_launch_error_with_qemus_words() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    let logs = std::env::temp_dir().join(format!("ebb-cluster-image-{}", std::process::id()));
    let network = ClusterNetwork::create("image", AddressPlan::default_plan()).expect("network");
    let allocator =
        NodeAllocator::new(network, QemuLauncher::new(Kernel), Started, &logs).expect("allocator");
    let err = allocator
        .allocate(NodeSpec {
            image: "/nonexistent/ebb-image".into(),
            ..spec(1)
        })
        .expect_err("no image");
    let ClusterError::Launch { id, reason } = &err else {
        panic!("{err}");
    };
    assert_eq!(id.0, 1);
    assert!(
        reason.starts_with("QEMU exited at once (its VM exited with status 1)")
            && reason.contains("/nonexistent/ebb-image"),
        "{reason}"
    );
    // Its TAP device is gone again; nothing else was started.
    assert!(allocator.nodes().is_empty());
    let links = allocator
        .network()
        .namespace()
        .ip(&["-o", "link"])
        .expect("links");
    assert!(!links.contains("ebbtap1"), "{links}");
    drop(allocator);
    let _ = std::fs::remove_dir_all(&logs);
}
