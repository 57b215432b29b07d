//! The `ring` program as a launcher starts it: three processes, each with
//! its boot contract in `EBB_NODE` and two cores (a slice's `WORK` and the
//! round's `TOKEN` may reach different cores, which share the node's
//! digests), and a frontend in the test (a hosted node on 127.0.0.1). A
//! first run completes with every total right; then node 3's process is
//! killed (`kill -9`) and a second run reports node 3 lost with the error
//! its call got, while nodes 1 and 2 finish every round.

mod frontend_support;

use std::net::SocketAddrV4;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use ebb_core::NodeId;
use ebb_messenger::MessengerError;
use ebb_testbed::{free_port, KilledOnDrop};
use ring::{run_frontend, WorkPlan, EXIT_OK};

const RING_BIN: &str = env!("CARGO_BIN_EXE_ring");

#[test]
fn ring_processes_complete_and_a_killed_one_is_reported_lost() {
    let plan = WorkPlan {
        bytes: 200_000,
        rounds: 2,
        seed: 3,
        ..WorkPlan::default()
    };
    let (setup_tx, setup_rx) = mpsc::channel();
    let (first_tx, first_rx) = mpsc::channel();
    let (killed_tx, killed_rx) = ebb_event::oneshot::<()>();
    let (second_tx, second_rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = ebb_hosted::run_task(
            ebb_hosted::Config::one_core_side_by_side(),
            move || async move {
                let frontend = frontend_support::start(3);
                setup_tx
                    .send((frontend_support::v4(&frontend), frontend.ranges.clone()))
                    .unwrap();
                let nodes = frontend_support::announced(&frontend).await;
                let messenger = frontend.messenger;
                let _ = first_tx.send(run_frontend(messenger, nodes.clone(), plan).await);
                if killed_rx.await.is_ok() {
                    let _ = second_tx.send(run_frontend(messenger, nodes, plan).await);
                }
            },
        );
    });
    let (frontend, ranges): (SocketAddrV4, Vec<std::ops::Range<u32>>) = setup_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the frontend listens");
    let mut nodes: Vec<KilledOnDrop> = (1..=3)
        .zip(&ranges)
        .map(|(node, ids)| {
            let words = format!(
                "node={node} frontend={frontend} ebb_ids={}-{} messenger_port={}",
                ids.start,
                ids.end,
                free_port().unwrap()
            );
            KilledOnDrop(
                Command::new(RING_BIN)
                    .args(["--cores", "2", "--no-pin"])
                    .env("EBB_NODE", &words)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .expect("run ring"),
            )
        })
        .collect();
    let first = first_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the first run reports within 60 s");
    println!("{first}");
    assert_eq!(first.exit_code(), EXIT_OK, "{first}");
    assert!(first.rounds.iter().all(|round| round.nodes == 3));
    // Node 3's process dies; its kernel closes its connections.
    drop(nodes.pop());
    killed_tx.send(());
    let second = second_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the second run reports within 60 s");
    println!("{second}");
    assert_eq!(second.exit_code(), EXIT_OK, "{second}");
    let lost: Vec<_> = second.lost().collect();
    assert_eq!(lost.len(), 1, "{second}");
    assert_eq!(lost[0].node.node, NodeId(3));
    let (round, why) = lost[0].lost.clone().unwrap();
    assert_eq!(round, 1);
    // The connection the frontend had is gone; a new one is refused.
    let connection_lost = format!("work failed: {}", MessengerError::ConnectionLost);
    assert!(
        why == connection_lost || why.starts_with("work failed: node 3 is unreachable"),
        "node 3's call failed with a Messenger error: {why}"
    );
    assert!(second
        .rounds
        .iter()
        .all(|round| round.nodes == 2 && round.matched));
}
