//! The testbed against the real thing: a namespace with a TAP device, a
//! bridge and a veth pair to a second namespace, all gone after drop (root,
//! /dev/net/tun); QEMU driven over QMP (qemu-system-x86_64); and the skip
//! policy, run in a child copy of this binary with prerequisites pretended
//! missing.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use ebb_testbed::cluster_net::{AddressPlan, ClusterNetwork, BRIDGE, FRONTEND_IF};
use ebb_testbed::link::{Bridge, VethPair};
use ebb_testbed::netns::{self, NetNamespace};
use ebb_testbed::qemu::qmp::{qmp_args, Qmp};
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{skip_unless, Need};

#[test]
fn namespaces_taps_bridges_and_veths_are_made_and_leave_nothing_behind() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let (first, second);
    {
        let a = NetNamespace::for_this_process("tb").expect("namespace");
        let b = NetNamespace::for_this_process("tb").expect("second namespace");
        first = a.name().to_owned();
        second = b.name().to_owned();
        let tap = TapDevice::create(
            &a,
            &TapConfig::new("tbtap0", Ipv4Addr::new(10, 97, 0, 1), 24)
                .with_guest(Ipv4Addr::new(10, 97, 0, 2), "52:54:00:eb:97:02"),
        )
        .expect("tap");
        let bridge = Bridge::create(&a, "tbbr0").expect("bridge");
        let veth = VethPair::create(&a, "tbv0", &b, "tbv1").expect("veth");
        bridge.attach(veth.name()).expect("attach");
        let links = a
            .ip(&["-o", "link", "show", "master", "tbbr0"])
            .expect("links");
        assert!(links.contains("tbv0"), "{links}");
        assert!(b.ip(&["-o", "link", "show", "tbv1"]).is_ok());
        let addr = a
            .ip(&["-o", "addr", "show", "dev", tap.ifname()])
            .expect("addr");
        assert!(addr.contains("10.97.0.1/24"), "{addr}");
        // A socket bound on the TAP's address exists only inside.
        let host = tap.host();
        let bound = a
            .run_inside(move || std::net::TcpListener::bind((host, 0)).is_ok())
            .expect("inside");
        assert!(bound);
        assert_eq!(
            std::net::TcpListener::bind((host, 0))
                .map_err(|e| e.kind())
                .err(),
            Some(std::io::ErrorKind::AddrNotAvailable),
            "the TAP's address is bindable outside its namespace"
        );
        drop(veth);
        assert!(b.ip(&["-o", "link", "show", "tbv1"]).is_err(), "veth gone");
    }
    assert!(!netns::exists(&first) && !netns::exists(&second));
}

#[test]
fn a_cluster_network_joins_frontend_and_nodes_in_its_namespace_and_leaves_nothing() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let (name, inode);
    {
        let plan = AddressPlan::default_plan();
        let network = ClusterNetwork::create("tbcluster", plan).expect("cluster network");
        name = network.namespace().name().to_owned();
        inode = netns::inode(&name).expect("the namespace's inode");
        let one = network.add_node(1).expect("node 1");
        let two = network.add_node(2).expect("node 2");
        assert_eq!(
            (one.address, two.address),
            (plan.node(1).unwrap(), plan.node(2).unwrap())
        );
        let err = network.add_node(2).expect_err("twice");
        assert!(err.contains("already on the cluster's network"), "{err}");
        let ports = network
            .namespace()
            .ip(&["-o", "link", "show", "master", BRIDGE])
            .expect("bridge ports");
        for port in ["ebbtap1", "ebbtap2", "ebbfe0p"] {
            assert!(ports.contains(port), "{port} on the bridge: {ports}");
        }
        let addr = network
            .namespace()
            .ip(&["-o", "addr", "show", "dev", FRONTEND_IF])
            .expect("frontend address");
        assert!(addr.contains("10.96.0.1/24"), "{addr}");
        let neigh = network
            .namespace()
            .ip(&["neigh", "show", "dev", FRONTEND_IF])
            .expect("neigh");
        assert!(
            neigh.contains("10.96.0.3 lladdr 52:54:00:eb:00:02 PERMANENT"),
            "{neigh}"
        );
        // The frontend's address exists only inside the namespace (unless
        // the host has it itself: on a Kubernetes node with IPVS, 10.96.0.1
        // is the API service's address, bound on kube-ipvs0).
        let frontend = network.frontend();
        let bound = network
            .namespace()
            .run_inside(move || std::net::TcpListener::bind((frontend, 0)).is_ok())
            .expect("inside");
        assert!(bound);
        let host = netns::ip(&["-o", "addr", "show"]).expect("host addresses");
        if host.contains(&format!(" {frontend}/")) {
            eprintln!(
                "SKIPPED (in part): testbed::a_cluster_network: the host has {frontend} itself, \
                 so it cannot show that the address is the namespace's alone"
            );
        } else {
            assert_eq!(
                std::net::TcpListener::bind((frontend, 0))
                    .map_err(|e| e.kind())
                    .err(),
                Some(std::io::ErrorKind::AddrNotAvailable)
            );
        }
        network.remove_node(1);
        let ports = network
            .namespace()
            .ip(&["-o", "link", "show", "master", BRIDGE])
            .expect("ports");
        assert!(
            !ports.contains("ebbtap1") && ports.contains("ebbtap2"),
            "{ports}"
        );
    }
    // The bridge, veth pair and TAP devices (seen on the bridge above)
    // lived in the namespace alone: they are gone when the namespace is,
    // that is when its name is deleted and no process is left in it.
    assert!(!netns::exists(&name), "{name} is gone");
    assert_eq!(netns::holders(inode), Vec::<u32>::new(), "in {name}");
}

#[test]
fn qemu_is_driven_over_qmp_from_prelaunch_to_running_to_quit() {
    skip_unless!(Need::Qemu);
    let dir = std::env::temp_dir().join(format!("ebb-testbed-qmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let socket = dir.join("qmp.sock");
    // No guest image: with -S the machine waits in "prelaunch" for `cont`.
    let mut qemu = Command::new("timeout")
        .args(["60", ebb_testbed::qemu::QEMU])
        .args(["-machine", "q35", "-accel", "tcg", "-m", "64M", "-S"])
        .args(["-smp", "2"])
        .args(["-display", "none", "-nodefaults", "-no-user-config"])
        .args(qmp_args(&socket))
        .stdin(Stdio::null())
        .spawn()
        .expect("start QEMU");
    let mut qmp = Qmp::connect(&socket, Duration::from_secs(30)).expect("QMP");
    assert!(!qmp.version.is_empty());
    assert_eq!(qmp.query_status().expect("status"), "prelaunch");
    qmp.cont().expect("cont");
    assert_eq!(qmp.query_status().expect("status"), "running");
    // One host thread per vCPU (multi-threaded TCG), each a task of QEMU.
    let threads = qmp.vcpu_threads().expect("query-cpus-fast");
    assert_eq!(threads.len(), 2, "{threads:?}");
    let pid = ebb_testbed::qemu::find_qemu(qemu.id(), 1).expect("QEMU under timeout");
    for thread in threads {
        let task = format!("/proc/{pid}/task/{thread}");
        assert!(std::path::Path::new(&task).exists(), "{task}");
    }
    let err = qmp.execute("no-such-command", None).expect_err("unknown");
    assert!(err.contains("CommandNotFound"), "{err}");
    qmp.quit().expect("quit");
    let status = qemu.wait().expect("wait");
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Run only as a child of [`missing_prerequisites_are_skipped_and_recorded`].
#[test]
fn child_needing_tun_and_qemu() {
    if std::env::var_os("EBB_TESTBED_CHILD").is_none() {
        return;
    }
    skip_unless!(Need::Tun, Need::Qemu);
    panic!("not skipped");
}

/// Runs [`child_needing_tun_and_qemu`] in a copy of this binary with
/// `EBB_TESTBED_PRETEND_MISSING` and `CI` set as given; its output and the
/// skip file's text.
fn run_child(pretend: &str, ci: &str) -> (bool, String, String) {
    let skips: PathBuf =
        std::env::temp_dir().join(format!("ebb-testbed-skips-{}-{ci}.txt", std::process::id()));
    let _ = std::fs::remove_file(&skips);
    let out = Command::new(std::env::current_exe().expect("this binary"))
        .args(["--exact", "child_needing_tun_and_qemu", "--test-threads=1"])
        .env("EBB_TESTBED_CHILD", "1")
        .env("EBB_TESTBED_PRETEND_MISSING", pretend)
        .env("EBB_TEST_SKIPS", &skips)
        .env("CI", ci)
        .output()
        .expect("run the child");
    let text = std::fs::read_to_string(&skips).unwrap_or_default();
    let _ = std::fs::remove_file(&skips);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        text,
    )
}

#[test]
fn missing_prerequisites_are_skipped_and_recorded_and_ci_fails_on_installable_ones() {
    let (passed, output, skips) = run_child("tun,qemu", "");
    assert!(passed, "{output}");
    let reason = "no /dev/net/tun (pretended by EBB_TESTBED_PRETEND_MISSING), \
                  no qemu-system-x86_64 (Debian package qemu-system-x86) (pretended by EBB_TESTBED_PRETEND_MISSING)";
    assert!(
        output.contains(&format!(
            "SKIPPED: testbed::child_needing_tun_and_qemu: {reason}"
        )),
        "{output}"
    );
    assert_eq!(
        ebb_testbed::need::read_skips(&skips),
        [(
            "testbed::child_needing_tun_and_qemu".to_owned(),
            reason.to_owned()
        )]
    );
    // Under CI a missing QEMU (which ./ebb installs) fails the test...
    let (passed, output, skips) = run_child("tun,qemu", "true");
    assert!(!passed, "{output}");
    assert!(
        output.contains("CI=true and a prerequisite ./ebb installs is missing"),
        "{output}"
    );
    assert!(skips.is_empty());
    // ...while a missing /dev/net/tun (which it cannot provide) still skips.
    let (passed, output, skips) = run_child("tun", "true");
    if passed {
        assert_eq!(ebb_testbed::need::read_skips(&skips).len(), 1, "{output}");
    } else {
        // QEMU is really missing here: CI fails, as it should.
        assert!(output.contains("qemu-system-x86_64"), "{output}");
    }
}
