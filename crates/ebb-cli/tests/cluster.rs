//! `./ebb cluster` as a user runs it. Without root: a wrong application,
//! a `--share` that is not a directory and a missing prerequisite give
//! clear errors, and a relative `--share` is named relative to the
//! directory `./ebb` was run from (`EBB_CALLER_DIR`) or the CLI's own. With root, /dev/net/tun,
//! `ip` and QEMU (skipped otherwise): three native echo nodes in one
//! namespace all become ready and answer over TCP from the frontend's
//! address; `kill -9` of one QEMU makes that node lost while the others
//! stay ready and answering; `./ebb cluster add` has the running `up`
//! boot node 4, which becomes ready and answers (and `add` without a
//! cluster says none runs); `./ebb cluster down` stops the cluster, and
//! afterwards no namespace, bridge, TAP device or QEMU process of it is
//! left; a frontend killed with SIGKILL takes its QEMUs with it, and
//! `down` deletes the namespace it left; a Ctrl-C (or a closed
//! terminal's SIGHUP) reaches `up` alone, which stops its nodes in order;
//! a second `up` is refused while one runs; nodes whose application exits
//! while booting end `up` with their consoles shown; with `--etcd
//! HOST:PORT` (an etcd this test starts on 127.0.0.1), each node is
//! registered under `nodes/N` there, and once the frontend is killed with
//! SIGKILL the registrations expire with their leases. Everything runs under deadlines (TCG boots three guests side by
//! side in seconds here; the bounds are generous for a loaded machine).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ebb_testbed::lines::Lines;
use ebb_testbed::{skip_unless, Need};

mod native_support;
use native_support::{Group, EBB};

/// One cluster at a time: they share the checkout's state file.
static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The workspace root, canonical (the native build's flags name paths in
/// it: one spelling keeps the build cached).
fn root() -> PathBuf {
    std::fs::canonicalize(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .expect("workspace root")
}

fn ebb(args: &[&str]) -> Output {
    Command::new("timeout")
        .arg("120")
        .arg(EBB)
        .args(args)
        .env("EBB_ROOT", root())
        .stdin(Stdio::null())
        .output()
        .expect("run ebb-cli")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn a_wrong_application_and_a_missing_prerequisite_are_clear_errors() {
    let wrong = ebb(&["cluster", "up", "nope", "--nodes", "1"]);
    assert_eq!(wrong.status.code(), Some(2), "{}", text(&wrong));
    assert!(
        text(&wrong).contains("error: no application 'nope'; available: "),
        "{}",
        text(&wrong)
    );
    // Refused before anything else is checked or built.
    let share = ebb(&[
        "cluster",
        "up",
        "echo",
        "--nodes",
        "1",
        "--share",
        "/nonexistent/dir",
    ]);
    assert_eq!(share.status.code(), Some(1), "{}", text(&share));
    assert!(
        text(&share).contains(
            "--share /nonexistent/dir: not a directory (the FileSystem Ebb shares a directory \
             with the nodes)"
        ),
        "{}",
        text(&share)
    );
    // A relative --share is the caller's: relative to the directory ./ebb
    // was run from (EBB_CALLER_DIR), or to the CLI's own working directory.
    let relative_share = |caller_dir: Option<&str>, cwd: PathBuf| {
        let mut command = Command::new(EBB);
        command
            .args(["cluster", "up", "echo", "--nodes", "1", "--share", "rel"])
            .env("EBB_ROOT", root())
            .current_dir(cwd);
        match caller_dir {
            Some(dir) => command.env("EBB_CALLER_DIR", dir),
            None => command.env_remove("EBB_CALLER_DIR"),
        };
        text(&command.output().expect("run ebb-cli"))
    };
    for (caller_dir, cwd, named) in [
        (
            Some("/nonexistent/caller"),
            root(),
            "/nonexistent/caller/rel",
        ),
        (None, PathBuf::from("/"), "/rel"),
    ] {
        let said = relative_share(caller_dir, cwd);
        assert!(
            said.contains(&format!("--share {named}: not a directory")),
            "{said}"
        );
    }
    let not_root = Command::new(EBB)
        .args(["cluster", "up", "echo", "--nodes", "1"])
        .env("EBB_ROOT", root())
        .env(ebb_testbed::need::PRETEND_MISSING_ENV, "root")
        .output()
        .expect("run ebb-cli");
    assert_eq!(not_root.status.code(), Some(1), "{}", text(&not_root));
    let message = text(&not_root);
    assert!(
        message.contains("cannot run here (not root")
            && message
                .contains("creates a network namespace holding a bridge, one TAP device per node")
            && message.contains("run ./ebb as root"),
        "{message}"
    );
}

/// An echo round trip with node `address` from inside the namespace.
fn echoes(namespace: &str, address: &str) -> bool {
    let script = format!("exec 3<>/dev/tcp/{address}/7007 && printf ebbflow >&3 && head -c 7 <&3");
    Command::new("ip")
        .args([
            "netns", "exec", namespace, "timeout", "20", "bash", "-c", &script,
        ])
        .output()
        .is_ok_and(|out| out.stdout == b"ebbflow")
}

/// The `ps` table's state of node `id`.
fn state_of(ps: &str, id: u32) -> String {
    ps.lines()
        .find(|line| line.split_whitespace().next() == Some(&id.to_string()))
        .map(|line| {
            line.split_whitespace()
                .skip(4)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Starts `./ebb cluster up echo --nodes N` (its stderr joined to its
/// stdout) and reads its output until all nodes are ready; the process,
/// its output, the namespace, and its inode (for [`assert_nothing_left`]),
/// after checking that the cluster's devices are in it.
fn start_echo_cluster(nodes: u16) -> (Group, Lines, String, u64) {
    start_echo_cluster_with(nodes, &[])
}

/// [`start_echo_cluster`] with more options for `up`.
fn start_echo_cluster_with(nodes: u16, options: &[&str]) -> (Group, Lines, String, u64) {
    let mut child = Command::new("sh")
        .args([
            "-c",
            "exec \"$0\" \"$@\" 2>&1",
            EBB,
            "cluster",
            "up",
            "echo",
        ])
        .args(["--ready-timeout", "120", "--nodes", &nodes.to_string()])
        .args(options)
        .env("EBB_ROOT", root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start ebb cluster up");
    let stdout = child.stdout.take().expect("stdout");
    let up = Group(child);
    let mut output = Lines::spawn(stdout, None);
    // The build may be cold; booting itself is bounded by --ready-timeout.
    if let Err(e) = output.wait_for("ebb: all nodes are ready", Duration::from_secs(600)) {
        panic!("the cluster did not come up: {e}");
    }
    let namespace = output
        .text()
        .split("network namespace ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("up names its namespace")
        .to_owned();
    let inode = ebb_testbed::netns::inode(&namespace).expect("the namespace exists");
    let links = ebb_testbed::netns::ip(&["-n", &namespace, "-o", "link"]).expect("ip link");
    let taps = (1..=nodes).map(|id| format!("ebbtap{id}"));
    for device in ["ebbbr0", "ebbfe0"]
        .map(str::to_owned)
        .into_iter()
        .chain(taps)
    {
        assert!(links.contains(&device), "{device} in {namespace}:\n{links}");
    }
    (up, output, namespace, inode)
}

/// What a cluster leaves when it is gone: nothing. Its namespace is
/// deleted and no process is left in it (`inode`, when known: a namespace
/// lives on, with the bridge, veth and TAP devices that were only ever in
/// it, while a process holds it), no QEMU process and no state file.
fn assert_nothing_left(namespace: &str, inode: Option<u64>, qemu_pids: &[u32]) {
    let namespaces = ebb_testbed::netns::ip(&["netns", "list"]).expect("ip netns");
    assert!(!namespaces.contains(namespace), "{namespaces}");
    if let Some(inode) = inode {
        let holders = ebb_testbed::netns::holders(inode);
        assert!(holders.is_empty(), "{holders:?} are still in {namespace}");
    }
    for pid in qemu_pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "QEMU {pid} is left"
        );
    }
    assert!(!root().join("target/cluster/state").exists());
    let ps = text(&ebb(&["cluster", "ps"]));
    assert!(ps.contains("no cluster is running"), "{ps}");
}

/// The QEMU process ids in the state file, in node order.
fn qemu_pids() -> Vec<u32> {
    let state = std::fs::read_to_string(root().join("target/cluster/state")).expect("state file");
    state
        .lines()
        .filter(|line| line.starts_with("node\t"))
        // node ID ADDRESS CORES MEMORY STATE QEMU-PID QEMU-START QMP-SOCKET
        .map(|line| line.split('\t').nth(6).unwrap().parse().expect("pid"))
        .collect()
}

#[test]
fn three_echo_nodes_a_lost_one_and_nothing_left_after_down() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let (mut up, mut output, namespace, inode) = start_echo_cluster(3);
    let ps = text(&ebb(&["cluster", "ps"]));
    for id in 1..=3 {
        assert_eq!(state_of(&ps, id), "ready", "node {id}:\n{ps}");
    }
    assert!(
        ps.contains("   3  10.96.0.4           1  256M    ready"),
        "{ps}"
    );
    // A second `up` from this checkout is refused, naming the first (it
    // holds target/cluster/lock), and the first's cluster is untouched.
    let second = ebb(&["cluster", "up", "echo", "--nodes", "1"]);
    assert_eq!(second.status.code(), Some(1), "{}", text(&second));
    let first = format!("another ./ebb cluster up (process {})", up.0.id());
    assert!(text(&second).contains(&first), "{}", text(&second));
    for address in ["10.96.0.2", "10.96.0.3", "10.96.0.4"] {
        assert!(echoes(&namespace, address), "{address} echoes");
    }
    let logs = text(&ebb(&["cluster", "logs", "2"]));
    assert!(logs.contains("echo: ready: TCP"), "{logs}");
    assert!(
        logs.contains("virtio-net has address 10.96.0.3/24, gateway 10.96.0.1 (static)"),
        "{logs}"
    );

    // kill -9 of node 2's QEMU: lost; the others stay ready and answer.
    let qemu_pids = qemu_pids();
    assert_eq!(qemu_pids.len(), 3, "{qemu_pids:?}");
    assert!(Command::new("kill")
        .args(["-9", &qemu_pids[1].to_string()])
        .status()
        .expect("kill")
        .success());
    let lost = Instant::now() + Duration::from_secs(30);
    let ps = loop {
        let ps = text(&ebb(&["cluster", "ps"]));
        if state_of(&ps, 2) != "ready" || Instant::now() > lost {
            break ps;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(state_of(&ps, 2), "lost (signal 9)", "{ps}");
    assert_eq!(state_of(&ps, 1), "ready", "{ps}");
    assert_eq!(state_of(&ps, 3), "ready", "{ps}");
    assert!(echoes(&namespace, "10.96.0.2") && echoes(&namespace, "10.96.0.4"));
    assert!(
        !echoes(&namespace, "10.96.0.3"),
        "a lost node does not answer"
    );

    // `add` has the running `up` boot one more node: node 4, ready and
    // answering; its ready line and the table are printed.
    let add = ebb(&["cluster", "add"]);
    assert_eq!(add.status.code(), Some(0), "{}", text(&add));
    assert!(
        text(&add).contains("ebb: 10.96.0.5: echo: ready: TCP"),
        "{}",
        text(&add)
    );
    let ps = text(&ebb(&["cluster", "ps"]));
    assert_eq!(state_of(&ps, 4), "ready", "{ps}");
    assert!(echoes(&namespace, "10.96.0.5"), "the added node echoes");
    let all_qemus = self::qemu_pids();
    assert_eq!(all_qemus.len(), 4, "{all_qemus:?}");

    let down = ebb(&["cluster", "down"]);
    assert_eq!(down.status.code(), Some(0), "{}", text(&down));
    let code = up.0.wait().expect("wait for up").code();
    assert!(output.drain(Duration::from_secs(60)), "up's output ends");
    assert_eq!(code, Some(128 + 15), "{}", output.text());
    let stopped = format!("ebb: cluster stopped; deleted namespace {namespace}");
    assert!(output.seen.contains(&stopped), "{}", output.text());

    assert_nothing_left(&namespace, Some(inode), &all_qemus);
    eprintln!(
        "three_echo_nodes: up to down in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn when_the_frontend_is_killed_its_nodes_die_and_down_removes_the_rest() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let (mut up, _, namespace, inode) = start_echo_cluster(2);
    let qemu_pids = qemu_pids();
    assert_eq!(qemu_pids.len(), 2, "{qemu_pids:?}");
    // SIGKILL: the frontend runs no cleanup at all.
    up.0.kill().expect("kill -9 the frontend");
    let _ = up.0.wait();
    // Its QEMUs get SIGKILL from the kernel (PR_SET_PDEATHSIG).
    let gone = Instant::now() + Duration::from_secs(20);
    while qemu_pids
        .iter()
        .any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
    {
        assert!(Instant::now() < gone, "QEMU outlived its frontend");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The namespace outlives a killed process; ps says so, down removes it.
    assert!(ebb_testbed::netns::exists(&namespace));
    let ps = text(&ebb(&["cluster", "ps"]));
    assert!(ps.contains("(gone: ./ebb cluster down cleans up)"), "{ps}");
    let down = ebb(&["cluster", "down"]);
    assert_eq!(down.status.code(), Some(0), "{}", text(&down));
    assert!(
        text(&down).contains(&format!("ebb: deleted namespace {namespace}")),
        "{}",
        text(&down)
    );
    // The etcd it started died with it; `down` deleted its data.
    let etcd_data = format!("ebb-etcd-{}-", up.0.id());
    for entry in std::fs::read_dir(std::env::temp_dir())
        .expect("tmp")
        .flatten()
    {
        let name = entry.file_name();
        assert!(
            !name.to_string_lossy().starts_with(&etcd_data),
            "{name:?} is left"
        );
    }
    assert_nothing_left(&namespace, Some(inode), &qemu_pids);
}

/// `map`'s node registrations, polled until `done` says so or 30 s
/// passed (the registrations' 10 s lease and a loaded host).
fn registrations_until(
    map: &ebb_etcd::EtcdGlobalIdMap,
    done: impl Fn(&[(String, Vec<u8>)]) -> bool,
) -> Vec<(String, Vec<u8>)> {
    use ebb_cluster::frontend::global_map::wait;
    use ebb_core::GlobalIdMap;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let nodes = wait(map.list("nodes/")).unwrap_or_default();
        if done(&nodes) || Instant::now() >= deadline {
            return nodes;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn on_an_existing_etcd_a_killed_frontends_registrations_expire() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    // The user's etcd, on this host's 127.0.0.1.
    let etcd = ebb_testbed::Etcd::start().expect("etcd");
    let endpoint = etcd.endpoint();
    let (mut up, _, namespace, inode) = start_echo_cluster_with(2, &["--etcd", &endpoint]);
    let map = ebb_etcd::EtcdGlobalIdMap::open(&ebb_etcd::EtcdOptions::new(&endpoint, "echo"))
        .expect("the map opens");
    let registered = registrations_until(&map, |nodes| nodes.len() == 2);
    let names: Vec<&str> = registered.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(names, ["nodes/1", "nodes/2"], "{registered:?}");
    assert_eq!(registered[0].1, b"10.96.0.2:7000 1".to_vec());
    // SIGKILL: nobody revokes the leases or keeps them alive; they run out.
    let qemu_pids = qemu_pids();
    up.0.kill().expect("kill -9 the frontend");
    let _ = up.0.wait();
    let killed = Instant::now();
    let left = registrations_until(&map, <[_]>::is_empty);
    assert_eq!(left, [], "registrations outlived their lease");
    eprintln!(
        "the registrations expired {:?} after the kill",
        killed.elapsed()
    );
    let down = ebb(&["cluster", "down"]);
    assert_eq!(down.status.code(), Some(0), "{}", text(&down));
    assert_nothing_left(&namespace, Some(inode), &qemu_pids);
}

#[test]
fn a_node_that_fails_to_boot_ends_up_with_its_console_and_leaves_nothing() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    // echo refuses an option it does not know and exits with code 2.
    let failed = ebb(&[
        "cluster",
        "up",
        "echo",
        "--nodes",
        "2",
        "--",
        "--no-such-option",
    ]);
    let message = text(&failed);
    assert_eq!(failed.status.code(), Some(1), "{message}");
    for id in [1, 2] {
        assert!(
            message.contains(&format!(
                "error: node {id} exited while booting (its application exited with code 2); \
                 the end of its console:"
            )),
            "{message}"
        );
    }
    assert!(
        message.contains("unexpected argument '--no-such-option'"),
        "{message}"
    );
    let namespace = message
        .split("ebb: cluster stopped; deleted namespace ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("up deletes its namespace:\n{message}"));
    assert_nothing_left(namespace, None, &[]);
}

#[test]
fn ctrl_c_stops_the_nodes_in_order_and_leaves_nothing() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    // A terminal's Ctrl-C: SIGINT to the foreground process group.
    stops_in_order_on("INT", 2);
}

#[test]
fn a_closed_terminal_stops_the_nodes_in_order_and_leaves_nothing() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    // A terminal that closes sends SIGHUP to its foreground process group
    // (by default it would end `up` and leave the namespace behind).
    stops_in_order_on("HUP", 1);
}

/// `signal` (`kill`'s name for it, and its number) to the process group
/// `up` leads: QEMU runs in groups of its own, so only `up` gets it, and
/// it stops the nodes through QMP and leaves nothing.
fn stops_in_order_on(signal: &str, number: i32) {
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let (mut up, mut output, namespace, inode) = start_echo_cluster(2);
    let qemu_pids = qemu_pids();
    let group = format!("-{}", up.0.id());
    assert!(Command::new("kill")
        .args([&format!("-{signal}"), "--", &group])
        .status()
        .expect("kill")
        .success());
    let code = up.0.wait().expect("wait for up").code();
    assert!(output.drain(Duration::from_secs(60)), "up's output ends");
    assert_eq!(code, Some(128 + number), "{}", output.text());
    let said = output.text();
    assert!(
        said.contains(&format!("ebb: stopped the cluster on SIG{signal}")),
        "{said}"
    );
    // Stopped in order, not lost: QEMU saw no signal (it would say so on
    // its stderr, which goes to the node's console log).
    assert!(!said.contains("is lost"), "{said}");
    for id in [1, 2] {
        let log = text(&ebb(&["cluster", "logs", &id.to_string()]));
        assert!(log.contains("echo: ready:"), "{log}");
        assert!(!log.contains("terminating on signal"), "{log}");
    }
    assert_nothing_left(&namespace, Some(inode), &qemu_pids);
}

#[test]
fn a_damaged_state_file_is_named_and_down_deletes_it_and_a_bad_memory_is_refused() {
    let _one = CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    // A memory size that would have broken the state file with its tab.
    let bad = ebb(&[
        "cluster", "up", "echo", "--nodes", "1", "--memory", "256M\t1",
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(
        text(&bad).contains("--memory \"256M\\t1\" is not a size in QEMU's -m syntax"),
        "{}",
        text(&bad)
    );
    let dir = root().join("target/cluster");
    std::fs::create_dir_all(&dir).expect("dir");
    let state = dir.join("state");
    std::fs::write(&state, "frontend\tnot a process\n").expect("damage");
    let ps = ebb(&["cluster", "ps"]);
    assert_eq!(ps.status.code(), Some(1), "{}", text(&ps));
    let named = format!("cannot read the cluster state file {}", state.display());
    assert!(text(&ps).contains(&named), "{}", text(&ps));
    assert!(
        text(&ps).contains("`./ebb cluster down` (or the next `up`) deletes it"),
        "{}",
        text(&ps)
    );
    // No `up` holds the lock: down knows the file is stale.
    let down = ebb(&["cluster", "down"]);
    assert_eq!(down.status.code(), Some(0), "{}", text(&down));
    assert!(
        text(&down).contains("no cluster is running; deleted its stale state file"),
        "{}",
        text(&down)
    );
    assert!(!state.exists());
    // `add` without a running cluster says so.
    let add = ebb(&["cluster", "add", "--nodes", "2"]);
    assert_eq!(add.status.code(), Some(1), "{}", text(&add));
    assert!(
        text(&add).contains("no cluster is running (./ebb cluster up APP --nodes N starts one)"),
        "{}",
        text(&add)
    );
}
