//! The handover of a key between nodes that adopt a new shard map at
//! different moments (`docs/distributed-memcached.md`, "Epochs: never a
//! wrong value"), through clients of real nodes: nodes 1 and 2 and a
//! frontend in one process (`cluster_support`), node 1's view of the map
//! held at epoch E (`test_map`) while node 3 joins and nodes 2 and 3
//! adopt E+1. A key node 1 owns at E and node 3 at E+1: node 3 refuses
//! to write it and misses it (without the fence it stored the write,
//! which a read through node 1, still the owner at E, then missed: a
//! wrong value), node 1 keeps serving it; once node 1 adopts E+1, node 3
//! serves it, a miss first, never a value from before.

mod cluster_support;
mod test_map;

use std::sync::Arc;

use cluster_support::{wait_until, Client, JoinedNode, TestCluster, AGREE_WITHIN};
use ebb_core::{GlobalIdMap, InProcessGlobalIdMap, NodeId};
use test_map::TestMap;

/// Waits until `node` goes by `epoch`.
fn wait_for_epoch(node: &JoinedNode, epoch: u64) {
    let what = format!("node {} at epoch {epoch}", node.node);
    wait_until(&what, AGREE_WITHIN, || node.current.epoch() == epoch);
}

#[test]
fn a_key_moving_to_a_joining_node_is_never_served_by_two_nodes() {
    let map = Arc::new(InProcessGlobalIdMap::new());
    let node_1_map = Arc::new(TestMap::new(Arc::clone(&map)));
    let (cluster, [stop_1, stop_2], [node_1, node_2], two) =
        TestCluster::two_nodes(3, &map, Arc::clone(&node_1_map) as Arc<dyn GlobalIdMap>);
    let [mut client_1, mut client_2] = [node_1.clients, node_2.clients].map(Client::connect);

    // Node 3's map, known before it joins: its members are the nodes'
    // shard Ebbs, the first id of each range.
    let member = |node: u32| memcached::cluster::Member {
        node: NodeId(node),
        shard_ebb: cluster.frontend.ranges[node as usize - 1].start,
    };
    let three =
        memcached::cluster::ShardMap::new(two.epoch() + 1, vec![member(1), member(2), member(3)])
            .unwrap();
    let key = (0..)
        .map(|i| format!("moving:{i}").into_bytes())
        .find(|key| {
            two.owner(key).unwrap().node == NodeId(1) && three.owner(key).unwrap().node == NodeId(3)
        })
        .unwrap();
    assert_eq!(client_2.store("set", &key, b"v1", ""), "STORED\r\n");
    assert_eq!(client_1.read(&key).as_deref(), Some(&b"v1"[..]));

    // Node 1 stays at E; node 3 joins, and nodes 2 and 3 adopt E+1.
    node_1_map.hold_shard_map();
    let (stop_3, node_3) = cluster.join(3);
    let mut client_3 = Client::connect(node_3.clients);
    wait_for_epoch(&node_2, three.epoch());
    wait_for_epoch(&node_3, three.epoch());
    assert_eq!(cluster_support::stored(&map), Some(three.clone()));
    assert_eq!(node_1.current.epoch(), two.epoch());

    // Node 3 neither takes nor answers the key it gained: without the
    // fence it stored v2, and a client reading through node 1 (the
    // owner at E, which still has v1) read a value older than the one
    // it had been told was stored.
    assert_eq!(
        client_3.store("set", &key, b"v2", ""),
        "SERVER_ERROR shard map changing, try again\r\n"
    );
    assert_eq!(client_3.read(&key), None);
    assert_eq!(client_2.read(&key), None, "node 2 forwards to node 3");
    assert_eq!(client_1.read(&key).as_deref(), Some(&b"v1"[..]));
    assert_eq!(client_1.store("set", &key, b"v3", ""), "STORED\r\n");
    assert_eq!(client_1.read(&key).as_deref(), Some(&b"v3"[..]));

    // Node 1 sees the map again (a change under memcached/ wakes it) and
    // adopts E+1: node 3 serves the key once node 1 published it, a miss
    // first (node 1 dropped v3, node 3 never had it).
    node_1_map.release_shard_map();
    let nudge = map.set("memcached/nudge", b"1".to_vec(), None);
    cluster_support::ready(nudge).unwrap();
    wait_for_epoch(&node_1, three.epoch());
    wait_until("node 3 learns node 1 adopted", AGREE_WITHIN, || {
        node_3.current.settled() >= three.epoch()
    });
    for client in [&mut client_1, &mut client_2, &mut client_3] {
        assert_eq!(client.read(&key), None);
    }
    assert_eq!(client_3.store("set", &key, b"v4", ""), "STORED\r\n");
    for client in [&mut client_1, &mut client_2, &mut client_3] {
        assert_eq!(client.read(&key).as_deref(), Some(&b"v4"[..]));
    }
    cluster.stop([stop_1, stop_2, stop_3]);
}
