//! Memcached nodes of a cache in one process, for the cluster tests:
//! each a hosted node (its own Ebbflow runtime on a thread, one core)
//! over kernel TCP on 127.0.0.1, joined as a launcher would start it
//! (`cluster/node.rs`), sharing one in-process `GlobalIdMap`, and
//! serving memcached clients on a port of its own.

// Each test binary uses part of it.
#![allow(dead_code)]

use std::future::Future;
use std::net::{SocketAddr, SocketAddrV4};
use std::ops::Range;
use std::pin::pin;
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use ebb_core::{GlobalIdMap, InProcessGlobalIdMap, Lease};
use ebb_event::Sender;
use memcached::cluster::current::CurrentMap;
use memcached::cluster::node::try_join;
use memcached::cluster::{ShardMap, SHARD_MAP_KEY};
use memcached::{accept_fn, Server, Settings};

/// How long a test waits for the nodes to agree on a map.
pub const AGREE_WITHIN: Duration = Duration::from_secs(30);

/// One core, unpinned, no signal handling: tests run side by side.
pub fn node_config() -> ebb_hosted::Config {
    ebb_hosted::Config {
        cores: Some(1),
        pin: false,
        handle_signals: false,
        ..ebb_hosted::Config::default()
    }
}

/// What a node tells the test once it joined.
pub struct JoinedNode {
    pub node: u32,
    pub current: &'static CurrentMap,
    pub lease: Lease,
    /// Where it serves memcached clients.
    pub clients: SocketAddr,
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
            let server = Server::start(Settings::default(), 1_700_000_000).unwrap();
            let node_joined = try_join(contract, server, map)
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
                })
                .unwrap();
            let _ = stop_rx.await;
        })
        .unwrap();
    });
    stop_tx
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

/// Whether every node of `nodes` goes by the stored map and it has
/// `members` members: that map, if so.
pub fn agreement(
    map: &InProcessGlobalIdMap,
    nodes: &[&JoinedNode],
    members: usize,
) -> Option<ShardMap> {
    let in_force = stored(map)?;
    let agreed = in_force.members().len() == members
        && nodes.iter().all(|n| n.current.epoch() == in_force.epoch());
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
