//! Ring in one process: a frontend and three nodes, each a hosted node
//! (its own Ebbflow runtime on a thread) over kernel TCP on 127.0.0.1.
//! The nodes join as a launcher would start them (a boot contract: they
//! create their Messenger, make the first id of their range the worker,
//! listen and announce themselves), the frontend runs the plan, and the
//! report is checked: every round's ring total matches the sum of the
//! frontend's own digests.

use std::net::{SocketAddr, SocketAddrV4};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use ebb_core::{EbbId, NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_event::Sender;
use ebb_messenger::{acceptor, create_messenger, Frontend, MessengerSettings, FRONTEND_NODE};
use ring::{run_frontend, Report, WorkPlan, WorkerNode, EXIT_OK};

/// Global ids each node gets.
const IDS_PER_NODE: u32 = 64;
/// How long a test waits for the frontend's report.
const REPORT_WITHIN: Duration = Duration::from_secs(60);

fn node_config() -> ebb_hosted::Config {
    ebb_hosted::Config {
        cores: Some(1),
        pin: false,
        handle_signals: false,
        ..ebb_hosted::Config::default()
    }
}

/// The frontend, on its own thread: expects `count` nodes, tells the test
/// where it listens and their ranges, runs `plan` once they announced.
fn start_frontend(
    count: u32,
    plan: WorkPlan,
) -> (
    SocketAddrV4,
    Vec<std::ops::Range<u32>>,
    mpsc::Receiver<Report>,
) {
    let (setup_tx, setup_rx) = mpsc::channel();
    let (report_tx, report_rx) = mpsc::channel();
    thread::spawn(move || {
        let report = ebb_hosted::run_task(node_config(), move || async move {
            let messenger = create_messenger(MessengerSettings::new(FRONTEND_NODE)).unwrap();
            let registry = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
            registry.serve(messenger).unwrap();
            let ranges: Vec<_> = (1..=count)
                .map(|node| registry.expect(NodeId(node), IDS_PER_NODE).unwrap())
                .collect();
            let addr =
                ebb_net::listen("127.0.0.1:0".parse().unwrap(), acceptor(messenger)).unwrap();
            let SocketAddr::V4(addr) = addr else {
                unreachable!("listening on IPv4")
            };
            setup_tx.send((addr, ranges.clone())).unwrap();
            let mut nodes = Vec::new();
            for (node, range) in (1..=count).zip(&ranges) {
                registry
                    .when_announced(NodeId(node))
                    .await
                    .expect("the node announces itself");
                nodes.push(WorkerNode {
                    node: NodeId(node),
                    worker: EbbId::new(range.start).unwrap(),
                });
            }
            run_frontend(messenger, nodes, plan).await
        })
        .unwrap();
        let _ = report_tx.send(report);
    });
    let (addr, ranges) = setup_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the frontend listens");
    (addr, ranges, report_rx)
}

/// Node `node`, on its own thread, joined as its contract says; it runs
/// until `stop` is sent (or dropped).
fn start_node(node: u32, frontend: SocketAddrV4, ids: &std::ops::Range<u32>) -> Sender<()> {
    let contract = ebb_app::NodeContract {
        node,
        frontend,
        ebb_ids_start: ids.start,
        ebb_ids_end: ids.end,
        messenger_port: 0,
    };
    let (stop_tx, stop_rx) = ebb_event::oneshot::<()>();
    thread::spawn(move || {
        ebb_hosted::run_task(node_config(), move || async move {
            ring::node::try_join(contract)
                .await
                .expect("the node joins");
            let _ = stop_rx.await;
        })
        .unwrap();
    });
    stop_tx
}

#[test]
fn three_nodes_work_pass_the_token_and_the_totals_match() {
    let plan = WorkPlan {
        bytes: 100_000,
        rounds: 3,
        seed: 16,
    };
    let (frontend, ranges, report) = start_frontend(3, plan);
    let stops: Vec<_> = (1..=3)
        .zip(&ranges)
        .map(|(node, ids)| start_node(node, frontend, ids))
        .collect();
    let report = report
        .recv_timeout(REPORT_WITHIN)
        .expect("the frontend reports within 60 s");
    for stop in stops {
        stop.send(());
    }
    println!("{report}");
    assert_eq!(report.exit_code(), EXIT_OK, "{report}");
    assert_eq!(report.rounds.len(), 3);
    for (round, outcome) in (1..).zip(&report.rounds) {
        assert_eq!(outcome.round, round);
        assert_eq!(outcome.nodes, 3);
        assert!(outcome.matched);
        let expected = (0..3).fold(0u64, |sum, slice| {
            sum.wrapping_add(ring::digest_bytes(&ring::slice_data(
                16, round, slice, 100_000,
            )))
        });
        assert_eq!(outcome.total, Some(expected), "round {round}'s ring total");
    }
    for (node, outcome) in (1..).zip(&report.nodes) {
        assert_eq!(outcome.node.node, NodeId(node));
        assert_eq!(outcome.lost, None);
        assert_eq!(outcome.digests.len(), 3);
    }
    assert!(report.to_string().ends_with("ring: OK (0 nodes lost)"));
}
