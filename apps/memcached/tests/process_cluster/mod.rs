//! A cache of several `memcached` processes, started as a launcher starts
//! them: each with its boot contract in `EBB_NODE`, reaching the map of a
//! frontend in the test (`start_frontend`) over the Messenger. Shared by
//! the tests that drive such a cluster through its clients (with
//! `cluster_support` and `common`).

// Each test binary uses part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use ebb_core::{InProcessGlobalIdMap, NodeId};
use memcached::cluster::ShardMap;

use crate::cluster_support::{start_frontend, stored, Client, TestFrontend};
use crate::common::free_port;

const MEMCACHED_BIN: &str = env!("CARGO_BIN_EXE_memcached");
/// How long a test waits for a node to serve, or the nodes to agree.
pub const WITHIN: Duration = Duration::from_secs(60);

/// A node's process, killed when dropped.
pub struct KilledOnDrop(pub Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Connects to `addr` once it answers (the node joined first), unless
/// `process` ends first.
pub fn connect_when_serving(addr: SocketAddr, process: &mut KilledOnDrop) -> Client {
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
pub fn map_of(map: &InProcessGlobalIdMap, members: usize) -> ShardMap {
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
pub fn wait_until_served(
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

/// `count` memcached processes (nodes 1 to `count`) and their frontend,
/// every node serving and going by the map of all of them.
pub struct ProcessCluster {
    /// The frontend (stop it with `frontend.stop`).
    pub frontend: TestFrontend,
    /// The map it serves.
    pub map: Arc<InProcessGlobalIdMap>,
    /// Node k's process is `processes[k - 1]`.
    pub processes: Vec<KilledOnDrop>,
    /// Where node k serves clients: `addrs[k - 1]`, on 127.0.0.1.
    pub addrs: Vec<SocketAddr>,
    /// A text client of each node.
    pub clients: Vec<Client>,
    /// The map of all `count` nodes, in force on every node.
    pub in_force: ShardMap,
}

impl ProcessCluster {
    /// Starts the frontend and `count` nodes, each with `args` besides
    /// its address, and waits until every node serves every other's keys.
    pub fn start(count: u32, args: &[&str]) -> ProcessCluster {
        let map = Arc::new(InProcessGlobalIdMap::new());
        let frontend = start_frontend(count, Arc::clone(&map));
        let mut addrs = Vec::new();
        let mut processes: Vec<KilledOnDrop> = (1..=count)
            .zip(&frontend.ranges)
            .map(|(node, ids)| {
                let port = free_port();
                addrs.push(SocketAddr::from(([127, 0, 0, 1], port)));
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
                        .args(args)
                        .env("EBB_NODE", &words)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::inherit())
                        .spawn()
                        .expect("run memcached"),
                )
            })
            .collect();
        let mut clients: Vec<Client> = addrs
            .iter()
            .zip(&mut processes)
            .map(|(&addr, process)| connect_when_serving(addr, process))
            .collect();
        let in_force = map_of(&map, count as usize);
        let nodes: Vec<u32> = (1..=count).collect();
        wait_until_served(&mut clients, &nodes, &in_force, None);
        ProcessCluster {
            frontend,
            map,
            processes,
            addrs,
            clients,
            in_force,
        }
    }
}
