//! The `memcached` program as a launcher starts it for a cache of
//! several nodes: three processes, each with its boot contract in
//! `EBB_NODE`, reaching the frontend's map over the Messenger
//! (`RemoteGlobalIdMap`), and a frontend in the test (a hosted node on
//! 127.0.0.1 serving an in-process map). Each node serves clients only
//! once it joined. 10,000 keys with checksummed values written through
//! node 1 read back identically through nodes 2 and 3; then node 3's
//! process is killed (`kill -9`), the frontend loses it and its
//! registration goes (as its lease's expiry would): through nodes 1 and
//! 2 its keys miss and every other key reads back.

mod cluster_support;

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use cluster_support::{
    key, read_all, ready, start_frontend, stored, value, write_through_first_read_through_others,
    Client,
};
use ebb_core::{GlobalIdMap, InProcessGlobalIdMap, NodeId};
use memcached::cluster::ShardMap;

const NODES: u32 = 3;
const KEYS: u32 = 10_000;
const MEMCACHED_BIN: &str = env!("CARGO_BIN_EXE_memcached");
/// How long the test waits for a node to serve, or the nodes to agree.
const WITHIN: Duration = Duration::from_secs(60);

/// A node's process, killed when dropped.
struct KilledOnDrop(Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Connects to `addr` once it answers (the node joined first), unless
/// `process` ends first.
fn connect_when_serving(addr: SocketAddr, process: &mut KilledOnDrop) -> Client {
    let deadline = Instant::now() + WITHIN;
    loop {
        if let Some(status) = process.0.try_wait().unwrap() {
            panic!("the node serving {addr} ended: {status}");
        }
        if std::net::TcpStream::connect(addr).is_ok() {
            let mut client = Client::connect(addr);
            if client.ask(b"version\r\n").starts_with("VERSION") {
                return client;
            }
        }
        assert!(Instant::now() < deadline, "{addr} does not serve");
        thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the stored map has `members` members.
fn map_of(map: &InProcessGlobalIdMap, members: usize) -> ShardMap {
    let deadline = Instant::now() + WITHIN;
    loop {
        if let Some(in_force) = stored(map).filter(|m| m.members().len() == members) {
            return in_force;
        }
        assert!(Instant::now() < deadline, "no map of {members} members");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until a set through each client, of a key `map` gives to each
/// other node (and `before`, if given, gave to a node now gone), is
/// stored: the two nodes then go by the same map.
fn wait_until_served(
    clients: &mut [Client],
    nodes: &[u32],
    map: &ShardMap,
    gone: Option<&ShardMap>,
) {
    for (from, client) in clients.iter_mut().enumerate() {
        for &to in nodes {
            if to == nodes[from] {
                continue;
            }
            let probe = (0..)
                .map(|i| format!("probe:{i}").into_bytes())
                .find(|k| {
                    map.owner(k).unwrap().node == NodeId(to)
                        && gone.is_none_or(|g| !nodes.contains(&g.owner(k).unwrap().node.0))
                })
                .unwrap();
            let deadline = Instant::now() + WITHIN;
            while client.store("set", &probe, b"p", "") != "STORED\r\n" {
                assert!(
                    Instant::now() < deadline,
                    "node {} cannot reach node {to}",
                    nodes[from]
                );
                thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

#[test]
fn three_node_processes_share_one_cache_and_a_killed_nodes_keys_only_miss() {
    let map = Arc::new(InProcessGlobalIdMap::new());
    let frontend = start_frontend(NODES, Arc::clone(&map));
    let mut ports = Vec::new();
    let mut processes: Vec<KilledOnDrop> = (1..=NODES)
        .zip(&frontend.ranges)
        .map(|(node, ids)| {
            let port = free_port();
            ports.push(port);
            let words = format!(
                "node={node} frontend={} ebb_ids={}-{} messenger_port={}",
                frontend.addr,
                ids.start,
                ids.end,
                free_port()
            );
            KilledOnDrop(
                Command::new(MEMCACHED_BIN)
                    .args(["--cores", "1", "--no-pin", "-l", "127.0.0.1", "-p"])
                    .arg(port.to_string())
                    .env("EBB_NODE", &words)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .expect("run memcached"),
            )
        })
        .collect();
    let mut clients: Vec<Client> = ports
        .iter()
        .zip(&mut processes)
        .map(|(&port, process)| {
            connect_when_serving(SocketAddr::from(([127, 0, 0, 1], port)), process)
        })
        .collect();
    let three = map_of(&map, 3);
    wait_until_served(&mut clients, &[1, 2, 3], &three, None);

    write_through_first_read_through_others(&mut clients, KEYS);

    // kill -9 node 3; the frontend loses it; its registration goes.
    drop(processes.pop());
    frontend.lose.send(NodeId(3));
    assert!(ready(map.delete("memcached/members/3")).unwrap());
    let two = map_of(&map, 2);
    assert_eq!(two.epoch(), three.epoch() + 1);
    clients.truncate(2);
    wait_until_served(&mut clients, &[1, 2], &two, Some(&three));
    let was_3s = |i: u32| three.owner(&key(i)).unwrap().node == NodeId(3);
    for client in &mut clients {
        let (hits, misses) = read_all(client, KEYS, |i| (!was_3s(i)).then(|| value(i, 1)));
        println!("after node 3 was killed: {hits} hits, {misses} misses of {KEYS}");
        assert!(
            misses > KEYS / 5 && hits > KEYS / 3,
            "{hits} hits, {misses} misses"
        );
    }
    frontend.stop.send(());
}
