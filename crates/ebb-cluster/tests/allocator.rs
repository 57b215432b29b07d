//! The allocator's life cycle with a stand-in launcher whose "VM" is a
//! shell process writing a console (root and `ip`: the cluster network is
//! real; skipped otherwise): nodes become ready side by side, a `kill -9`
//! makes one lost while the others stay ready and calls to it fail, a node
//! that never prints its line is killed with its console shown, one that
//! exits while booting says how, and nothing is left after drop.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use ebb_cluster::{
    BootContract, ClusterError, ConsoleLine, Exit, LaunchSpec, LaunchedNode, Launcher,
    NodeAllocator, NodeSpec, NodeState,
};
use ebb_testbed::cluster_net::{AddressPlan, ClusterNetwork, NodeLink};
use ebb_testbed::netns;
use ebb_testbed::{skip_unless, Need};

/// Runs `sh -c SCRIPT` with the console log as its stdout; the script is
/// the node's first application argument.
struct ShellLauncher;

struct ShellNode {
    pid: u32,
    child: Mutex<Option<Child>>,
    log: std::path::PathBuf,
}

impl Launcher for ShellLauncher {
    fn launch(&self, spec: &LaunchSpec) -> Result<Box<dyn LaunchedNode>, String> {
        let log = std::fs::File::create(&spec.console_log).map_err(|e| e.to_string())?;
        let child = Command::new("sh")
            .args(["-c", &spec.node.args[0]])
            .env("BOOT_ARGS", spec.boot_args.join(" "))
            .stdin(Stdio::null())
            .stdout(log)
            .spawn()
            .map_err(|e| e.to_string())?;
        Ok(Box::new(ShellNode {
            pid: child.id(),
            child: Mutex::new(Some(child)),
            log: spec.console_log.clone(),
        }))
    }
}

impl LaunchedNode for ShellNode {
    fn pid(&self) -> u32 {
        self.pid
    }
    fn console_log(&self) -> &Path {
        &self.log
    }
    fn stop(&self) -> Result<(), String> {
        kill("-TERM", self.pid);
        Ok(())
    }
    fn kill(&self) -> Result<(), String> {
        kill("-KILL", self.pid);
        Ok(())
    }
    fn status(&self) -> Result<String, String> {
        Ok("running".to_owned())
    }
    fn vcpu_threads(&self) -> Result<Vec<u32>, String> {
        Ok(vec![self.pid])
    }
    fn wait(&self) -> Exit {
        let child = self.child.lock().unwrap().take();
        Exit::from_status(child.expect("waited once").wait().expect("wait"))
    }
}

fn kill(signal: &str, pid: u32) {
    let _ = Command::new("kill")
        .args([signal, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

fn node(script: &str) -> NodeSpec {
    NodeSpec {
        image: "/nonexistent".into(),
        cores: 1,
        memory: "64M".to_owned(),
        args: vec![script.to_owned()],
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// An allocator of shell "VMs" ready on `fake: ready:` within `timeout`,
/// on a cluster network tagged `tag`; and its log directory.
fn shell_allocator(tag: &str, timeout: Duration) -> (NodeAllocator, std::path::PathBuf) {
    let logs = std::env::temp_dir().join(format!("ebb-cluster-{tag}-{}", std::process::id()));
    let network = ClusterNetwork::create(tag, AddressPlan::default_plan()).expect("network");
    let allocator = NodeAllocator::new(
        network,
        ShellLauncher,
        ConsoleLine::app_ready("fake"),
        &logs,
    )
    .expect("allocator")
    .with_ready_timeout(timeout);
    (allocator, logs)
}

#[test]
fn nodes_become_ready_a_killed_one_is_lost_and_nothing_is_left() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let (namespace, pids, logs);
    {
        let allocator;
        (allocator, logs) = shell_allocator("alloc", Duration::from_secs(30));
        namespace = allocator.network().namespace().name().to_owned();
        let ready = "echo booting; sleep 0.2; echo 'fake: ready: serving'; exec sleep 600";
        let nodes: Vec<_> = allocator
            .allocate_all(vec![node(ready), node(ready), node(ready)])
            .into_iter()
            .map(|node| node.expect("ready"))
            .collect();
        pids = nodes.iter().map(|n| n.pid()).collect::<Vec<_>>();
        let ids: Vec<u32> = nodes.iter().map(|n| n.id().0).collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(nodes[0].address().to_string(), "10.96.0.2");
        assert!(nodes.iter().all(|n| n.state() == NodeState::Ready));

        kill("-KILL", nodes[1].pid());
        assert_eq!(
            nodes[1].wait_for_end(Duration::from_secs(10)),
            Some(NodeState::Lost(Exit::Signal(9)))
        );
        assert_eq!(
            nodes[1].status(),
            Err(ClusterError::Lost {
                id: nodes[1].id(),
                exit: Exit::Signal(9)
            })
        );
        assert_eq!(nodes[0].state(), NodeState::Ready);
        assert_eq!(nodes[2].status().as_deref(), Ok("running"));
        // Its TAP device went with it.
        let ports = allocator
            .network()
            .namespace()
            .ip(&["-o", "link"])
            .expect("links");
        assert!(
            !ports.contains("ebbtap2") && ports.contains("ebbtap3"),
            "{ports}"
        );

        // Stopped on request: a stop, not a loss.
        nodes[2].stop().expect("stop");
        assert_eq!(
            nodes[2].wait_for_end(Duration::from_secs(10)),
            Some(NodeState::Stopped)
        );
        assert_eq!(
            nodes[2].kill(),
            Err(ClusterError::Stopped { id: nodes[2].id() })
        );
    }
    assert!(!netns::exists(&namespace), "{namespace} is gone");
    for pid in pids {
        assert!(!alive(pid), "process {pid} is gone");
    }
    let _ = std::fs::remove_dir_all(&logs);
}

#[test]
fn a_node_never_ready_is_killed_with_its_console_and_one_exiting_says_how() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let (allocator, logs) = shell_allocator("allocfail", Duration::from_secs(2));
    let silent = allocator
        .allocate(node("echo 'stuck in boot'; exec sleep 600"))
        .expect_err("never ready");
    let ClusterError::NeverReady {
        id, awaited, tail, ..
    } = &silent
    else {
        panic!("{silent}");
    };
    assert_eq!(id.0, 1);
    assert_eq!(awaited, "the console line \"fake: ready:\"");
    assert_eq!(tail, "stuck in boot");
    assert!(
        silent
            .to_string()
            .contains("did not become ready within 2 s"),
        "{silent}"
    );
    let stuck = &allocator.nodes()[0];
    assert_eq!(stuck.state(), NodeState::Stopped);
    assert!(!alive(stuck.pid()));

    let exits = allocator
        .allocate(node("echo 'no memory'; exit 3"))
        .expect_err("exits");
    assert_eq!(
        exits,
        ClusterError::ExitedWhileBooting {
            id: ebb_core::NodeId(2),
            exit: Exit::Code(3),
            tail: "no memory".to_owned()
        }
    );
    drop(allocator);
    let _ = std::fs::remove_dir_all(&logs);
}

/// Node 2 cannot be told anything; the others get their id and address.
struct Contract;

impl BootContract for Contract {
    fn boot_args(&self, id: ebb_core::NodeId, link: &NodeLink) -> Result<Vec<String>, String> {
        if id.0 == 2 {
            return Err("no id range left for node 2".to_owned());
        }
        Ok(vec![format!("node={id}"), format!("at={}", link.address)])
    }
}

#[test]
fn each_node_is_told_its_boot_contract_and_a_refused_one_does_not_start() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let (allocator, logs) = shell_allocator("contract", Duration::from_secs(30));
    let allocator = allocator.with_boot_contract(Contract);
    let told = "echo \"fake: ready: $BOOT_ARGS\"; exec sleep 600";
    let one = allocator.allocate(node(told)).expect("node 1");
    assert!(
        one.console_tail(1)
            .ends_with("fake: ready: node=1 at=10.96.0.2"),
        "{}",
        one.console_tail(5)
    );
    let refused = allocator.allocate(node(told)).expect_err("node 2");
    assert_eq!(
        refused,
        ClusterError::Launch {
            id: ebb_core::NodeId(2),
            reason: "no id range left for node 2".to_owned()
        }
    );
    let links = allocator
        .network()
        .namespace()
        .ip(&["-o", "link"])
        .expect("links");
    assert!(!links.contains("ebbtap2"), "{links}");
    assert_eq!(allocator.nodes().len(), 1);
    drop(allocator);
    let _ = std::fs::remove_dir_all(&logs);
}

#[test]
fn nodes_that_ignore_their_stop_share_one_grace_then_are_killed() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let grace = Duration::from_secs(3);
    let (allocator, logs) = shell_allocator("grace", Duration::from_secs(30));
    let allocator = allocator.with_stop_grace(grace);
    // The stand-in's stop is SIGTERM, which these ignore: each must be
    // killed once the grace is over.
    let stubborn = "trap '' TERM; echo 'fake: ready: serving'; while :; do sleep 1; done";
    let nodes: Vec<_> = allocator
        .allocate_all(vec![node(stubborn); 4])
        .into_iter()
        .map(|node| node.expect("ready"))
        .collect();
    let started = std::time::Instant::now();
    allocator.shutdown();
    let took = started.elapsed();
    for node in &nodes {
        // Killed by the allocator: stopped, not lost.
        assert_eq!(node.state(), NodeState::Stopped, "node {}", node.id());
        assert!(!alive(node.pid()), "node {} is left", node.id());
    }
    // One grace for all four, not one each (that would be 4 × 3 s): the
    // bound leaves a loaded machine two more graces.
    assert!(took < grace * 3, "shutdown took {took:?}");
    drop(allocator);
    let _ = std::fs::remove_dir_all(&logs);
}

/// [`ShellLauncher`], but each launch takes `delay` (a QEMU that starts
/// slowly on a loaded machine).
struct SlowLauncher {
    delay: Duration,
}

impl Launcher for SlowLauncher {
    fn launch(&self, spec: &LaunchSpec) -> Result<Box<dyn LaunchedNode>, String> {
        std::thread::sleep(self.delay);
        ShellLauncher.launch(spec)
    }
}

#[test]
fn shutdown_while_nodes_are_launched_ends_them_promptly_and_none_is_lost() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let logs = std::env::temp_dir().join(format!("ebb-cluster-allocslow-{}", std::process::id()));
    let network =
        ClusterNetwork::create("allocslow", AddressPlan::default_plan()).expect("network");
    let changes = std::sync::Arc::new(Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&changes);
    let allocator = NodeAllocator::new(
        network,
        SlowLauncher {
            delay: Duration::from_millis(300),
        },
        ConsoleLine::app_ready("fake"),
        &logs,
    )
    .expect("allocator")
    // Never reached: the nodes never print their line.
    .with_ready_timeout(Duration::from_secs(60))
    .on_state_change(move |node, state| seen.lock().unwrap().push((node.id().0, state)));
    let namespace = allocator.network().namespace().name().to_owned();
    let silent = "echo booting; exec sleep 600";
    let started = std::time::Instant::now();
    let results = std::thread::scope(|scope| {
        let allocating = scope.spawn(|| allocator.allocate_all(vec![node(silent); 6]));
        // Mid-launch: one or two nodes run, the others are not started yet.
        std::thread::sleep(Duration::from_millis(500));
        allocator.shutdown();
        allocating.join().expect("allocate_all")
    });
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "allocate_all took {took:?}");
    for result in &results {
        match result {
            Err(ClusterError::ShuttingDown | ClusterError::Stopped { .. }) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(
        results
            .iter()
            .any(|r| matches!(r, Err(ClusterError::ShuttingDown))),
        "{results:?}"
    );
    let pids: Vec<u32> = allocator.nodes().iter().map(|n| n.pid()).collect();
    drop(allocator);
    let changes = changes.lock().unwrap().clone();
    assert!(
        changes
            .iter()
            .all(|(_, state)| *state == NodeState::Stopped),
        "{changes:?}"
    );
    assert!(!netns::exists(&namespace), "{namespace} is gone");
    for pid in pids {
        assert!(!alive(pid), "process {pid} is gone");
    }
    let _ = std::fs::remove_dir_all(&logs);
}
