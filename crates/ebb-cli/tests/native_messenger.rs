//! A native node reached through the Messenger from a hosted node (needs
//! root, /dev/net/tun, `ip` and QEMU; skipped otherwise). `./ebb run echo
//! --native --net tap` boots echo with a boot contract (`node=1`, the
//! frontend at the namespace's host side 10.98.0.1:7100, a global id
//! range, Messenger port 7100); this test is the frontend, a hosted node
//! inside the launcher's namespace. The native node announces itself over
//! our TCP/IP stack, the frontend's hook resolves, and the frontend calls
//! its echo Ebb on the connection's core and on core 1 (kernel TCP on the
//! hosted side, our stack on the native side). The frontend also serves
//! its global id map and the command line, as the frontend runtime does:
//! the native node reads a key of that map and writes a copy through it
//! (`RemoteGlobalIdMap`, no etcd client in the guest), and answers the
//! arguments it fetched, exactly as given (spaces and an empty word,
//! which its kernel command line could not carry). SIGTERM then stops QEMU
//! and the namespace goes away. And a native node given only some of the
//! node words does not boot, naming the missing one (QEMU only).

mod launcher_support;

use std::net::SocketAddr;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use std::sync::Arc;

use ebb_core::{
    CoreId, EbbId, GlobalIdMap, InProcessGlobalIdMap, NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS,
};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::command_line::CommandLine;
use ebb_messenger::map::{decode_reply, MapReply, MapService, GET};
use ebb_messenger::{acceptor, create_messenger, Frontend, MessengerSettings, FRONTEND_NODE};
use ebb_testbed::{skip_unless, Need};
use launcher_support::launch;

/// The frontend's Messenger, on the namespace's host side of the TAP.
const FRONTEND: &str = "10.98.0.1:7100";
const MESSENGER_PORT: u16 = 7100;
/// Echo's Messenger messages (apps/echo/src/node.rs).
const ECHO: ebb_messenger::MessageNumber = ebb_messenger::MessageNumber(1);
const WHICH_CORE: ebb_messenger::MessageNumber = ebb_messenger::MessageNumber(2);
const MAP_COPY: ebb_messenger::MessageNumber = ebb_messenger::MessageNumber(3);
const COMMAND_LINE: ebb_messenger::MessageNumber = ebb_messenger::MessageNumber(4);

/// The arguments the frontend serves.
fn arguments() -> Vec<String> {
    vec!["two words".to_owned(), String::new(), "--last".to_owned()]
}

/// What the map and the command line did: the native node's read of
/// `app/greeting` (a `get`'s reply), the copy it wrote, the arguments it
/// fetched.
type Offloaded = (
    Result<Result<MapReply, ebb_core::MapError>, String>,
    Option<Vec<u8>>,
    Result<Vec<String>, String>,
);

/// What the frontend saw: the range it handed out, the node's recorded
/// address, and the replies of its two calls.
type Seen = (
    std::ops::Range<u32>,
    SocketAddr,
    Result<Vec<u8>, String>,
    Result<Vec<u8>, String>,
    Offloaded,
);

/// The frontend, a hosted node of one core: expects node 1, waits for its
/// announcement, calls it.
fn frontend() -> Seen {
    ebb_hosted::run_task(ebb_hosted::Config::one_core_side_by_side(), || async {
        let messenger = create_messenger(MessengerSettings::new(FRONTEND_NODE)).unwrap();
        let registry = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
        registry.serve(messenger).unwrap();
        let map: Arc<dyn GlobalIdMap> = Arc::new(InProcessGlobalIdMap::new());
        map.set("app/greeting", b"from the hosted map".to_vec(), None)
            .await
            .unwrap();
        MapService::new(Arc::clone(&map)).serve(messenger).unwrap();
        Arc::new(CommandLine::new(arguments(), []))
            .serve(messenger)
            .unwrap();
        let ids = registry.expect(NodeId(1), 64).unwrap();
        ebb_net::listen(FRONTEND.parse().unwrap(), acceptor(messenger))
            .expect("listen on the namespace's host side");
        let entry = registry
            .when_announced(NodeId(1))
            .await
            .expect("node 1 announces itself");
        let rep = messenger.get().unwrap();
        let echo = EbbId::new(ids.start).unwrap();
        let echoed = rep
            .call(
                NodeId(1),
                echo,
                ECHO,
                IoChain::from(IoBuf::from_static(b"hosted to native")),
            )
            .await
            .map(|reply| reply.payload.to_vec())
            .map_err(|error| error.to_string());
        let core = rep
            .call_on(NodeId(1), CoreId(1), echo, WHICH_CORE, IoChain::new())
            .await
            .map(|reply| reply.payload.to_vec())
            .map_err(|error| error.to_string());
        let read = rep
            .call(
                NodeId(1),
                echo,
                MAP_COPY,
                IoChain::from(IoBuf::from_static(b"app/greeting")),
            )
            .await
            .map_err(|error| error.to_string())
            .map(|reply| decode_reply(GET, &reply.payload.to_vec()).unwrap());
        let copied = map.get("app/greeting/copied").await.unwrap();
        let args = rep
            .call(NodeId(1), echo, COMMAND_LINE, IoChain::new())
            .await
            .map_err(|error| error.to_string())
            .map(|reply| CommandLine::decode_args(&reply.payload.to_vec()).unwrap());
        (ids, entry.socket_addr(), echoed, core, (read, copied, args))
    })
    .expect("the frontend node runs")
}

#[test]
fn a_hosted_frontend_calls_a_native_node_that_announced_itself() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    let range = format!("ebb_ids={}-{}", FIRST_GLOBAL_ID, FIRST_GLOBAL_ID + 64);
    let frontend_arg = format!("frontend={FRONTEND}");
    let port_arg = format!("messenger_port={MESSENGER_PORT}");
    let (mut launcher, output) = launch(&[
        "run",
        "echo",
        "--native",
        "--net",
        "tap",
        "--cores",
        "2",
        "--timeout",
        "300",
        "--boot-arg",
        "node=1",
        "--boot-arg",
        &frontend_arg,
        "--boot-arg",
        &range,
        "--boot-arg",
        &port_arg,
    ]);
    // The namespace exists (with the TAP's host side) once it is named.
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    let ns = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match output.recv_timeout(left) {
            Ok(line) => {
                let ns = line
                    .split("network namespace ")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .map(str::to_owned);
                seen.push(line);
                if let Some(ns) = ns {
                    break ns;
                }
            }
            Err(_) => panic!("the launcher named no namespace:\n{}", seen.join("\n")),
        }
    };
    let (done, result) = mpsc::channel();
    let inside = ns.clone();
    thread::spawn(move || {
        let _ = done.send(ebb_testbed::netns::run_inside_named(&inside, frontend));
    });
    // Bounded: a node that never announces fails the test, with its output.
    let left = deadline.saturating_duration_since(Instant::now());
    let Ok(outcome) = result.recv_timeout(left) else {
        let rest: Vec<String> = output.try_iter().collect();
        panic!(
            "the native node did not announce itself and answer:\n{}\n{}",
            seen.join("\n"),
            rest.join("\n")
        );
    };
    let (ids, addr, echoed, core, (read, copied, args)) =
        outcome.expect("the frontend ran inside the namespace");
    assert_eq!(ids, FIRST_GLOBAL_ID..FIRST_GLOBAL_ID + 64);
    assert_eq!(addr, SocketAddr::from(([10, 98, 0, 2], MESSENGER_PORT)));
    assert_eq!(echoed.as_deref(), Ok(&b"hosted to native"[..]));
    assert_eq!(core.as_deref(), Ok(&1u32.to_le_bytes()[..]));
    let greeting = b"from the hosted map".to_vec();
    assert_eq!(read, Ok(Ok(MapReply::Value(Some(greeting.clone())))));
    assert_eq!(copied, Some(greeting));
    assert_eq!(args, Ok(arguments()));

    // SIGTERM to the launcher: QEMU stops, the namespace is deleted.
    let status = Command::new("kill")
        .args(["-TERM", &launcher.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    launcher.0.wait().expect("wait for the launcher");
    let rest: Vec<String> = output.iter().collect();
    assert!(
        rest.iter()
            .any(|l| l == &format!("ebb: deleted namespace {ns}")),
        "{}",
        rest.join("\n")
    );
    assert!(!ebb_testbed::netns::exists(&ns), "{ns} is gone");
}

#[test]
fn a_native_node_with_wrong_node_words_does_not_boot() {
    skip_unless!(Need::Qemu);
    // `node=` without the other three words.
    let (mut launcher, output) = launch(&[
        "run",
        "echo",
        "--native",
        "--timeout",
        "120",
        "--boot-arg",
        "node=1",
    ]);
    let status = launcher.0.wait().expect("wait for the launcher");
    let text: Vec<String> = output.iter().collect();
    let text = text.join("\n");
    assert!(!status.success(), "{text}");
    assert!(
        text.contains(
            "bad node options on the command line: frontend= is missing: \
             a node needs all of node=, frontend=, ebb_ids= and messenger_port="
        ),
        "{text}"
    );
    assert!(!text.contains("echo: ready"), "{text}");
}
