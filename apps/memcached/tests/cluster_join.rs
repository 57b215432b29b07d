//! A node joins while a client writes and reads checksummed values
//! (`docs/distributed-memcached.md`, "Adding a node: invalidate, do not
//! move", and "Epochs: never a wrong value"): nodes 1 and 2 and a
//! frontend in one process (`cluster_support`); one writer sets and
//! reads back keys round after round while node 3 joins, each key set
//! through one node and read back through the other, so that the two
//! nodes' maps (adopted at different moments) are both exercised. Every
//! read is the value last written or a miss, never another value; a
//! write may be refused while the map changes, never applied elsewhere. Once node 3 is in, every key
//! read through each of the three nodes is the last value written to it
//! or a miss, and keys written before the join and never again are
//! misses where node 3 took them and read back elsewhere.

mod cluster_support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use cluster_support::{
    key, start_frontend, start_node, value, wait_for_agreement, Client, JoinedNode, Seen,
};
use ebb_core::{InProcessGlobalIdMap, NodeId};

const KEYS: u32 = 1_000;

/// Sets and reads back every key, round after round, until `stop` (and
/// for at least `min_rounds`): key `i` of round `r` is set through
/// `clients[(i + r) % n]` and read back through the next client.
fn write_and_read(mut clients: Vec<Client>, stop: &AtomicBool, min_rounds: u32) -> Seen {
    let mut seen = Seen::default();
    let n = clients.len();
    while seen.rounds < min_rounds || !stop.load(Ordering::SeqCst) {
        seen.rounds += 1;
        let round = seen.rounds;
        for i in 0..KEYS {
            let through = (i + round) as usize % n;
            seen.set(&mut clients[through], &key(i), i, round);
            seen.read_back(&mut clients[(through + 1) % n], &key(i), i);
        }
    }
    seen
}

#[test]
fn a_node_joining_while_a_client_writes_never_gives_a_wrong_value() {
    let map = Arc::new(InProcessGlobalIdMap::new());
    let frontend = start_frontend(3, Arc::clone(&map));
    let (joined_tx, joined_rx) = mpsc::channel::<JoinedNode>();
    let join = |node: u32| {
        let ids = frontend.ranges[node as usize - 1].clone();
        let stop = start_node(
            node,
            frontend.addr,
            ids,
            Arc::clone(&map),
            joined_tx.clone(),
        );
        let joined = joined_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the node joins");
        (stop, joined)
    };
    let (stop_1, node_1) = join(1);
    let (stop_2, node_2) = join(2);
    let two = wait_for_agreement(&map, &[&node_1, &node_2], 2);

    // Keys written once, before the join, and never again.
    let old_key = |i: u32| format!("old:{i}").into_bytes();
    let mut before = Client::connect(node_2.clients);
    for i in 0..KEYS {
        assert_eq!(
            before.store("set", &old_key(i), &value(i, 0), ""),
            "STORED\r\n"
        );
    }

    let stop_writing = Arc::new(AtomicBool::new(false));
    let writer = {
        let clients = vec![
            Client::connect(node_1.clients),
            Client::connect(node_2.clients),
        ];
        let stop = Arc::clone(&stop_writing);
        thread::spawn(move || write_and_read(clients, &stop, 4))
    };
    thread::sleep(Duration::from_millis(300));
    let (stop_3, node_3) = join(3);
    let three = wait_for_agreement(&map, &[&node_1, &node_2, &node_3], 3);
    assert_eq!(three.epoch(), two.epoch() + 1);
    thread::sleep(Duration::from_millis(300));
    stop_writing.store(true, Ordering::SeqCst);
    let seen = writer.join().expect("no wrong value was read");
    println!(
        "{} rounds: {} stored, {} refused while the map changed, {} hits, {} misses",
        seen.rounds, seen.stored, seen.refused, seen.hits, seen.misses
    );
    assert!(seen.stored > 0 && seen.hits > 0);

    // Through every node: the last value written, or a miss; the keys
    // node 3 took since their last write are misses.
    for node in [&node_1, &node_2, &node_3] {
        let mut client = Client::connect(node.clients);
        for i in 0..KEYS {
            let found = client.get("get", &[key(i)]);
            let want = seen.last.get(&i).map(|&round| value(i, round));
            match found.first() {
                Some((_, data, _)) => assert_eq!(Some(data), want.as_ref(), "key:{i}"),
                None => assert!(
                    want.is_none() || three.owner(&key(i)).unwrap().node == NodeId(3),
                    "key:{i} is node {}'s and missed",
                    three.owner(&key(i)).unwrap().node
                ),
            }
        }
    }
    // The keys written before the join: node 3 took about a third of
    // them, which are misses (invalidated); the rest read back.
    let mut taken = 0;
    for node in [&node_1, &node_2, &node_3] {
        let mut client = Client::connect(node.clients);
        for i in 0..KEYS {
            let found = client.get("get", &[old_key(i)]);
            if three.owner(&old_key(i)).unwrap().node == NodeId(3) {
                assert!(
                    found.is_empty(),
                    "old:{i} was taken by node 3 and did not miss"
                );
                taken += 1;
            } else {
                assert_eq!(found.len(), 1, "old:{i} missed");
                assert_eq!(found[0].1, value(i, 0), "old:{i}");
            }
        }
    }
    assert!(
        taken > 3 * KEYS / 5 && taken < 3 * 2 * KEYS / 5,
        "{taken} of 3 × {KEYS}"
    );
    for stop in [stop_1, stop_2, stop_3] {
        stop.send(());
    }
    frontend.stop.send(());
}
