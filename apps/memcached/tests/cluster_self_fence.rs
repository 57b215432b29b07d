//! A node cut off from the map stops serving its keys before the others
//! can take them (`docs/distributed-memcached.md`, "The self-fence"),
//! through clients of real nodes: nodes 1 and 2 and a frontend in one
//! process (`cluster_support`), node 1's keep-alives failing while the
//! test says (`test_map`). Past the lease's time to live minus the
//! margin, node 1 answers its own keys as misses and refuses to write
//! them, through its own clients and node 2's; it still forwards other
//! keys. Its keep-alives succeeding again (the lease never ran out), it
//! serves its keys again, values kept. Cut off again until its lease runs
//! out: node 2 takes its keys; node 1 registers again, and once back in
//! the map its keys read as what was written since, or as misses, never
//! as its values from before.

mod cluster_support;
mod test_map;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cluster_support::{wait_for_agreement, wait_until, Client, TestCluster};
use ebb_core::{GlobalIdMap, InProcessGlobalIdMap, NodeId};
use memcached::cluster::node::LEASE_TTL;
use test_map::TestMap;

const LAPSED: &str =
    "SERVER_ERROR this node's membership lapsed, its keys are not served, try again\r\n";

#[test]
fn a_node_cut_off_from_the_map_stops_serving_its_keys_until_it_is_back() {
    let map = Arc::new(InProcessGlobalIdMap::new());
    let node_1_map = Arc::new(TestMap::new(Arc::clone(&map)));
    let (cluster, [stop_1, stop_2], [node_1, node_2], two) =
        TestCluster::two_nodes(2, &map, Arc::clone(&node_1_map) as Arc<dyn GlobalIdMap>);
    let [mut client_1, mut client_2] = [node_1.clients, node_2.clients].map(Client::connect);
    let key_of = |node: u32| {
        (0..)
            .map(|i| format!("key:{i}").into_bytes())
            .find(|key| two.owner(key).unwrap().node == NodeId(node))
            .unwrap()
    };
    let (mine, theirs) = (key_of(1), key_of(2));
    assert_eq!(client_1.store("set", &mine, b"v1", ""), "STORED\r\n");
    assert_eq!(client_1.store("set", &theirs, b"w1", ""), "STORED\r\n");

    // Node 1's keep-alives fail: within the time to live it stops
    // serving its own keys, through any node, and still forwards.
    node_1_map.keep_alive_fails.store(true, Ordering::SeqCst);
    wait_until("node 1 self-fences", LEASE_TTL * 2, || {
        client_1.read(&mine).is_none()
    });
    assert_eq!(client_1.store("set", &mine, b"v2", ""), LAPSED);
    assert_eq!(client_2.read(&mine), None);
    assert_eq!(
        client_2.store("set", &mine, b"v2", ""),
        "SERVER_ERROR shard map changing, try again\r\n"
    );
    assert_eq!(client_1.read(&theirs).as_deref(), Some(&b"w1"[..]));

    // Its keep-alives succeed again before the lease ran out: it serves
    // its keys again, its value kept (nobody else could have owned it).
    node_1_map.keep_alive_fails.store(false, Ordering::SeqCst);
    wait_until("node 1 serves again", LEASE_TTL, || {
        client_1.read(&mine).is_some()
    });
    assert_eq!(client_2.read(&mine).as_deref(), Some(&b"v1"[..]));

    // Cut off again, this time until its lease runs out: node 2 takes
    // node 1's keys.
    node_1_map.keep_alive_fails.store(true, Ordering::SeqCst);
    wait_until("node 1 self-fences again", LEASE_TTL * 2, || {
        client_1.read(&mine).is_none()
    });
    map.expire(node_1.lease).unwrap();
    wait_until("node 2 serves node 1's keys", LEASE_TTL, || {
        client_2.store("set", &mine, b"v3", "") == "STORED\r\n"
    });
    let alone = cluster_support::stored(&map).unwrap();
    assert_eq!(alone.members().len(), 1);
    assert_eq!(alone.owner(&mine).unwrap().node, NodeId(2));
    assert_eq!(client_2.read(&mine).as_deref(), Some(&b"v3"[..]));
    // Node 1: fenced at the old map (a miss), or, once it read the map
    // without it, forwarding to node 2.
    let through_1 = client_1.read(&mine);
    assert!(
        through_1.is_none() || through_1.as_deref() == Some(&b"v3"[..]),
        "{through_1:?}"
    );

    // Reached again, node 1 finds its lease expired, registers again,
    // and once back in the map serves its keys: what was written since
    // (v3 went to node 2, which dropped it when node 1 came back) is a
    // miss there, never v1.
    node_1_map.keep_alive_fails.store(false, Ordering::SeqCst);
    let back = wait_for_agreement(&map, &[&node_1, &node_2], 2);
    assert!(back.epoch() > two.epoch());
    assert_eq!(back.owner(&mine).unwrap().node, NodeId(1));
    for client in [&mut client_1, &mut client_2] {
        assert_eq!(client.read(&mine), None);
    }
    assert_eq!(client_2.store("set", &mine, b"v4", ""), "STORED\r\n");
    for client in [&mut client_1, &mut client_2] {
        assert_eq!(client.read(&mine).as_deref(), Some(&b"v4"[..]));
    }
    cluster.stop([stop_1, stop_2]);
}
