//! Ring in one process: a frontend and three nodes, each a hosted node
//! (its own Ebbflow runtime on a thread) over kernel TCP on 127.0.0.1.
//! The nodes join as a launcher would start them (a boot contract: they
//! create their Messenger, make the first id of their range the worker,
//! listen and announce themselves), the frontend runs the plan, and the
//! report is checked: every round's ring total matches the sum of the
//! frontend's own digests.
//!
//! And a node lost mid-ring: node 2 freezes (its only core blocks, as a
//! stopped VM: its sockets stay open and nothing answers) when the token
//! reaches it, with node 1's call to it pending. The test, as the
//! frontend's launcher would, declares node 2 lost on the frontend
//! (`Frontend::forget`, `lose_node`); the frontend's loss notice fails
//! node 1's call, node 1 reports where the ring broke, and the frontend
//! reports node 2 lost and finishes every round with nodes 1 and 3.

mod frontend_support;

use std::net::SocketAddrV4;
use std::rc::Rc;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use ebb_core::{EbbId, NodeId, MAX_EBB_IDS};
use ebb_event::Sender;
use ebb_messenger::{Answer, MessengerError, Request, Service, ServiceError};
use ring::{run_frontend, Report, WorkPlan, EXIT_OK, TOKEN};

/// How long a test waits for the frontend's report.
const REPORT_WITHIN: Duration = Duration::from_secs(60);

/// The frontend's side of a test run.
struct FrontendSide {
    addr: SocketAddrV4,
    ranges: Vec<std::ops::Range<u32>>,
    report: mpsc::Receiver<Report>,
    /// Declares a node lost on the frontend, as its launcher would.
    lose: Sender<NodeId>,
}

/// The frontend, on its own thread: expects `count` nodes, tells the test
/// where it listens and their ranges, runs `plan` once they announced (a
/// node declared lost meanwhile is forgotten and lost on the frontend).
fn start_frontend(count: u32, plan: WorkPlan) -> FrontendSide {
    let (setup_tx, setup_rx) = mpsc::channel();
    let (lose_tx, lose_rx) = ebb_event::oneshot::<NodeId>();
    let (report_tx, report_rx) = mpsc::channel();
    thread::spawn(move || {
        let report = ebb_hosted::run_task(
            ebb_hosted::Config::one_core_side_by_side(),
            move || async move {
                let frontend = Rc::new(frontend_support::start(count));
                setup_tx
                    .send((frontend_support::v4(&frontend), frontend.ranges.clone()))
                    .unwrap();
                let nodes = frontend_support::announced(&frontend).await;
                let launcher = Rc::clone(&frontend);
                ebb_event::spawn_task(async move {
                    if let Ok(node) = lose_rx.await {
                        launcher.lose(node);
                    }
                });
                run_frontend(frontend.messenger, nodes, plan).await
            },
        )
        .unwrap();
        let _ = report_tx.send(report);
    });
    let (addr, ranges) = setup_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the frontend listens");
    FrontendSide {
        addr,
        ranges,
        report: report_rx,
        lose: lose_tx,
    }
}

/// Node `node`, on its own thread, joined as its contract says; it runs
/// until `stop` is sent (or dropped). A node given a `freeze` blocks its
/// core when the token reaches it, telling the test, until `freeze`'s
/// receiver says go on.
fn start_node(
    node: u32,
    frontend: SocketAddrV4,
    ids: &std::ops::Range<u32>,
    freeze: Option<Freeze>,
) -> Sender<()> {
    let ids = ids.clone();
    ebb_hosted::node_thread::start_node(
        ebb_hosted::Config::one_core_side_by_side(),
        node,
        frontend,
        ids,
        |contract| async move {
            let joined = ring::node::try_join(contract)
                .await
                .expect("the node joins");
            if let Some(freeze) = freeze {
                let rep = joined.messenger.get().unwrap();
                rep.local()
                    .shared()
                    .register(joined.worker.id(), freeze.around(joined.worker));
            }
        },
    )
}

/// What a frozen node tells the test, and waits for.
struct Freeze {
    frozen: mpsc::Sender<()>,
    thaw: mpsc::Receiver<()>,
}

impl Freeze {
    /// The worker's service, except that the token freezes the node.
    fn around(self, worker: ebb_core::EbbRef<ring::Worker>) -> ebb_messenger::SharedService {
        let frozen = Mutex::new(self.frozen);
        let thaw = Mutex::new(self.thaw);
        Arc::new(move |request: Request| {
            if request.message == TOKEN {
                let _ = frozen.lock().unwrap().send(());
                let _ = thaw.lock().unwrap().recv_timeout(Duration::from_secs(120));
                return Answer::Now(Err(ServiceError::Refused(99)));
            }
            match worker.get() {
                Ok(rep) => rep.answer(request),
                Err(_) => Answer::Now(Err(ServiceError::NoRepresentative)),
            }
        })
    }
}

/// Nodes 1 to 3 of `frontend`'s cluster; `frozen` freezes one of them.
fn start_nodes(frontend: &FrontendSide, mut frozen: Option<(u32, Freeze)>) -> Vec<Sender<()>> {
    (1..=3)
        .zip(&frontend.ranges)
        .map(|(node, ids)| {
            let freeze = frozen
                .take_if(|(which, _)| *which == node)
                .map(|(_, freeze)| freeze);
            start_node(node, frontend.addr, ids, freeze)
        })
        .collect()
}

/// The ring's total the frontend expects: the sum of its own digests of
/// round `round`'s `slices`.
fn expected_total(plan: WorkPlan, round: u32, slices: &[u32]) -> u64 {
    slices.iter().fold(0u64, |sum, &slice| {
        let data = ring::slice_data(plan.seed, round, slice, plan.bytes);
        sum.wrapping_add(ring::digest_bytes(&data))
    })
}

#[test]
fn three_nodes_work_pass_the_token_and_the_totals_match() {
    let plan = WorkPlan {
        bytes: 100_000,
        rounds: 3,
        seed: 16,
        ..WorkPlan::default()
    };
    let frontend = start_frontend(3, plan);
    let stops = start_nodes(&frontend, None);
    let report = frontend
        .report
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
        assert_eq!(
            outcome.total,
            Some(expected_total(plan, round, &[0, 1, 2])),
            "round {round}'s ring total"
        );
    }
    for (node, outcome) in (1..).zip(&report.nodes) {
        assert_eq!(outcome.node.node, NodeId(node));
        assert_eq!(outcome.lost, None);
        assert_eq!(outcome.digests.len(), 3);
    }
    assert!(report.to_string().ends_with("ring: OK (0 nodes lost)"));
}

/// Runs `plan` with node 2 frozen when the token reaches it; `declare`
/// then declares it lost on the frontend, as its launcher would. The
/// report.
fn run_with_node_2_frozen(plan: WorkPlan, declare: bool) -> Report {
    let frontend = start_frontend(3, plan);
    let (frozen_tx, frozen_rx) = mpsc::channel();
    let (thaw_tx, thaw_rx) = mpsc::channel();
    let freeze = Freeze {
        frozen: frozen_tx,
        thaw: thaw_rx,
    };
    let stops = start_nodes(&frontend, Some((2, freeze)));
    frozen_rx
        .recv_timeout(REPORT_WITHIN)
        .expect("the token reaches node 2 within 60 s");
    if declare {
        frontend.lose.send(NodeId(2));
    }
    let report = frontend.report.recv_timeout(REPORT_WITHIN);
    let _ = thaw_tx.send(());
    for stop in stops {
        stop.send(());
    }
    let report = report.expect("the frontend reports within 60 s of the freeze");
    println!("{report}");
    report
}

/// Node 2, and only it, was lost in round 1 for `why`; nodes 1 and 3
/// finished every round with the right totals.
fn assert_node_2_lost_and_the_others_finished(report: &Report, why: &str) {
    let plan = report.plan;
    assert_eq!(report.exit_code(), EXIT_OK, "{report}");
    let lost: Vec<_> = report.lost().collect();
    assert_eq!(lost.len(), 1, "{report}");
    assert_eq!(lost[0].node.node, NodeId(2));
    assert_eq!(lost[0].lost, Some((1, why.to_owned())), "{report}");
    assert_eq!(report.rounds.len(), 3);
    for outcome in &report.rounds {
        assert_eq!(outcome.nodes, 2, "{report}");
        assert!(outcome.matched, "{report}");
        assert_eq!(
            outcome.total,
            Some(expected_total(plan, outcome.round, &[0, 2]))
        );
    }
    for survivor in [0, 2] {
        assert_eq!(report.nodes[survivor].digests.len(), 3);
    }
    assert!(report
        .to_string()
        .contains("node 2: LOST in round 1: token failed"));
}

#[test]
fn a_node_lost_mid_ring_is_reported_and_the_others_finish() {
    let plan = WorkPlan {
        bytes: 10_000,
        rounds: 3,
        seed: 5,
        ..WorkPlan::default()
    };
    let report = run_with_node_2_frozen(plan, true);
    // Node 1's call to node 2 failed with the loss notice.
    let why = format!(
        "token failed: {}",
        MessengerError::NodeLost { node: NodeId(2) }
    );
    assert_node_2_lost_and_the_others_finished(&report, &why);
}

/// The frontend program may run the frontend as a task on any of its
/// cores (`ebb_event::spawn_task_on` wants a `Send` future).
#[test]
fn the_frontend_future_can_move_to_another_core() {
    fn is_send<T: Send>(_: &T) {}
    // Built, never polled: no runtime is needed.
    let messenger =
        ebb_core::EbbRef::<ebb_messenger::Messenger>::bind(EbbId::new(MAX_EBB_IDS - 1).unwrap())
            .unwrap();
    is_send(&run_frontend(messenger, Vec::new(), WorkPlan::default()));
}

/// A node that freezes and is never declared lost (a stopped VM, a
/// livelocked guest): node 1's token call to it gives up after its bound,
/// the ring is reported broken at node 2, the frontend reports node 2
/// lost (and loses it on its Messenger), and the others finish.
#[test]
fn a_frozen_node_never_declared_lost_is_lost_by_timeout_and_the_others_finish() {
    let unit = Duration::from_millis(500);
    let plan = WorkPlan {
        bytes: 10_000,
        rounds: 3,
        seed: 6,
        call_timeout: unit,
    };
    // Nobody declares node 2 lost: only the bounds can end the wait.
    let report = run_with_node_2_frozen(plan, false);
    // Node 1's call to node 2 carried the token with one hop after node 2.
    let limit = ring::token_bound(unit, 1);
    let why = format!(
        "token failed: node 2 did not answer within {} ms",
        limit.as_millis()
    );
    assert_node_2_lost_and_the_others_finished(&report, &why);
}
