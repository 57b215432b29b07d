//! The etcd map against a real etcd (each test starts its own through
//! `ebb_testbed::Etcd`): the must-shows of issue 17 for the store. The
//! map's futures are polled here by a plain thread, not by tokio, as
//! Ebbflow's event loops poll them.

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::ops::Range;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use ebb_core::{
    node_key, Change, GlobalIdMap, Lease, MapError, NodeId, Swap, FIRST_GLOBAL_ID, NEXT_GLOBAL_ID,
};
use ebb_etcd::{EtcdGlobalIdMap, EtcdOptions};
use ebb_testbed::need::Need;
use ebb_testbed::{skip_unless, Etcd, KilledOnDrop};

/// Wakes the thread that polls.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on this thread until it is ready; panics after `bound`
/// (no test hangs).
fn within<F: Future>(bound: Duration, future: F) -> F::Output {
    let deadline = Instant::now() + bound;
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
            return value;
        }
        let now = Instant::now();
        assert!(now < deadline, "not done within {bound:?}");
        std::thread::park_timeout(deadline - now);
    }
}

/// The bound on one operation while etcd runs.
const BOUND: Duration = Duration::from_secs(10);

fn map(etcd: &Etcd, app: &str) -> EtcdGlobalIdMap {
    EtcdGlobalIdMap::open(&EtcdOptions::new(etcd.endpoint(), app)).expect("map opens")
}

#[test]
fn keys_values_and_swaps_live_under_the_application() {
    skip_unless!(Need::Etcd);
    let etcd = Etcd::start().expect("etcd");
    let ring = map(&etcd, "ring");
    let other = map(&etcd, "other");
    assert_eq!(ring.prefix(), "/ebbflow/ring/");
    within(BOUND, ring.set("ebb/40000", b"a".to_vec(), None)).unwrap();
    within(BOUND, ring.set("nodes/1", b"n1".to_vec(), None)).unwrap();
    within(BOUND, ring.set("nodes/2", b"n2".to_vec(), None)).unwrap();
    assert_eq!(
        within(BOUND, ring.get("ebb/40000")),
        Ok(Some(b"a".to_vec()))
    );
    assert_eq!(within(BOUND, other.get("ebb/40000")), Ok(None));
    assert_eq!(
        within(BOUND, ring.list("nodes/")),
        Ok(vec![
            ("nodes/1".to_owned(), b"n1".to_vec()),
            ("nodes/2".to_owned(), b"n2".to_vec())
        ])
    );
    assert_eq!(within(BOUND, ring.list("")).unwrap().len(), 3);
    assert_eq!(within(BOUND, other.list("")), Ok(vec![]));
    // Compare-and-swap: absent expected, present expected, conflicts.
    assert_eq!(
        within(BOUND, ring.compare_and_swap("k", None, b"1".to_vec())),
        Ok(Swap::Done)
    );
    assert_eq!(
        within(BOUND, ring.compare_and_swap("k", None, b"2".to_vec())),
        Ok(Swap::Conflict(Some(b"1".to_vec())))
    );
    assert_eq!(
        within(
            BOUND,
            ring.compare_and_swap("k", Some(b"1".to_vec()), b"2".to_vec())
        ),
        Ok(Swap::Done)
    );
    assert_eq!(
        within(
            BOUND,
            ring.compare_and_swap("absent", Some(b"1".to_vec()), b"2".to_vec())
        ),
        Ok(Swap::Conflict(None))
    );
    assert_eq!(within(BOUND, ring.get("k")), Ok(Some(b"2".to_vec())));
    assert_eq!(within(BOUND, ring.delete("k")), Ok(true));
    assert_eq!(within(BOUND, ring.delete("k")), Ok(false));
    // Bad keys never reach etcd.
    assert!(matches!(
        within(BOUND, ring.get("../other/ebb/40000")),
        Err(MapError::InvalidKey { .. })
    ));
    // A counter somebody else wrote (past the map: it refuses such
    // writes) is reported, not misread or changed.
    put_past_the_map(
        &etcd,
        &format!("{}{NEXT_GLOBAL_ID}", other.prefix()),
        b"lots",
    );
    match within(BOUND, other.reserve_range(NodeId(1), 4)) {
        Err(MapError::Corrupt { key, .. }) => assert_eq!(key, NEXT_GLOBAL_ID),
        result => panic!("{result:?}"),
    }
    assert_eq!(
        within(BOUND, other.get(NEXT_GLOBAL_ID)),
        Ok(Some(b"lots".to_vec()))
    );
}

/// Writes `value` under etcd key `key` with etcd's own client, as a
/// program other than the map would.
fn put_past_the_map(etcd: &Etcd, key: &str, value: &[u8]) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let written = tokio::time::timeout(BOUND, async {
            let url = format!("http://{}", etcd.endpoint());
            let mut client = etcd_client::Client::connect([url], None).await?;
            client.put(key, value, None).await.map(drop)
        })
        .await;
        written.expect("etcd answers").expect("the put");
    });
}

/// Only `reserve_range` moves the id counter: `set`, `delete` and
/// `compare_and_swap` of it (or any key under the map's own prefix) are
/// refused with `InvalidKey`, and ranges go on after the last one.
#[test]
fn the_id_counter_cannot_be_rewound_through_the_map() {
    skip_unless!(Need::Etcd);
    let etcd = Etcd::start().expect("etcd");
    let ring = map(&etcd, "ring");
    let first = within(BOUND, ring.reserve_range(NodeId(1), 64)).expect("reserved");
    let refused = |result: Result<(), MapError>, key: &str| match result {
        Err(MapError::InvalidKey { key: said, why }) => {
            assert_eq!(said, key);
            assert!(why.contains("only reserve_range"), "{why}");
        }
        other => panic!("writing {key} gave {other:?}"),
    };
    let start = FIRST_GLOBAL_ID.to_string().into_bytes();
    refused(
        within(BOUND, ring.set(NEXT_GLOBAL_ID, start.clone(), None)),
        NEXT_GLOBAL_ID,
    );
    refused(
        within(BOUND, ring.delete(NEXT_GLOBAL_ID)).map(drop),
        NEXT_GLOBAL_ID,
    );
    refused(
        within(
            BOUND,
            ring.compare_and_swap(
                NEXT_GLOBAL_ID,
                Some(first.end.to_string().into_bytes()),
                start,
            ),
        )
        .map(drop),
        NEXT_GLOBAL_ID,
    );
    refused(
        within(BOUND, ring.set("ids/spare", b"1".to_vec(), None)),
        "ids/spare",
    );
    assert_eq!(
        within(BOUND, ring.get(NEXT_GLOBAL_ID)),
        Ok(Some(first.end.to_string().into_bytes()))
    );
    let second = within(BOUND, ring.reserve_range(NodeId(2), 64)).expect("reserved");
    assert_eq!(second, first.end..first.end + 64);
}

#[test]
fn two_frontends_reserving_concurrently_never_overlap() {
    skip_unless!(Need::Etcd);
    const RESERVATIONS: u32 = 150;
    let etcd = Etcd::start().expect("etcd");
    // Two maps: two clients with their own connections, as two frontends.
    let reserve = |node: u32| {
        let map = map(&etcd, "ring");
        move || {
            (0..RESERVATIONS)
                .map(|i| {
                    let len = 1 + (i * 7 + node) % 13;
                    let range =
                        within(BOUND, map.reserve_range(NodeId(node), len)).expect("reserved");
                    assert_eq!(range.len(), len as usize);
                    range
                })
                .collect::<Vec<Range<u32>>>()
        }
    };
    let (first, second) = (reserve(1), reserve(2));
    let (first, second) = std::thread::scope(|scope| {
        let first = scope.spawn(first);
        let second = scope.spawn(second);
        (first.join().unwrap(), second.join().unwrap())
    });
    let mut all: Vec<Range<u32>> = first.into_iter().chain(second).collect();
    all.sort_by_key(|range| range.start);
    // No overlap, and no gap: together they are one run from the first
    // global id.
    assert_eq!(all[0].start, FIRST_GLOBAL_ID);
    for pair in all.windows(2) {
        assert_eq!(
            pair[0].end, pair[1].start,
            "{:?} then {:?}",
            pair[0], pair[1]
        );
    }
    let total: usize = all.iter().map(ExactSizeIterator::len).sum();
    let end = all.last().unwrap().end;
    assert_eq!(end as usize, FIRST_GLOBAL_ID as usize + total);
    let stored = within(BOUND, map(&etcd, "ring").get(NEXT_GLOBAL_ID)).unwrap();
    assert_eq!(stored, Some(end.to_string().into_bytes()));
}

/// The environment variable that turns [`registering_node`] into a node.
const NODE_ENV: &str = "EBB_ETCD_TEST_NODE_ENDPOINT";
/// The node's lease's time to live (etcd's shortest is about 2 s).
const NODE_TTL: Duration = Duration::from_secs(2);

/// Not a test on its own: run by [`a_killed_nodes_registration_expires_with_its_lease`]
/// as a child process with [`NODE_ENV`] set, it registers node 7 under a
/// lease, says `registered LEASE`, and keeps the lease alive until killed.
#[test]
#[ignore = "a child process of a_killed_nodes_registration_expires_with_its_lease"]
fn registering_node() {
    let Ok(endpoint) = std::env::var(NODE_ENV) else {
        return;
    };
    let map = EtcdGlobalIdMap::open(&EtcdOptions::new(endpoint, "ring")).unwrap();
    let lease = within(BOUND, map.grant_lease(NODE_TTL)).unwrap();
    within(
        BOUND,
        map.set(&node_key(NodeId(7)), b"10.96.0.8".to_vec(), Some(lease)),
    )
    .unwrap();
    // Past libtest's output capture, straight to the parent's pipe.
    let mut out = std::io::stdout();
    writeln!(out, "registered {}", lease.0).unwrap();
    out.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(400));
        within(BOUND, map.keep_alive(lease)).unwrap();
    }
}

#[test]
fn a_killed_nodes_registration_expires_with_its_lease() {
    skip_unless!(Need::Etcd);
    let etcd = Etcd::start().expect("etcd");
    let map = map(&etcd, "ring");
    let mut node = KilledOnDrop(
        Command::new(std::env::current_exe().unwrap())
            .args(["registering_node", "--exact", "--ignored", "--nocapture"])
            .env(NODE_ENV, etcd.endpoint())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the node process"),
    );
    let mut lines = BufReader::new(node.0.stdout.take().unwrap()).lines();
    let lease = loop {
        let line = lines.next().expect("the node said it registered").unwrap();
        // libtest's "test registering_node ... " may start the line.
        if let Some((_, lease)) = line.rsplit_once("registered ") {
            break Lease(lease.parse().unwrap());
        }
    };
    let key = node_key(NodeId(7));
    // Kept alive: it outlives its time to live twice over.
    let kept = Instant::now() + NODE_TTL * 2;
    while Instant::now() < kept {
        assert_eq!(
            within(BOUND, map.get(&key)),
            Ok(Some(b"10.96.0.8".to_vec()))
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let watch_from = within(BOUND, map.watch("nodes/"));
    let mut watch = watch_from.unwrap();
    // SIGKILL: nobody revokes the lease; it must run out.
    node.0.kill().unwrap();
    node.0.wait().unwrap();
    let killed = Instant::now();
    assert_eq!(
        within(NODE_TTL * 5, watch.changed()),
        Ok(Change {
            key: key.clone(),
            value: None
        })
    );
    assert_eq!(within(BOUND, map.get(&key)), Ok(None));
    eprintln!(
        "the registration expired {:?} after the kill",
        killed.elapsed()
    );
    // The holder's lease is gone: keeping it alive or writing under it says so.
    assert_eq!(
        within(BOUND, map.keep_alive(lease)),
        Err(MapError::LeaseExpired(lease))
    );
    assert_eq!(
        within(BOUND, map.set(&key, b"again".to_vec(), Some(lease))),
        Err(MapError::LeaseExpired(lease))
    );
    assert_eq!(
        within(BOUND, map.revoke(lease)),
        Err(MapError::LeaseExpired(lease))
    );
}

#[test]
fn a_watch_delivers_updates_and_deletes() {
    skip_unless!(Need::Etcd);
    let etcd = Etcd::start().expect("etcd");
    let map = map(&etcd, "ring");
    let other_app = self::map(&etcd, "other");
    let mut watch = within(BOUND, map.watch("nodes/")).unwrap();
    within(BOUND, map.set("ebb/40000", b"not watched".to_vec(), None)).unwrap();
    within(
        BOUND,
        other_app.set("nodes/1", b"another app".to_vec(), None),
    )
    .unwrap();
    within(BOUND, map.set("nodes/1", b"up".to_vec(), None)).unwrap();
    assert_eq!(
        within(BOUND, watch.changed()),
        Ok(Change {
            key: "nodes/1".to_owned(),
            value: Some(b"up".to_vec())
        })
    );
    within(BOUND, map.delete("nodes/1")).unwrap();
    assert_eq!(
        within(BOUND, watch.changed()),
        Ok(Change {
            key: "nodes/1".to_owned(),
            value: None
        })
    );
    // A revoked lease deletes its entries, and the watch says so.
    let lease = within(BOUND, map.grant_lease(Duration::from_secs(30))).unwrap();
    within(BOUND, map.set("nodes/2", b"leased".to_vec(), Some(lease))).unwrap();
    assert_eq!(
        within(BOUND, watch.changed()).map(|change| change.value),
        Ok(Some(b"leased".to_vec()))
    );
    within(BOUND, map.revoke(lease)).unwrap();
    assert_eq!(
        within(BOUND, watch.changed()),
        Ok(Change {
            key: "nodes/2".to_owned(),
            value: None
        })
    );
}

/// Every kind of operation, with the error each gave (`None`: it worked).
fn try_everything(
    map: &EtcdGlobalIdMap,
    lease: Lease,
    bound: Duration,
) -> Vec<(&'static str, Option<MapError>)> {
    fn error<T>(result: Result<T, MapError>) -> Option<MapError> {
        result.err()
    }
    vec![
        ("get", error(within(bound, map.get("ebb/40000")))),
        (
            "set",
            error(within(bound, map.set("ebb/40001", b"x".to_vec(), None))),
        ),
        ("delete", error(within(bound, map.delete("ebb/40001")))),
        (
            "compare_and_swap",
            error(within(
                bound,
                map.compare_and_swap("k", None, b"v".to_vec()),
            )),
        ),
        ("list", error(within(bound, map.list("")))),
        (
            "reserve_range",
            error(within(bound, map.reserve_range(NodeId(1), 8))),
        ),
        (
            "grant_lease",
            error(within(bound, map.grant_lease(Duration::from_secs(30)))),
        ),
        ("keep_alive", error(within(bound, map.keep_alive(lease)))),
        ("watch", error(within(bound, map.watch("nodes/")))),
    ]
}

/// How many writes are in flight when the stop test stops etcd.
const IN_FLIGHT: usize = 200;

/// What a write in flight when etcd stopped said became of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InFlight {
    Applied,
    NotApplied,
    Unknown,
}

/// How many writes said each.
fn count(said: &[InFlight]) -> Vec<(InFlight, usize)> {
    [InFlight::Applied, InFlight::NotApplied, InFlight::Unknown]
        .into_iter()
        .map(|kind| (kind, said.iter().filter(|s| **s == kind).count()))
        .collect()
}

#[test]
fn etcd_stopped_mid_run_gives_clear_errors_and_the_map_recovers() {
    skip_unless!(Need::Etcd);
    let mut etcd = Etcd::start().expect("etcd");
    let map = map(&etcd, "ring");
    let endpoint = format!("etcd at {}", etcd.endpoint());
    within(BOUND, map.set("ebb/40000", b"kept".to_vec(), None)).unwrap();
    let before = within(BOUND, map.reserve_range(NodeId(1), 8)).unwrap();
    let lease = within(BOUND, map.grant_lease(Duration::from_secs(60))).unwrap();
    let mut watch = within(BOUND, map.watch("nodes/")).unwrap();
    // Writes in flight when etcd stops (each is sent as soon as it is
    // made): every one must say honestly what became of it.
    let keys: Vec<String> = (0..IN_FLIGHT).map(|n| format!("inflight/{n}")).collect();
    let in_flight: Vec<_> = keys
        .iter()
        .map(|key| map.set(key, b"w".to_vec(), None))
        .collect();

    etcd.stop();
    // The open watch ends, saying etcd went away.
    match within(BOUND, watch.changed()) {
        Err(MapError::Unreachable { endpoint: said, .. }) => assert_eq!(said, endpoint),
        other => panic!("the watch gave {other:?}"),
    }
    let bound = ebb_etcd::DEFAULT_TIMEOUT + Duration::from_secs(3);
    let in_flight: Vec<InFlight> = in_flight
        .into_iter()
        .map(|write| match within(bound, write) {
            Ok(()) => InFlight::Applied,
            Err(MapError::Unreachable { endpoint: said, .. }) if said == endpoint => {
                InFlight::NotApplied
            }
            Err(MapError::OutcomeUnknown { endpoint: said, .. }) if said == endpoint => {
                InFlight::Unknown
            }
            Err(other) => panic!("a write in flight when etcd stopped gave {other:?}"),
        })
        .collect();
    eprintln!("writes in flight at the stop: {:?}", count(&in_flight));
    // Every operation fails within the map's timeout (3 s) and a margin,
    // naming etcd; none hangs, none pretends to work.
    for (operation, error) in try_everything(&map, lease, bound) {
        match error {
            Some(MapError::Unreachable {
                endpoint: said,
                reason,
            }) => {
                assert_eq!(said, endpoint, "{operation}");
                eprintln!(
                    "{operation}: {}",
                    MapError::Unreachable {
                        endpoint: said,
                        reason
                    }
                );
            }
            other => panic!("{operation} with etcd stopped gave {other:?}"),
        }
    }

    etcd.restart().expect("etcd restarts");
    // The same map serves again, and the data is still there.
    let recovered = Instant::now() + Duration::from_secs(20);
    loop {
        match within(BOUND, map.get("ebb/40000")) {
            Ok(value) => {
                assert_eq!(value, Some(b"kept".to_vec()));
                break;
            }
            Err(MapError::Unreachable { .. }) if Instant::now() < recovered => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(error) => panic!("not recovered: {error}"),
        }
    }
    for (operation, error) in try_everything(&map, lease, BOUND) {
        assert_eq!(error, None, "{operation} after the restart");
    }
    // What the writes in flight said holds: applied ones are there,
    // unreachable ones are not.
    for (key, said) in keys.iter().zip(&in_flight) {
        let stored = within(BOUND, map.get(key)).unwrap();
        match said {
            InFlight::Applied => assert_eq!(stored, Some(b"w".to_vec()), "{key}"),
            InFlight::NotApplied => assert_eq!(stored, None, "{key}"),
            InFlight::Unknown => {}
        }
    }
    // Ranges go on after the ones handed out before the stop.
    let after = within(BOUND, map.reserve_range(NodeId(1), 8)).unwrap();
    assert!(after.start >= before.end, "{before:?} then {after:?}");
    // A new watch works.
    let mut watch = within(BOUND, map.watch("nodes/")).unwrap();
    within(BOUND, map.set("nodes/3", b"back".to_vec(), None)).unwrap();
    assert_eq!(
        within(BOUND, watch.changed()).map(|change| change.key),
        Ok("nodes/3".to_owned())
    );
}
