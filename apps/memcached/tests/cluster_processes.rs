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
mod common;
mod process_cluster;

use cluster_support::{key, read_all, ready, value, write_through_first_read_through_others};
use ebb_core::{GlobalIdMap, NodeId};
use process_cluster::{map_of, wait_until_served, ProcessCluster};

const NODES: u32 = 3;
const KEYS: u32 = 10_000;

#[test]
fn three_node_processes_share_one_cache_and_a_killed_nodes_keys_only_miss() {
    let ProcessCluster {
        frontend,
        map,
        mut processes,
        mut clients,
        in_force: three,
        ..
    } = ProcessCluster::start(NODES, &[]);

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
