//! Memcached nodes of a cache in one process, for the cluster tests:
//! each a hosted node (its own Ebbflow runtime on a thread, one core)
//! over kernel TCP on 127.0.0.1, joined as a launcher would start it
//! (`cluster/node.rs`), sharing one in-process `GlobalIdMap`, and
//! serving memcached clients on a port of its own.

// Each test binary uses part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::ops::Range;
use std::pin::pin;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use ebb_core::{GlobalIdMap, InProcessGlobalIdMap, Lease, NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_event::Sender;
use ebb_messenger::map::MapService;
use ebb_messenger::{acceptor, create_messenger, Frontend, MessengerSettings};
use memcached::cluster::current::CurrentMap;
use memcached::cluster::node::try_join;
use memcached::cluster::{ShardMap, SHARD_MAP_KEY};
use memcached::{accept_fn, Server, Settings};

/// The frontend of a test cluster, on its own thread.
pub struct TestFrontend {
    /// Where its Messenger listens.
    pub addr: SocketAddrV4,
    /// Node k's global ids are `ranges[k - 1]`.
    pub ranges: Vec<Range<u32>>,
    /// Declares a node lost, as its launcher would when its VM dies.
    pub lose: Sender<NodeId>,
    /// Stops the frontend.
    pub stop: Sender<()>,
}

/// A frontend expecting nodes 1 to `count`, listening on 127.0.0.1 and
/// serving `map` to its nodes over the Messenger (`MapService`).
pub fn start_frontend(count: u32, map: Arc<InProcessGlobalIdMap>) -> TestFrontend {
    let (setup_tx, setup_rx) = mpsc::channel();
    let (lose, lose_rx) = ebb_event::oneshot::<NodeId>();
    let (stop, stop_rx) = ebb_event::oneshot::<()>();
    thread::spawn(move || {
        ebb_hosted::run_task(node_config(), move || async move {
            let messenger = create_messenger(MessengerSettings::new(NodeId(0))).unwrap();
            let registry = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
            registry.serve(messenger).unwrap();
            MapService::new(map).serve(messenger).unwrap();
            let ranges: Vec<Range<u32>> = (1..=count)
                .map(|node| registry.expect(NodeId(node), 64).unwrap())
                .collect();
            let addr =
                ebb_net::listen("127.0.0.1:0".parse().unwrap(), acceptor(messenger)).unwrap();
            let SocketAddr::V4(addr) = addr else {
                unreachable!("listening on IPv4")
            };
            setup_tx.send((addr, ranges)).unwrap();
            if let Ok(node) = lose_rx.await {
                registry.forget(node);
                messenger.get().unwrap().lose_node(node);
            }
            let _ = stop_rx.await;
        })
        .unwrap();
    });
    let (addr, ranges) = setup_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the frontend listens");
    TestFrontend {
        addr,
        ranges,
        lose,
        stop,
    }
}

/// How long a test waits for the nodes to agree on a map.
pub const AGREE_WITHIN: Duration = Duration::from_secs(30);

/// One core, unpinned, no signal handling: tests run side by side.
pub fn node_config() -> ebb_hosted::Config {
    ebb_hosted::Config::one_core_side_by_side()
}

/// What a node tells the test once it joined.
pub struct JoinedNode {
    pub node: u32,
    pub current: &'static CurrentMap,
    pub lease: Lease,
    /// Where it serves memcached clients.
    pub clients: SocketAddr,
    /// Its server, for what tests check of it.
    pub server: &'static Server,
}

/// Node `node`, on its own thread, joined as its contract says; it runs
/// until `stop` is sent (or dropped).
pub fn start_node(
    node: u32,
    frontend: SocketAddrV4,
    ids: Range<u32>,
    map: Arc<InProcessGlobalIdMap>,
    joined: mpsc::Sender<JoinedNode>,
) -> Sender<()> {
    start_node_over(node, frontend, ids, map, joined)
}

/// [`start_node`] with a map of the test's making (a view of the shared
/// map it can cut off: `test_map`).
pub fn start_node_over(
    node: u32,
    frontend: SocketAddrV4,
    ids: Range<u32>,
    map: Arc<dyn GlobalIdMap>,
    joined: mpsc::Sender<JoinedNode>,
) -> Sender<()> {
    ebb_hosted::node_thread::start_node(
        node_config(),
        node,
        frontend,
        ids,
        move |contract| async move {
            let server = Server::start(Settings::default(), 1_700_000_000).unwrap();
            let node_joined = try_join(contract, server, |_| map)
                .await
                .expect("the node joins");
            let clients = ebb_app::net::listen("127.0.0.1:0".parse().unwrap(), accept_fn(server))
                .await
                .expect("the node listens for clients")
                .addr;
            joined
                .send(JoinedNode {
                    node,
                    current: node_joined.current,
                    lease: node_joined.lease,
                    clients,
                    server,
                })
                .unwrap();
        },
    )
}

/// A frontend and the nodes a test starts one by one, sharing `map`.
pub struct TestCluster {
    pub map: Arc<InProcessGlobalIdMap>,
    pub frontend: TestFrontend,
    joined_tx: mpsc::Sender<JoinedNode>,
    joined_rx: mpsc::Receiver<JoinedNode>,
}

impl TestCluster {
    /// A frontend expecting nodes 1 to `count`, and no node yet.
    pub fn start(count: u32) -> TestCluster {
        TestCluster::start_over(count, Arc::new(InProcessGlobalIdMap::new()))
    }

    /// [`TestCluster::start`], sharing `map`.
    pub fn start_over(count: u32, map: Arc<InProcessGlobalIdMap>) -> TestCluster {
        let frontend = start_frontend(count, Arc::clone(&map));
        let (joined_tx, joined_rx) = mpsc::channel();
        TestCluster {
            map,
            frontend,
            joined_tx,
            joined_rx,
        }
    }

    /// Starts node `node` over the shared map and waits until it joined.
    pub fn join(&self, node: u32) -> (Sender<()>, JoinedNode) {
        self.join_over(node, Arc::clone(&self.map) as Arc<dyn GlobalIdMap>)
    }

    /// Starts node `node` over `map` (a view of the shared map) and waits
    /// until it joined.
    pub fn join_over(&self, node: u32, map: Arc<dyn GlobalIdMap>) -> (Sender<()>, JoinedNode) {
        let ids = self.frontend.ranges[node as usize - 1].clone();
        let stop = start_node_over(node, self.frontend.addr, ids, map, self.joined_tx.clone());
        let joined = self
            .joined_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the node joins");
        (stop, joined)
    }

    /// A frontend expecting nodes 1 to `count`, and nodes 1 and 2
    /// joined, node 1 over `node_1_map` (a view of `map`), agreed on their
    /// map: their stops, the nodes, and the map.
    pub fn two_nodes(
        count: u32,
        map: &Arc<InProcessGlobalIdMap>,
        node_1_map: Arc<dyn GlobalIdMap>,
    ) -> (TestCluster, [Sender<()>; 2], [JoinedNode; 2], ShardMap) {
        let cluster = TestCluster::start_over(count, Arc::clone(map));
        let (stop_1, node_1) = cluster.join_over(1, node_1_map);
        let (stop_2, node_2) = cluster.join(2);
        let two = wait_for_agreement(map, &[&node_1, &node_2], 2);
        (cluster, [stop_1, stop_2], [node_1, node_2], two)
    }

    /// Stops `nodes` and the frontend.
    pub fn stop(self, nodes: impl IntoIterator<Item = Sender<()>>) {
        for stop in nodes {
            stop.send(());
        }
        self.frontend.stop.send(());
    }
}

/// The in-process map's futures are ready at once: polls one once.
pub fn ready<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the in-process map's future was not ready"),
    }
}

/// The stored shard map.
pub fn stored(map: &InProcessGlobalIdMap) -> Option<ShardMap> {
    ready(map.get(SHARD_MAP_KEY))
        .unwrap()
        .map(|bytes| ShardMap::decode(&bytes).unwrap())
}

/// Whether every node of `nodes` goes by the stored map, it has
/// `members` members, and every node knows that every registered node
/// adopted it (so the handover fence holds back none of its keys): that
/// map, if so.
pub fn agreement(
    map: &InProcessGlobalIdMap,
    nodes: &[&JoinedNode],
    members: usize,
) -> Option<ShardMap> {
    let in_force = stored(map)?;
    let agreed = in_force.members().len() == members
        && nodes.iter().all(|n| {
            n.current.epoch() == in_force.epoch() && n.current.settled() >= in_force.epoch()
        });
    agreed.then_some(in_force)
}

/// Waits (blocking this thread, not a core) for [`agreement`].
pub fn wait_for_agreement(
    map: &InProcessGlobalIdMap,
    nodes: &[&JoinedNode],
    members: usize,
) -> ShardMap {
    let deadline = Instant::now() + AGREE_WITHIN;
    loop {
        if let Some(map) = agreement(map, nodes, members) {
            return map;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes did not agree on {members} members within {AGREE_WITHIN:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `done` every 20 ms (blocking this thread, not a core) until it
/// holds, for at most `within`.
pub fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The value stored under key `i` in round `round`: it names its key and
/// round and ends with a checksum of the rest, so a value read under
/// another key, a stale one or a damaged one is told apart.
pub fn value(i: u32, round: u32) -> Vec<u8> {
    let mut value =
        format!("key:{i} round {round} {}", "x".repeat((i % 200) as usize)).into_bytes();
    let sum = value.iter().fold(0u32, |sum, &b| {
        sum.wrapping_mul(31).wrapping_add(u32::from(b))
    });
    value.extend_from_slice(format!(" {sum:08x}").as_bytes());
    value
}

pub fn key(i: u32) -> Vec<u8> {
    format!("key:{i}").into_bytes()
}

/// The longest a client waits for a reply.
pub const REPLY_WITHIN: Duration = Duration::from_secs(20);

/// A text-protocol client.
pub struct Client {
    pub reader: BufReader<TcpStream>,
    pub writer: TcpStream,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect_timeout(&addr, REPLY_WITHIN).expect("connects");
        stream.set_read_timeout(Some(REPLY_WITHIN)).unwrap();
        stream.set_write_timeout(Some(REPLY_WITHIN)).unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("a reply line");
        line
    }

    /// Sends `request` and reads one line.
    pub fn ask(&mut self, request: &[u8]) -> String {
        self.writer.write_all(request).unwrap();
        self.line()
    }

    pub fn store(&mut self, command: &str, key: &[u8], value: &[u8], extra: &str) -> String {
        let mut request = format!("{command} ").into_bytes();
        request.extend_from_slice(key);
        request.extend_from_slice(format!(" 7 0 {}{extra}\r\n", value.len()).as_bytes());
        request.extend_from_slice(value);
        request.extend_from_slice(b"\r\n");
        self.ask(&request)
    }

    /// The value read for `key` (`None`: a miss).
    pub fn read(&mut self, key: &[u8]) -> Option<Vec<u8>> {
        let found = self.get("get", &[key.to_vec()]);
        assert!(found.len() <= 1, "one key, {} values", found.len());
        found.into_iter().next().map(|(_, data, _)| data)
    }

    /// `get`s `keys` (one line); the values found, by key, with their
    /// CAS values when `gets`.
    pub fn get(&mut self, command: &str, keys: &[Vec<u8>]) -> Vec<(Vec<u8>, Vec<u8>, Option<u64>)> {
        let mut request = command.as_bytes().to_vec();
        for key in keys {
            request.push(b' ');
            request.extend_from_slice(key);
        }
        request.extend_from_slice(b"\r\n");
        self.writer.write_all(&request).unwrap();
        let mut found = Vec::new();
        loop {
            let line = self.line();
            if line == "END\r\n" {
                return found;
            }
            let words: Vec<&str> = line.trim_end().split(' ').collect();
            assert_eq!(words[0], "VALUE", "{line:?}");
            assert_eq!(words[2], "7", "flags of {line:?}");
            let len: usize = words[3].parse().unwrap();
            let cas = words.get(4).map(|cas| cas.parse().unwrap());
            let mut data = vec![0; len + 2];
            self.reader.read_exact(&mut data).unwrap();
            assert_eq!(&data[len..], b"\r\n");
            data.truncate(len);
            found.push((words[1].as_bytes().to_vec(), data, cas));
        }
    }
}

/// Reads every key through `client` in multigets of 100 and checks each
/// against `expected` (`None`: must be a miss); returns hits and misses.
pub fn read_all(
    client: &mut Client,
    keys: u32,
    expected: impl Fn(u32) -> Option<Vec<u8>>,
) -> (u32, u32) {
    let (mut hits, mut misses) = (0, 0);
    for batch in (0..keys).collect::<Vec<_>>().chunks(100) {
        let keys: Vec<Vec<u8>> = batch.iter().map(|&i| key(i)).collect();
        let found = client.get("get", &keys);
        let mut at = 0;
        for &i in batch {
            let want = expected(i);
            let got = found.get(at).filter(|(k, _, _)| *k == key(i));
            match (got, want) {
                (Some((_, data, _)), Some(want)) => {
                    assert_eq!(*data, want, "key:{i} read a wrong value");
                    at += 1;
                    hits += 1;
                }
                (None, None) => misses += 1,
                (Some((_, data, _)), None) => panic!(
                    "key:{i} should miss, read {:?}",
                    String::from_utf8_lossy(data)
                ),
                (None, Some(_)) => panic!("key:{i} missed"),
            }
        }
        assert_eq!(at, found.len(), "values in another order than asked");
    }
    (hits, misses)
}

/// Sets keys `0..keys` (round 1's values) through the first client and
/// reads every one back through each of the others.
pub fn write_through_first_read_through_others(clients: &mut [Client], keys: u32) {
    for i in 0..keys {
        let reply = clients[0].store("set", &key(i), &value(i, 1), "");
        assert_eq!(reply, "STORED\r\n", "key:{i}");
    }
    for client in &mut clients[1..] {
        assert_eq!(read_all(client, keys, |i| Some(value(i, 1))), (keys, 0));
    }
}

/// What a client writing and reading checksummed values saw while the
/// shard map changed.
#[derive(Default)]
pub struct Seen {
    pub rounds: u32,
    pub stored: u32,
    pub refused: u32,
    pub hits: u32,
    pub misses: u32,
    /// Key index → the round of the last value stored under it.
    pub last: HashMap<u32, u32>,
}

impl Seen {
    /// Sets `key` (index `i`) to round `round`'s value through `client`:
    /// stored, or refused while the map changes; any other answer fails.
    pub fn set(&mut self, client: &mut Client, key: &[u8], i: u32, round: u32) {
        match client.store("set", key, &value(i, round), "").as_str() {
            "STORED\r\n" => {
                self.stored += 1;
                self.last.insert(i, round);
            }
            "SERVER_ERROR shard map changing, try again\r\n" => self.refused += 1,
            other => panic!(
                "{} round {round}: set answered {other:?}",
                String::from_utf8_lossy(key)
            ),
        }
    }

    /// Gets `key` (index `i`) through `client`: the value last stored,
    /// or a miss; another value fails.
    pub fn read_back(&mut self, client: &mut Client, key: &[u8], i: u32) {
        match client.get("get", &[key.to_vec()]).as_slice() {
            [] => self.misses += 1,
            [(found, data, _)] => {
                assert_eq!(found, key);
                let want = self.last.get(&i).map(|&round| value(i, round));
                assert_eq!(
                    Some(data),
                    want.as_ref(),
                    "{}: a wrong value",
                    String::from_utf8_lossy(key)
                );
                self.hits += 1;
            }
            more => panic!("{}: {} values", String::from_utf8_lossy(key), more.len()),
        }
    }
}

/// A binary request (memcached's `protocol_binary.h`).
pub fn binary_request(
    opcode: u8,
    opaque: u32,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) -> Vec<u8> {
    let mut out = vec![0x80, opcode];
    out.extend_from_slice(&u16::try_from(key.len()).unwrap().to_be_bytes());
    out.push(u8::try_from(extras.len()).unwrap());
    out.extend_from_slice(&[0, 0, 0]);
    let body = extras.len() + key.len() + value.len();
    out.extend_from_slice(&u32::try_from(body).unwrap().to_be_bytes());
    out.extend_from_slice(&opaque.to_be_bytes());
    out.extend_from_slice(&cas.to_be_bytes());
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    out
}

/// A binary response.
pub struct BinaryReply {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub cas: u64,
    /// Extras, key and value.
    pub body: Vec<u8>,
}

pub fn read_binary(stream: &mut TcpStream) -> BinaryReply {
    let mut header = [0u8; 24];
    stream.read_exact(&mut header).unwrap();
    assert_eq!(header[0], 0x81, "a response's magic");
    let word = |at: usize| u32::from_be_bytes(header[at..at + 4].try_into().unwrap());
    let mut body = vec![0u8; word(8) as usize];
    stream.read_exact(&mut body).unwrap();
    BinaryReply {
        opcode: header[1],
        status: u16::from_be_bytes([header[6], header[7]]),
        opaque: word(12),
        cas: u64::from_be_bytes(header[16..24].try_into().unwrap()),
        body,
    }
}
