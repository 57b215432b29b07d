//! `echo` started as a node of a distributed application, as a launcher
//! starts it: its boot contract in `EBB_NODE`, a frontend (this test, a
//! hosted node on 127.0.0.1) that expects it. The echo process announces
//! itself, the frontend's hook resolves, and the frontend calls its
//! Messenger echo Ebb (the first id of the range it handed out) on the
//! connection's core and on a named core.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use ebb_core::{CoreId, EbbId, NodeId, FIRST_GLOBAL_ID};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::LocalFrontend;
use ebb_testbed::{free_port, KilledOnDrop};
use echo::node::{ECHO, WHICH_CORE};

const ECHO_BIN: &str = env!("CARGO_BIN_EXE_echo");

/// The frontend listens on 127.0.0.1, any port.
const LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// Global ids the frontend gives each node.
const IDS_PER_NODE: u32 = 64;

#[test]
fn echo_announces_itself_to_the_frontend_and_answers_its_calls() {
    let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
    let (result_tx, result_rx) = mpsc::channel();
    thread::spawn(move || {
        let result = ebb_hosted::run_task(
            ebb_hosted::Config::one_core_side_by_side(),
            move || async move {
                let LocalFrontend {
                    messenger,
                    registry,
                    addr,
                    ranges,
                } = LocalFrontend::start(LOOPBACK, 1, IDS_PER_NODE).unwrap();
                let ids = ranges[0].clone();
                addr_tx.send(addr).unwrap();
                // The allocator's hook; the test's own timeout bounds it.
                let entry = registry
                    .when_announced(NodeId(1))
                    .await
                    .expect("node 1 announces itself");
                let rep = messenger.get().unwrap();
                let echo_id = EbbId::new(ids.start).unwrap();
                let echoed = rep
                    .call(
                        NodeId(1),
                        echo_id,
                        ECHO,
                        IoChain::from(IoBuf::from_static(b"over the Messenger")),
                    )
                    .await
                    .map(|reply| reply.payload.to_vec());
                let core_1 = rep
                    .call_on(NodeId(1), CoreId(1), echo_id, WHICH_CORE, IoChain::new())
                    .await
                    .map(|reply| reply.payload.to_vec());
                (ids, entry, echoed, core_1)
            },
        );
        let _ = result_tx.send(result);
    });
    let frontend = addr_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the frontend listens");
    let port = free_port().unwrap();
    let words = format!(
        "node=1 frontend={frontend} ebb_ids={}-{} messenger_port={port}",
        FIRST_GLOBAL_ID,
        FIRST_GLOBAL_ID + 64
    );
    let _node = KilledOnDrop(
        Command::new(ECHO_BIN)
            .args([
                "--cores",
                "2",
                "--no-pin",
                "--tcp-port",
                "0",
                "--udp-port",
                "0",
            ])
            .env("EBB_NODE", &words)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run echo"),
    );
    let (ids, entry, echoed, core_1) = result_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("echo announced itself and answered within 60 s")
        .unwrap();
    assert_eq!(ids, FIRST_GLOBAL_ID..FIRST_GLOBAL_ID + 64);
    assert_eq!(entry.node, NodeId(1));
    assert_eq!(
        SocketAddr::V4(entry.addr),
        SocketAddr::from(([127, 0, 0, 1], port)),
        "recorded where the frontend saw it, on its Messenger port"
    );
    assert_eq!(entry.cores, 2);
    assert_eq!(echoed.as_deref(), Ok(&b"over the Messenger"[..]));
    assert_eq!(core_1.as_deref(), Ok(&1u32.to_le_bytes()[..]));
}
