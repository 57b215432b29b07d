//! Three memcached nodes and a frontend in one process, each a hosted
//! node (its own Ebbflow runtime on a thread) over kernel TCP on
//! 127.0.0.1, sharing one in-process `GlobalIdMap`. The nodes join as a
//! launcher would start them (`cluster/node.rs`: a boot contract, the
//! Messenger, the shard Ebb, an announcement, a registration under a
//! lease) and agree on one shard map. The frontend then forwards, as a
//! node's connection will: 3,000 checksummed values set through the
//! Messenger at each key's owner read back identically, a request to a
//! node that does not own the key changes nothing; then node 3's lease
//! expires and its VM is gone: nodes 1 and 2 adopt the next map, node
//! 3's keys are misses at their new owners and every other key still
//! reads back its value. No wrong value is read at any point.

mod cluster_support;

use std::net::SocketAddrV4;
use std::ops::Range;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use cluster_support::{agreement, key, node_config, start_node, value, JoinedNode, AGREE_WITHIN};
use ebb_core::{InProcessGlobalIdMap, NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_event::{sleep, Sender};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{acceptor, create_messenger, Frontend, MessengerRef, MessengerSettings};
use memcached::cluster::forwarder::forward;
use memcached::cluster::{Command, ForwardReply, ForwardRequest, ShardMap, StoreMode};

const NODES: u32 = 3;
const KEYS: u32 = 3_000;
/// How long the test waits for the frontend's verdict.
const VERDICT_WITHIN: Duration = Duration::from_secs(120);

/// Waits until every node of `nodes` goes by the stored map, it has
/// `members` members and every node knows all registered nodes adopted
/// it (`agreement`).
async fn agreed(map: &InProcessGlobalIdMap, nodes: &[&JoinedNode], members: usize) -> ShardMap {
    let deadline = std::time::Instant::now() + AGREE_WITHIN;
    loop {
        if let Some(in_force) = agreement(map, nodes, members) {
            return in_force;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the nodes did not agree on {members} members within {AGREE_WITHIN:?}"
        );
        sleep(Duration::from_millis(20)).await;
    }
}

async fn set(messenger: MessengerRef, map: &ShardMap, i: u32, round: u32) -> ForwardReply {
    let key = key(i);
    let owner = map.owner(&key).unwrap();
    let request = ForwardRequest {
        epoch: map.epoch(),
        command: Command::Store {
            mode: StoreMode::Set,
            flags: i,
            exptime: 0,
            cas: 0,
            key: &key,
        },
    };
    let payload = IoChain::from(IoBuf::from_vec(value(i, round)));
    forward(messenger, owner, &request, payload)
        .await
        .unwrap()
        .0
}

/// Key `i`'s value at its owner under `map`: `None` a miss.
async fn get(messenger: MessengerRef, map: &ShardMap, i: u32) -> Option<Vec<u8>> {
    let key = key(i);
    let owner = map.owner(&key).unwrap();
    let request = ForwardRequest {
        epoch: map.epoch(),
        command: Command::Get {
            cas: false,
            touch: None,
            keys: vec![&key],
        },
    };
    let (reply, values) = forward(messenger, owner, &request, IoChain::new())
        .await
        .unwrap();
    let ForwardReply::Values(entries) = reply else {
        panic!("key:{i}: a get answered {reply:?}");
    };
    assert_eq!(entries.len(), 1);
    entries[0].map(|entry| {
        assert_eq!(entry.flags, i, "key:{i}'s flags");
        values.to_vec()
    })
}

#[test]
fn three_nodes_share_one_cache_and_losing_one_gives_misses_never_wrong_values() {
    let map = Arc::new(InProcessGlobalIdMap::new());
    let (setup_tx, setup_rx) = mpsc::channel();
    let (joined_tx, joined_rx) = mpsc::channel::<JoinedNode>();
    let (verdict_tx, verdict_rx) = mpsc::channel();
    let (stop_3_tx, stop_3_rx) = mpsc::channel::<()>();
    let frontend_map = Arc::clone(&map);
    thread::spawn(move || {
        let verdict = ebb_hosted::run_task(node_config(), move || async move {
            let map = frontend_map;
            let messenger = create_messenger(MessengerSettings::new(NodeId(0))).unwrap();
            let registry = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
            registry.serve(messenger).unwrap();
            let ranges: Vec<Range<u32>> = (1..=NODES)
                .map(|node| registry.expect(NodeId(node), 64).unwrap())
                .collect();
            let addr =
                ebb_net::listen("127.0.0.1:0".parse().unwrap(), acceptor(messenger)).unwrap();
            let std::net::SocketAddr::V4(addr) = addr else {
                unreachable!("listening on IPv4")
            };
            setup_tx.send((addr, ranges)).unwrap();
            let mut nodes = Vec::new();
            while nodes.len() < NODES as usize {
                match joined_rx.try_recv() {
                    Ok(node) => nodes.push(node),
                    Err(_) => sleep(Duration::from_millis(10)).await,
                }
            }
            nodes.sort_by_key(|n| n.node);
            let all: Vec<&JoinedNode> = nodes.iter().collect();
            let three = agreed(&map, &all, 3).await;

            for i in 0..KEYS {
                assert!(matches!(
                    set(messenger, &three, i, 1).await,
                    ForwardReply::Stored(_)
                ));
            }
            for i in 0..KEYS {
                assert_eq!(
                    get(messenger, &three, i).await,
                    Some(value(i, 1)),
                    "key:{i}"
                );
            }
            // A node that does not own the key refuses and changes nothing.
            let key_0 = key(0);
            let owner = three.owner(&key_0).unwrap();
            let other = *three
                .members()
                .iter()
                .find(|m| m.node != owner.node)
                .unwrap();
            let request = ForwardRequest {
                epoch: three.epoch(),
                command: Command::Delete {
                    cas: 0,
                    key: &key_0,
                },
            };
            let (reply, _) = forward(messenger, other, &request, IoChain::new())
                .await
                .unwrap();
            assert_eq!(reply, ForwardReply::NotOwner(three.epoch()));
            assert_eq!(get(messenger, &three, 0).await, Some(value(0, 1)));

            // Node 3 is lost: its VM is gone (the launcher forgets it and
            // tells the Messenger) and its lease runs out.
            stop_3_tx.send(()).unwrap();
            registry.forget(NodeId(3));
            messenger.get().unwrap().lose_node(NodeId(3));
            map.expire(nodes[2].lease).unwrap();
            let two = agreed(&map, &all[..2], 2).await;
            assert_eq!(two.epoch(), three.epoch() + 1);
            let (mut hits, mut misses) = (0, 0);
            for i in 0..KEYS {
                let was_3s = three.owner(&key(i)).unwrap().node == NodeId(3);
                match get(messenger, &two, i).await {
                    Some(found) => {
                        assert!(!was_3s, "key:{i} was node 3's and is not a miss");
                        assert_eq!(found, value(i, 1), "key:{i}");
                        hits += 1;
                    }
                    None => {
                        assert!(was_3s, "key:{i} was not node 3's and is a miss");
                        misses += 1;
                    }
                }
            }
            // The survivors keep serving: writes go to the new owners.
            for i in 0..KEYS {
                assert!(matches!(
                    set(messenger, &two, i, 2).await,
                    ForwardReply::Stored(_)
                ));
            }
            for i in 0..KEYS {
                assert_eq!(get(messenger, &two, i).await, Some(value(i, 2)), "key:{i}");
            }
            (hits, misses)
        })
        .unwrap();
        let _ = verdict_tx.send(verdict);
    });
    let (addr, ranges): (SocketAddrV4, Vec<Range<u32>>) = setup_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the frontend listens");
    let mut stops: Vec<Sender<()>> = (1..=NODES)
        .zip(ranges)
        .map(|(node, ids)| {
            let shared: Arc<InProcessGlobalIdMap> = Arc::clone(&map);
            start_node(node, addr, ids, shared, joined_tx.clone())
        })
        .collect();
    let stop_3 = stops.pop().unwrap();
    thread::spawn(move || {
        if stop_3_rx.recv().is_ok() {
            stop_3.send(());
        }
    });
    let (hits, misses) = verdict_rx
        .recv_timeout(VERDICT_WITHIN)
        .expect("the frontend's verdict within 120 s");
    for stop in stops {
        stop.send(());
    }
    println!("after node 3's loss: {hits} hits, {misses} misses of {KEYS} keys");
    assert_eq!(hits + misses, KEYS);
    assert!(
        misses > KEYS / 5 && hits > KEYS / 3,
        "{hits} hits, {misses} misses"
    );
}
