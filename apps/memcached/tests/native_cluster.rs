//! memcached as one cache across native nodes under QEMU (needs root,
//! /dev/net/tun, `ip`, QEMU and etcd; skipped otherwise): the test
//! process is the frontend (`ebb_cluster::frontend`, the runtime
//! `./ebb cluster up memcached` runs, with a private etcd as the global
//! id map: `MapChoice::StartEtcd`), and three native memcached nodes
//! boot from one image, each told its boot contract.
//!
//! 0. libmemcached's `memccapable` (ascii and binary) and pymemcache's
//!    integration tests pass through each node (`client_tools`), and
//!    clients that send a request for another node's key and hang up
//!    at once leave every node serving.
//! 1. 10,000 keys with checksummed values written through node 1 read
//!    back identically through nodes 2 and 3.
//! 2. Node 3's QEMU is killed (SIGKILL, as a crash): from that moment
//!    on, every value read through nodes 1 and 2 is the one written (a
//!    miss is allowed, a wrong value never); within the lease's time to
//!    live and some slack the survivors go by a map without node 3, its
//!    keys miss and every other key reads back.
//! 3. A node is added (node 4) while a client writes and reads
//!    checksummed values through every node: every read is the value
//!    last written or a miss; once node 4 is in, every key reads back
//!    through each node as the last value written, or misses where
//!    node 4 took it.
//!
//! The clients run in this process, on a thread that entered the
//! cluster's namespace (`run_inside_named`): node k is at
//! 10.96.0.(k+1):11211 only inside it. Our own text client
//! (`cluster_support::Client`) rather than python in the namespace:
//! every socket has a time limit, each reply is checked byte for byte,
//! and no other program needs to be installed. Afterwards no
//! namespace, QEMU, etcd or etcd data directory of the test is left.

mod client_tools;
mod cluster_support;

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use client_tools::client_suites_pass_through_each;
use cluster_support::{
    key, read_all, value, write_through_first_read_through_others, Client, Seen,
};
use ebb_cluster::frontend::{run_frontend, FrontendHandle, FrontendOptions, MapChoice};
use ebb_core::NodeId;
use ebb_testbed::{skip_unless, Need};
use memcached::cluster::node::LEASE_TTL;
use memcached::cluster::{ShardMap, SHARD_MAP_KEY};

const KEYS: u32 = 10_000;
/// Keys the client writes and reads while node 4 joins.
const JOIN_KEYS: u32 = 300;
/// memcached's port on every node.
const PORT: u16 = 11211;
/// The whole test's bound: three TCG boots side by side, a fourth, the
/// traffic, the teardown.
const TEST_LIMIT: Duration = Duration::from_secs(420);
/// How long a node may take from its announcement to serve clients, and
/// the nodes to agree on a map.
const WITHIN: Duration = Duration::from_secs(120);
/// How long after a kill the survivors may take to go by a map without
/// the dead node: its lease's time to live, and slack for TCG.
const LOSS_WITHIN: Duration = Duration::from_secs(LEASE_TTL.as_secs() + 20);

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

/// What the frontend program tells the test.
enum Event {
    /// The cluster's namespace and the nodes booted: id and QEMU pid.
    Booted(String, Vec<(u32, u32)>),
    /// Allocation failed: why.
    Failed(String),
    /// The stored shard map once it has the members asked for.
    Map(ShardMap),
}

/// What the test asks the frontend program, one step at a time.
struct Steps {
    kill: ebb_event::Sender<NodeId>,
    add: ebb_event::Sender<()>,
    stop: ebb_event::Sender<()>,
}

/// Polls the stored shard map until it has `members` members (bounded).
async fn map_with(frontend: &FrontendHandle, members: usize) -> Option<ShardMap> {
    let deadline = Instant::now() + WITHIN;
    while Instant::now() < deadline {
        if let Ok(Some(bytes)) = frontend.map().get(SHARD_MAP_KEY).await {
            if let Ok(map) = ShardMap::decode(&bytes) {
                if map.members().len() == members {
                    return Some(map);
                }
            }
        }
        ebb_event::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// The frontend program: boots 3 nodes, then kills and adds as told.
async fn program(
    frontend: FrontendHandle,
    events: mpsc::Sender<Event>,
    kill: ebb_event::Receiver<NodeId>,
    add: ebb_event::Receiver<()>,
    stop: ebb_event::Receiver<()>,
) -> i32 {
    let say_map = |map: Option<ShardMap>| match map {
        Some(map) => events.send(Event::Map(map)).is_ok(),
        None => {
            let _ = events.send(Event::Failed("the shard map did not change".into()));
            false
        }
    };
    let booted: Result<Vec<_>, _> = frontend.allocate(3).await.into_iter().collect();
    let nodes = match booted {
        Ok(nodes) => nodes,
        Err(error) => {
            let _ = events.send(Event::Failed(error.to_string()));
            return 1;
        }
    };
    let qemus = nodes.iter().map(|node| (node.id.0, node.pid)).collect();
    let _ = events.send(Event::Booted(frontend.namespace().to_owned(), qemus));
    if !say_map(map_with(&frontend, 3).await) {
        return 1;
    }
    let Ok(victim) = kill.await else { return 1 };
    if let Err(error) = frontend.kill(victim) {
        let _ = events.send(Event::Failed(error.to_string()));
        return 1;
    }
    if !say_map(map_with(&frontend, 2).await) || add.await.is_err() {
        return 1;
    }
    match frontend.allocate(1).await.pop() {
        Some(Ok(node)) => {
            let _ = events.send(Event::Booted(
                frontend.namespace().to_owned(),
                vec![(node.id.0, node.pid)],
            ));
        }
        other => {
            let why = other.map_or_else(|| "no node".to_owned(), |e| format!("{:?}", e.err()));
            let _ = events.send(Event::Failed(why));
            return 1;
        }
    }
    if !say_map(map_with(&frontend, 3).await) {
        return 1;
    }
    let _ = stop.await;
    0
}

/// The test's side of the events, bounded.
struct EventsIn(mpsc::Receiver<Event>);

impl EventsIn {
    fn next(&self) -> Event {
        self.0
            .recv_timeout(WITHIN)
            .expect("the frontend program answers")
    }

    /// Nodes booted (side by side under TCG: up to twice [`WITHIN`]).
    fn booted(&self) -> (String, Vec<(u32, u32)>) {
        let booted = self
            .0
            .recv_timeout(2 * WITHIN)
            .expect("the frontend program answers");
        match booted {
            Event::Booted(namespace, nodes) => (namespace, nodes),
            Event::Failed(why) => panic!("the nodes did not boot: {why}"),
            Event::Map(_) => panic!("a map before the nodes"),
        }
    }

    fn map(&self) -> ShardMap {
        match self.next() {
            Event::Map(map) => map,
            Event::Failed(why) => panic!("{why}"),
            Event::Booted(..) => panic!("nodes instead of a map"),
        }
    }
}

fn address(node: u32) -> SocketAddr {
    let last = u8::try_from(node + 1).expect("a node of the /24");
    SocketAddr::from(([10, 96, 0, last], PORT))
}

/// A client of `node` once it serves (it joins the cache first).
fn connect_when_serving(node: u32) -> Client {
    let deadline = Instant::now() + WITHIN;
    loop {
        if TcpStream::connect_timeout(&address(node), Duration::from_secs(1)).is_ok() {
            let mut client = Client::connect(address(node));
            if client.ask(b"version\r\n").starts_with("VERSION") {
                return client;
            }
        }
        assert!(Instant::now() < deadline, "node {node} does not serve");
        thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until a set through each client of a key `map` gives to each
/// other node is stored: the nodes then go by the same map. Keys a
/// node of `gone` owned are not used.
fn wait_until_served(clients: &mut [(u32, Client)], map: &ShardMap, gone: Option<&ShardMap>) {
    let nodes: Vec<u32> = clients.iter().map(|(node, _)| *node).collect();
    for (from, client) in clients.iter_mut() {
        for &to in &nodes {
            if to == *from {
                continue;
            }
            let probe = (0..)
                .map(|i| format!("probe:{i}").into_bytes())
                .find(|k| {
                    map.owner(k).unwrap().node == NodeId(to)
                        && gone.is_none_or(|g| nodes.contains(&g.owner(k).unwrap().node.0))
                })
                .unwrap();
            let deadline = Instant::now() + WITHIN;
            while client.store("set", &probe, b"p", "") != "STORED\r\n" {
                assert!(
                    Instant::now() < deadline,
                    "node {from} cannot reach node {to}"
                );
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Clients that send requests for another node's key and close at once,
/// without reading the reply: the node's connection gets the end of
/// the stream (or a reset, when its reply reaches a closed socket)
/// while it forwards. Each node goes on serving.
fn hang_up_while_forwarding(map: &ShardMap) {
    for node in 1..=3 {
        let foreign = (0..)
            .map(|i| format!("elsewhere:{i}").into_bytes())
            .find(|k| map.owner(k).unwrap().node != NodeId(node))
            .unwrap();
        for _ in 0..20 {
            let mut stream = TcpStream::connect_timeout(&address(node), Duration::from_secs(10))
                .expect("connects");
            let mut request = b"set ".to_vec();
            request.extend_from_slice(&foreign);
            request.extend_from_slice(b" 0 0 1\r\nx\r\nget ");
            request.extend_from_slice(&foreign);
            request.extend_from_slice(b"\r\n");
            stream.write_all(&request).expect("sends");
            // Closed at once, the reply unread.
        }
        let mut client = connect_when_serving(node);
        assert!(
            client.ask(b"version\r\n").starts_with("VERSION"),
            "node {node}"
        );
    }
}

/// Reads every key through `client`: each value found must be round
/// 1's; returns the hits (misses are allowed while a node is lost).
fn read_never_wrong(client: &mut Client, keys: u32) -> u32 {
    let mut hits = 0;
    for batch in (0..keys).collect::<Vec<_>>().chunks(100) {
        let asked: Vec<Vec<u8>> = batch.iter().map(|&i| key(i)).collect();
        for (k, data, _) in client.get("get", &asked) {
            let i: u32 = String::from_utf8_lossy(&k[4..]).parse().expect("a key:N");
            assert_eq!(data, value(i, 1), "key:{i} read a wrong value");
            hits += 1;
        }
    }
    hits
}

/// Key `i` of the keys written while a node joins.
fn join_key(i: u32) -> Vec<u8> {
    format!("join:{i}").into_bytes()
}

/// Sets each key through one node and reads it back through the next,
/// round after round, until `stop`, counting the rounds done in `done`;
/// a client sent on `joining` takes part from the next round on.
fn write_and_read(
    mut clients: Vec<(u32, Client)>,
    joining: &mpsc::Receiver<(u32, Client)>,
    done: &AtomicU32,
    stop: &AtomicBool,
) -> (Seen, Vec<(u32, Client)>) {
    let mut seen = Seen::default();
    while !stop.load(Ordering::SeqCst) {
        clients.extend(joining.try_iter());
        let count = clients.len();
        seen.rounds += 1;
        let round = seen.rounds + 100;
        for i in 0..JOIN_KEYS {
            let writer = (i as usize + seen.rounds as usize) % count;
            seen.set(&mut clients[writer].1, &join_key(i), i, round);
            seen.read_back(&mut clients[(writer + 1) % count].1, &join_key(i), i);
        }
        done.fetch_add(1, Ordering::SeqCst);
    }
    (seen, clients)
}

/// Runs `work` on a thread inside the cluster's namespace.
fn inside<R: Send>(namespace: &str, work: impl FnOnce() -> R + Send) -> R {
    ebb_testbed::netns::run_inside_named(namespace, work)
        .unwrap_or_else(|why| panic!("cannot enter {namespace}: {why}"))
}

/// The test's steps once the nodes booted: every node serves by the map
/// of three, then [`clients`]; the node added (id, QEMU).
fn run(namespace: &str, steps: Steps, events: EventsIn) -> Vec<(u32, u32)> {
    let three = events.map();
    inside(namespace, || {
        let mut clients: Vec<(u32, Client)> =
            (1..=3).map(|n| (n, connect_when_serving(n))).collect();
        wait_until_served(&mut clients, &three, None);
    });
    // Outside the namespace: pymemcache's environment comes from PyPI,
    // through the host's network; the clients run in the namespace.
    client_suites_pass_through_each(Some(namespace), &[address(1), address(2), address(3)]);
    inside(namespace, move || clients(steps, &events, &three))
}

/// The clients' part, inside the namespace; the node added (id, QEMU).
fn clients(steps: Steps, events: &EventsIn, three: &ShardMap) -> Vec<(u32, u32)> {
    hang_up_while_forwarding(three);
    let mut clients: Vec<(u32, Client)> = (1..=3).map(|n| (n, connect_when_serving(n))).collect();

    // 1. 10,000 keys through node 1, read back through 2 and 3.
    let started = Instant::now();
    let mut plain: Vec<Client> = clients.drain(..).map(|(_, c)| c).collect();
    write_through_first_read_through_others(&mut plain, KEYS);
    println!(
        "{KEYS} keys written through node 1 and read back through nodes 2 and 3 in {:?}",
        started.elapsed()
    );
    let mut clients: Vec<(u32, Client)> = (1..=3).zip(plain).collect();

    // 2. Node 3 killed: never a wrong value; then its keys miss.
    steps.kill.send(NodeId(3));
    let killed = Instant::now();
    clients.truncate(2);
    for (_, client) in &mut clients {
        read_never_wrong(client, KEYS);
    }
    let two = events.map();
    assert_eq!(two.epoch(), three.epoch() + 1);
    wait_until_served(&mut clients, &two, Some(three));
    let took = killed.elapsed();
    println!("the survivors went by a map without node 3 {took:?} after the kill");
    assert!(took < LOSS_WITHIN, "{took:?}");
    let was_3s = |i: u32| three.owner(&key(i)).unwrap().node == NodeId(3);
    for (node, client) in &mut clients {
        let (hits, misses) = read_all(client, KEYS, |i| (!was_3s(i)).then(|| value(i, 1)));
        println!("through node {node} after node 3 was killed: {hits} hits, {misses} misses");
        assert!(
            misses > KEYS / 5 && hits > KEYS / 3,
            "{hits} hits, {misses} misses"
        );
    }

    // 3. Node 4 added while a client writes and reads through every node.
    // The writer has done a round before the node boots, and two more
    // through all four nodes once the new map is in force.
    let stop_writing = Arc::new(AtomicBool::new(false));
    let rounds_done = Arc::new(AtomicU32::new(0));
    let (join_tx, join_rx) = mpsc::channel();
    let writer = {
        let stop = Arc::clone(&stop_writing);
        let done = Arc::clone(&rounds_done);
        let clients = std::mem::take(&mut clients);
        thread::spawn(move || write_and_read(clients, &join_rx, &done, &stop))
    };
    let rounds_past = |at_least: u32| {
        let deadline = Instant::now() + WITHIN;
        while rounds_done.load(Ordering::SeqCst) < at_least && !writer.is_finished() {
            assert!(Instant::now() < deadline, "the writer is stuck");
            thread::sleep(Duration::from_millis(20));
        }
    };
    rounds_past(1);
    steps.add.send(());
    let (_, added) = events.booted();
    assert_eq!(added.first().map(|(id, _)| *id), Some(4), "{added:?}");
    let four = events.map();
    assert_eq!(four.epoch(), two.epoch() + 1);
    let _ = join_tx.send((4, connect_when_serving(4)));
    rounds_past(rounds_done.load(Ordering::SeqCst) + 3);
    stop_writing.store(true, Ordering::SeqCst);
    let (seen, mut clients) = writer.join().expect("no wrong value was read");
    assert_eq!(clients.len(), 3, "node 4 took part");
    println!(
        "while node 4 joined: {} rounds, {} stored, {} refused, {} hits, {} misses",
        seen.rounds, seen.stored, seen.refused, seen.hits, seen.misses
    );
    assert!(seen.stored > 0 && seen.hits > 0);
    wait_until_served(&mut clients, &four, None);
    for (node, client) in &mut clients {
        for i in 0..JOIN_KEYS {
            let found = client.get("get", &[join_key(i)]);
            let want = seen.last.get(&i).map(|&round| value(i, round));
            match found.first() {
                Some((_, data, _)) => assert_eq!(Some(data), want.as_ref(), "join:{i} via {node}"),
                None => assert!(
                    want.is_none() || four.owner(&join_key(i)).unwrap().node == NodeId(4),
                    "join:{i} is node {}'s and missed through node {node}",
                    four.owner(&join_key(i)).unwrap().node
                ),
            }
        }
    }
    steps.stop.send(());
    added
}

#[test]
fn three_native_nodes_share_one_cache_survive_a_kill_and_take_a_new_node() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu, Need::Etcd);
    let image = ebb_testbed::native_image::build(&workspace_root(), "memcached")
        .expect("memcached's native image builds");
    let log_dir =
        std::env::temp_dir().join(format!("ebb-memcached-cluster-{}", std::process::id()));
    let mut options = FrontendOptions::new(image);
    options.app = "memcached".to_owned();
    options.map = MapChoice::StartEtcd;
    options.log_dir = log_dir.clone();
    options.messenger_port = 7600;
    options.ready_timeout = WITHIN;

    let (events_tx, events_rx) = mpsc::channel();
    let (kill_tx, kill_rx) = ebb_event::oneshot();
    let (add_tx, add_rx) = ebb_event::oneshot();
    let (stop_tx, stop_rx) = ebb_event::oneshot();
    let (done_tx, done_rx) = mpsc::channel();
    let started = Instant::now();
    thread::spawn(move || {
        let code = run_frontend(options, move |frontend| {
            program(frontend, events_tx, kill_rx, add_rx, stop_rx)
        });
        let _ = done_tx.send(code);
    });
    let events = EventsIn(events_rx);
    let (namespace, mut qemus) = events.booted();
    println!("3 nodes booted in {:?}", started.elapsed());
    let steps = Steps {
        kill: kill_tx,
        add: add_tx,
        stop: stop_tx,
    };
    // A failed assertion drops the steps: the program returns, and the
    // runtime tears the cluster down before the panic goes on.
    let ran = catch_unwind(AssertUnwindSafe(|| run(&namespace, steps, events)));
    let code = done_rx
        .recv_timeout(TEST_LIMIT.saturating_sub(started.elapsed()))
        .expect("the frontend finished in time");
    println!("the test took {:?}", started.elapsed());
    match ran {
        Ok(added) => qemus.extend(added),
        Err(panic) => resume_unwind(panic),
    }
    assert_eq!(code, Ok(0));

    // Nothing left: the namespace (its TAP devices and bridge went with
    // it), the QEMUs, etcd and its data.
    assert!(
        !ebb_testbed::netns::exists(&namespace),
        "{namespace} is left"
    );
    for (node, pid) in &qemus {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert!(
            !comm.contains("qemu"),
            "node {node}'s QEMU {pid} is running"
        );
    }
    let etcd_left = ebb_testbed::etcd::left_by_this_process();
    assert!(etcd_left.is_empty(), "{etcd_left:?}");
    let _ = std::fs::remove_dir_all(&log_dir);
}
