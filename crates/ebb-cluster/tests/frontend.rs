//! The frontend runtime with real nodes (needs root, /dev/net/tun, `ip`
//! and QEMU; skipped otherwise): `run_frontend` allocates two native echo
//! nodes (apps/echo as a node: its Messenger echo Ebb is the first id of
//! its range), calls each; each node answers exactly the arguments given
//! after `--` (fetched from the frontend over the Messenger) and copies a
//! key of the frontend's global id map through it; one QEMU is frozen (SIGSTOP) with a call to it
//! pending and then killed with `kill -9`: the node is reported lost, the
//! pending call fails with `NodeLost` and a later one with `Unreachable`,
//! while the other node still answers; afterwards no namespace, TAP
//! device or QEMU process of the test is left.
//! On a real etcd (`MapChoice::StartEtcd`, needs etcd too): each node's
//! global ids are reserved from etcd as it is allocated, each node is
//! registered under `nodes/N` with a lease, a node killed with `kill -9`
//! loses its registration while the other keeps it, and no etcd or its
//! data is left.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use std::future::Future;

use ebb_cluster::frontend::{run_frontend, FrontendHandle, FrontendOptions, MapChoice};
use ebb_cluster::{ClusterError, Exit, NodeState};
use ebb_core::{EbbId, GlobalIdMap, NodeId, NEXT_GLOBAL_ID};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::command_line::CommandLine;
use ebb_messenger::map::{decode_reply, MapReply, GET};
use ebb_messenger::{MessageNumber, MessengerError};
use ebb_testbed::{skip_unless, Need};

/// Echo's Messenger message whose reply is the request
/// (apps/echo/src/node.rs).
const ECHO: MessageNumber = MessageNumber(1);
/// Echo's messages that copy a key of the global id map and answer the
/// fetched arguments.
const MAP_COPY: MessageNumber = MessageNumber(3);
const COMMAND_LINE: MessageNumber = MessageNumber(4);
/// The arguments after `--`: echo's own options, as its `main` takes them
/// from its kernel command line too.
const ARGS: [&str; 2] = ["--tcp-port", "7007"];
/// The whole test's bound: two TCG boots side by side on a loaded
/// machine, and the teardown.
const TEST_LIMIT: Duration = Duration::from_secs(600);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// [`Seen::killed`]: the kill's result, the node's state after, and the
/// kill of a node that does not exist.
type Killed = (
    Result<(), ClusterError>,
    Option<NodeState>,
    Result<(), ClusterError>,
);

/// What the frontend program saw.
#[derive(Debug, Default)]
struct Seen {
    allocated: Vec<Result<(NodeId, u32, u32), String>>,
    first_replies: Vec<Result<Vec<u8>, MessengerError>>,
    /// Each node's fetched arguments.
    arguments: Vec<Result<Vec<String>, MessengerError>>,
    /// Each node's read of `app/greeting`, and the copies in the map.
    map_reads: Vec<Result<MapReply, String>>,
    copies: Vec<Option<Vec<u8>>>,
    pending_on_lost: Option<Result<Vec<u8>, MessengerError>>,
    after_loss: Option<Result<Vec<u8>, MessengerError>>,
    survivor: Option<Result<Vec<u8>, MessengerError>>,
    lost_state: Option<NodeState>,
    /// The frontend's own kill of the survivor: its result, the node's
    /// state after, and a kill of a node that does not exist.
    killed: Option<Killed>,
    namespace: String,
}

fn send_signal(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid}");
}

/// One cluster at a time (2 host cores, TCG): the QEMU tests take turns.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_cluster() -> std::sync::MutexGuard<'static, ()> {
    ONE_CLUSTER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Options for echo nodes, their Messenger on `port`, logs in a directory
/// of this test (`tag`).
fn echo_nodes(tag: &str, port: u16) -> (FrontendOptions, PathBuf) {
    let image = ebb_testbed::native_image::build(&workspace_root(), "echo")
        .expect("echo's native image builds");
    let log_dir = std::env::temp_dir().join(format!("ebb-frontend-{tag}-{}", std::process::id()));
    let mut options = FrontendOptions::new(image);
    options.ready_timeout = Duration::from_secs(300);
    options.log_dir = log_dir.clone();
    options.messenger_port = port;
    (options, log_dir)
}

/// Checks that the cluster's namespace (its TAP devices and bridge went
/// with it) and its QEMUs are gone.
fn assert_namespace_and_qemus_gone(namespace: &str, qemu_pids: impl IntoIterator<Item = u32>) {
    assert!(
        !ebb_testbed::netns::exists(namespace),
        "{namespace} is left"
    );
    for pid in qemu_pids {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert!(!comm.contains("qemu"), "QEMU {pid} is still running");
    }
}

/// Node `id`'s state, if the frontend has such a node.
fn node_state(frontend: &FrontendHandle, id: NodeId) -> Option<NodeState> {
    frontend
        .nodes()
        .into_iter()
        .find(|node| node.id() == id)
        .map(|node| node.state())
}

/// Waits on the event loop until node `id` has ended, 30 s at most; its
/// state then.
async fn ended(frontend: &FrontendHandle, id: NodeId) -> Option<NodeState> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !node_state(frontend, id).is_some_and(NodeState::is_over) && Instant::now() < deadline {
        ebb_event::sleep(Duration::from_millis(50)).await;
    }
    node_state(frontend, id)
}

/// Runs `program` as the frontend of `options` on a thread of its own;
/// its exit code and what it saw (it returns both), within
/// [`TEST_LIMIT`].
fn run_program<S, F, Fut>(options: FrontendOptions, program: F) -> (Result<i32, String>, S)
where
    S: Send + 'static,
    F: FnOnce(FrontendHandle) -> Fut + Send + 'static,
    Fut: Future<Output = (i32, S)> + 'static,
{
    let (seen_tx, seen_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let code = run_frontend(options, move |frontend| async move {
            let (code, seen) = program(frontend).await;
            let _ = seen_tx.send(seen);
            code
        });
        let _ = done_tx.send(code);
    });
    let code = done_rx
        .recv_timeout(TEST_LIMIT)
        .expect("the frontend finished in time");
    (code, seen_rx.try_recv().expect("the frontend program ran"))
}

#[test]
fn a_frontend_allocates_echo_nodes_calls_them_and_survives_losing_one() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    let _turn = one_cluster();
    let (mut options, log_dir) = echo_nodes("test", 7200);
    options.args = ARGS.map(str::to_owned).to_vec();

    let (seen_tx, seen_rx) = mpsc::channel::<Seen>();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let code = run_frontend(options, move |frontend| async move {
            let mut seen = Seen {
                namespace: frontend.namespace().to_owned(),
                ..Seen::default()
            };
            let nodes = frontend.allocate(2).await;
            seen.allocated = nodes
                .iter()
                .map(|node| {
                    node.as_ref()
                        .map(|n| (n.id, n.ebb_ids.start, n.pid))
                        .map_err(ToString::to_string)
                })
                .collect();
            let Ok(nodes) = nodes.into_iter().collect::<Result<Vec<_>, _>>() else {
                let _ = seen_tx.send(seen);
                return 1;
            };
            let rep = frontend
                .messenger()
                .get()
                .expect("the frontend's Messenger");
            let echo_of = |node: &ebb_cluster::frontend::AllocatedNode| {
                EbbId::new(node.ebb_ids.start).expect("an Ebb id")
            };
            let call = |node: &ebb_cluster::frontend::AllocatedNode, text: &'static [u8]| {
                rep.call(
                    node.id,
                    echo_of(node),
                    ECHO,
                    IoChain::from(IoBuf::from_static(text)),
                )
            };
            for node in &nodes {
                let reply = call(node, b"to every node").await;
                seen.first_replies.push(reply.map(|r| r.payload.to_vec()));
            }
            let map = frontend.map();
            map.set("app/greeting", b"hello".to_vec(), None)
                .await
                .expect("the frontend's map");
            for node in &nodes {
                let args = rep
                    .call(node.id, echo_of(node), COMMAND_LINE, IoChain::new())
                    .await
                    .map(|r| CommandLine::decode_args(&r.payload.to_vec()).expect("decodes"));
                seen.arguments.push(args);
                let key = IoChain::from(IoBuf::from_static(b"app/greeting"));
                let read = rep
                    .call(node.id, echo_of(node), MAP_COPY, key)
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| {
                        decode_reply(GET, &r.payload.to_vec())
                            .expect("decodes")
                            .map_err(|e| e.to_string())
                    });
                seen.map_reads.push(read);
                seen.copies
                    .push(map.get("app/greeting/copied").await.expect("the map"));
                map.delete("app/greeting/copied").await.expect("the map");
            }
            // Node 1 frozen, a call to it pending, then killed outright.
            let (lost, survivor) = (&nodes[0], &nodes[1]);
            send_signal("-STOP", lost.pid);
            let pending = call(lost, b"never answered");
            let pending =
                ebb_event::spawn_task(async move { pending.await.map(|r| r.payload.to_vec()) });
            ebb_event::sleep(Duration::from_millis(300)).await;
            send_signal("-KILL", lost.pid);
            seen.pending_on_lost = pending.await.ok();
            let deadline = Instant::now() + Duration::from_secs(30);
            let state = |id| {
                frontend
                    .nodes()
                    .into_iter()
                    .find(|n| n.id() == id)
                    .map(|n| n.state())
            };
            while !state(lost.id).is_some_and(NodeState::is_over) && Instant::now() < deadline {
                ebb_event::sleep(Duration::from_millis(50)).await;
            }
            seen.lost_state = state(lost.id);
            seen.after_loss = Some(call(lost, b"gone").await.map(|r| r.payload.to_vec()));
            seen.survivor = Some(
                call(survivor, b"still here")
                    .await
                    .map(|r| r.payload.to_vec()),
            );
            // `FrontendHandle::kill` ends a node as a crash would.
            let killed = frontend.kill(survivor.id);
            let deadline = Instant::now() + Duration::from_secs(30);
            while !state(survivor.id).is_some_and(NodeState::is_over) && Instant::now() < deadline {
                ebb_event::sleep(Duration::from_millis(50)).await;
            }
            seen.killed = Some((killed, state(survivor.id), frontend.kill(NodeId(9))));
            let _ = seen_tx.send(seen);
            0
        });
        let _ = done_tx.send(code);
    });
    let code = done_rx
        .recv_timeout(TEST_LIMIT)
        .expect("the frontend finished in time");
    let seen = seen_rx.try_recv().expect("the frontend program ran");
    assert_eq!(code, Ok(0), "{seen:?}");

    let allocated: Vec<_> = seen
        .allocated
        .iter()
        .map(|node| node.clone().expect("allocated"))
        .collect();
    assert_eq!(
        allocated.iter().map(|(id, _, _)| *id).collect::<Vec<_>>(),
        [NodeId(1), NodeId(2)]
    );
    assert_ne!(allocated[0].1, allocated[1].1, "the id ranges differ");
    for reply in &seen.first_replies {
        assert_eq!(reply.as_deref(), Ok(&b"to every node"[..]));
    }
    assert_eq!(seen.arguments.len(), 2);
    for args in &seen.arguments {
        assert_eq!(args.as_deref(), Ok(&ARGS.map(str::to_owned)[..]));
    }
    assert_eq!(
        seen.map_reads,
        [
            Ok(MapReply::Value(Some(b"hello".to_vec()))),
            Ok(MapReply::Value(Some(b"hello".to_vec())))
        ]
    );
    assert_eq!(
        seen.copies,
        [Some(b"hello".to_vec()), Some(b"hello".to_vec())]
    );
    assert_eq!(seen.lost_state, Some(NodeState::Lost(Exit::Signal(9))));
    assert_eq!(
        seen.pending_on_lost,
        Some(Err(MessengerError::NodeLost { node: NodeId(1) }))
    );
    assert!(
        matches!(
            seen.after_loss,
            Some(Err(MessengerError::Unreachable {
                node: NodeId(1),
                ..
            }))
        ),
        "{:?}",
        seen.after_loss
    );
    assert_eq!(
        seen.survivor.as_ref().map(|r| r.as_deref()),
        Some(Ok(&b"still here"[..]))
    );

    assert_eq!(
        seen.killed,
        Some((
            Ok(()),
            Some(NodeState::Lost(Exit::Signal(9))),
            Err(ClusterError::UnknownNode { id: NodeId(9) })
        ))
    );

    // Nothing left: the namespace (its TAP devices and bridge went with
    // it), the QEMUs.
    assert!(seen
        .namespace
        .starts_with(&format!("ebb-{}-frontend-", std::process::id())));
    assert!(
        !ebb_testbed::netns::exists(&seen.namespace),
        "{} is left",
        seen.namespace
    );
    for (_, _, pid) in &allocated {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert!(!comm.contains("qemu"), "QEMU {pid} is still running");
    }
    let _ = std::fs::remove_dir_all(&log_dir);
}

#[test]
fn a_frontend_whose_main_panics_still_stops_its_nodes() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    let _turn = one_cluster();
    let (options, log_dir) = echo_nodes("panic", 7201);
    let (pid_tx, pid_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let outcome = run_frontend(options, move |frontend| async move {
            let nodes = frontend.allocate(1).await;
            let node = nodes
                .into_iter()
                .next()
                .expect("one result")
                .expect("allocated");
            let _ = pid_tx.send((node.pid, frontend.namespace().to_owned()));
            panic!("the frontend program fails on purpose");
        });
        let _ = done_tx.send(outcome);
    });
    let outcome = done_rx
        .recv_timeout(TEST_LIMIT)
        .expect("the frontend finished in time");
    assert_eq!(
        outcome,
        Err("the frontend's hosted node: core 0 panicked; the node was stopped".to_owned())
    );
    let (pid, namespace) = pid_rx.try_recv().expect("the node was allocated");
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert!(!comm.contains("qemu"), "QEMU {pid} is still running");
    assert!(
        !ebb_testbed::netns::exists(&namespace),
        "{namespace} is left"
    );
    let _ = std::fs::remove_dir_all(&log_dir);
}

/// Set in the child process of the test below.
const FAILING_CHILD: &str = "EBB_FRONTEND_FAILING_CHILD";

#[test]
fn after_a_frontend_fails_early_sigterm_still_ends_the_process() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    if std::env::var_os(FAILING_CHILD).is_some() {
        // The child: a frontend that fails after it caught the signals (its
        // log directory cannot be made), then waits to be ended.
        let mut options = FrontendOptions::new(std::env::current_exe().expect("this test"));
        options.log_dir = PathBuf::from("/proc/version/logs");
        options.network_tag = "sigfail".to_owned();
        let outcome = run_frontend(options, |_| async { 0 });
        println!("frontend failed: {outcome:?}");
        std::thread::sleep(Duration::from_secs(30));
        println!("still running after 30 s");
        return;
    }
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(std::env::current_exe().expect("this test"))
        .args([
            "--exact",
            "after_a_frontend_fails_early_sigterm_still_ends_the_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FAILING_CHILD, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the test re-executed");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let failed = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|line| line.contains("frontend failed"))
        .expect("the child's frontend ends");
    assert!(failed.contains("/proc/version/logs"), "{failed}");
    send_signal("-TERM", child.id());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        status.and_then(|status| status.signal()),
        Some(15),
        "SIGTERM ends the process"
    );
}

/// What the frontend program on etcd saw.
#[derive(Debug, Default)]
struct SeenOnEtcd {
    namespace: String,
    allocated: Vec<Result<(NodeId, String, u32), String>>,
    /// The id counter before and after allocating the nodes.
    counter: Option<Result<Option<Vec<u8>>, String>>,
    counter_after: Option<Result<Option<Vec<u8>>, String>>,
    registered: Vec<(String, Vec<u8>)>,
    after_loss: Vec<(String, Vec<u8>)>,
}

/// Polls `map.list("nodes/")` on the event loop until `done` says so or
/// 30 s passed; the last list.
async fn nodes_until(
    map: &dyn GlobalIdMap,
    done: impl Fn(&[(String, Vec<u8>)]) -> bool,
) -> Vec<(String, Vec<u8>)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let nodes = map.list("nodes/").await.unwrap_or_default();
        if done(&nodes) || Instant::now() >= deadline {
            return nodes;
        }
        ebb_event::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn a_frontend_on_etcd_registers_its_nodes_and_a_lost_ones_entry_goes() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    let _turn = one_cluster();
    let (mut options, log_dir) = echo_nodes("etcd", 7202);
    options.map = MapChoice::StartEtcd;
    let ids_per_node = options.ids_per_node;

    let (code, seen) = run_program(options, |frontend| async move {
        let mut seen = SeenOnEtcd {
            namespace: frontend.namespace().to_owned(),
            ..SeenOnEtcd::default()
        };
        let map = std::sync::Arc::clone(frontend.map());
        seen.counter = Some(map.get(NEXT_GLOBAL_ID).await.map_err(|e| e.to_string()));
        let nodes = frontend.allocate(2).await;
        seen.allocated = nodes
            .iter()
            .map(|node| {
                node.as_ref()
                    .map(|n| (n.id, format!("{} {}", n.entry.addr, n.entry.cores), n.pid))
                    .map_err(ToString::to_string)
            })
            .collect();
        seen.counter_after = Some(map.get(NEXT_GLOBAL_ID).await.map_err(|e| e.to_string()));
        let Ok(nodes) = nodes.into_iter().collect::<Result<Vec<_>, _>>() else {
            return (1, seen);
        };
        seen.registered = nodes_until(&*map, |nodes| nodes.len() == 2).await;
        let lost = nodes[0].id;
        let _ = frontend.kill(lost);
        ended(&frontend, lost).await;
        seen.after_loss = nodes_until(&*map, |nodes| nodes.len() == 1).await;
        (0, seen)
    });
    assert_eq!(code, Ok(0), "{seen:?}");

    // The frontend reserved no ids when it started, and each node's as it
    // was allocated, from etcd's counter.
    assert_eq!(seen.counter, Some(Ok(None)), "{seen:?}");
    let end = ebb_core::FIRST_GLOBAL_ID + ids_per_node * 2;
    assert_eq!(
        seen.counter_after,
        Some(Ok(Some(end.to_string().into_bytes()))),
        "{seen:?}"
    );
    let allocated: Vec<_> = seen
        .allocated
        .iter()
        .map(|node| node.clone().expect("allocated"))
        .collect();
    let expected: Vec<(String, Vec<u8>)> = allocated
        .iter()
        .map(|(id, value, _)| (format!("nodes/{}", id.0), value.clone().into_bytes()))
        .collect();
    assert_eq!(seen.registered, expected);
    assert_eq!(seen.after_loss, expected[1..].to_vec());

    // Nothing left: etcd and its data, the namespace, the QEMUs.
    let etcd_left = ebb_testbed::etcd::left_by_this_process();
    assert!(etcd_left.is_empty(), "{etcd_left:?}");
    assert_namespace_and_qemus_gone(&seen.namespace, allocated.iter().map(|(_, _, pid)| *pid));
    let _ = std::fs::remove_dir_all(&log_dir);
}
