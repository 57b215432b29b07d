//! The fences that keep two nodes from serving one key at once
//! (`src/cluster/current.rs`, `docs/distributed-memcached.md`, "Epochs:
//! never a wrong value"), on a one-core event loop with a clock the test
//! moves, without a connection:
//!
//! * the handover fence: while node 1 still goes by epoch 1 and node 3
//!   adopted epoch 2, which moved a key from node 1 to node 3, node 3
//!   neither serves nor takes that key (the owner check alone let both
//!   nodes serve it: shown first), until every registered node adopted
//!   epoch 2; then it is a miss, never a value from before;
//! * the self-fence: the node's own keep-alive task against a map whose
//!   keep-alive fails: past the lease's time to live minus the margin the
//!   node serves none of its keys; once the lease ran out, it registers
//!   again, and its own follow task adopts the map naming it, it serves
//!   again, and what it held before is gone.

mod shard_support;
mod test_map;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ebb_core::{GlobalIdMap, InProcessGlobalIdMap, Lease, NodeId};
use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use memcached::cluster::current::{Adopted, CurrentMap, View};
use memcached::cluster::node::{enrol, stay_member, LEASE_TTL, SELF_FENCE_MARGIN};
use memcached::cluster::serve::serve;
use memcached::cluster::shard_ebb::ShardRoot;
use memcached::cluster::{Command, Entry, ForwardReply, ForwardRequest, Member, StoreMode};
use memcached::{Server, Settings};
use shard_support::{map, on_a_clocked_core, on_a_core};
use test_map::TestMap;

const NOW: u32 = 1_700_000_000;

/// One node: its server and map in force, registered when no map was
/// stored yet, with a lease that never lapses.
struct TestNode {
    server: &'static Server,
    current: &'static CurrentMap,
}

impl TestNode {
    fn new(node: u32) -> TestNode {
        let current: &'static CurrentMap = Box::leak(Box::new(CurrentMap::new(NodeId(node))));
        current.lease_kept(Instant(u64::MAX));
        current.registered(0);
        TestNode {
            server: Server::start(Settings::default(), NOW).unwrap(),
            current,
        }
    }

    /// Forwards `command` stamped `epoch` with `payload` to this node.
    fn call(&self, epoch: u64, command: Command<'_>, payload: &[u8]) -> (ForwardReply, Vec<u8>) {
        let root = ShardRoot {
            server: self.server,
            current: self.current,
        };
        shard_support::call(&root, epoch, command, payload)
    }

    async fn adopt(&self, map: memcached::cluster::ShardMap) -> Adopted {
        self.current.adopt(&self.server.store, map).await.unwrap()
    }
}

fn set(key: &[u8]) -> Command<'_> {
    Command::Store {
        mode: StoreMode::Set,
        flags: 0,
        exptime: 0,
        cas: 0,
        key,
    }
}

fn get(key: &[u8]) -> Command<'_> {
    Command::Get {
        cas: false,
        touch: None,
        keys: vec![key],
    }
}

/// A `Get`'s answer holding `value`.
fn found(value: &[u8]) -> (ForwardReply, Vec<u8>) {
    let entry = Entry {
        flags: 0,
        cas: 0,
        len: u32::try_from(value.len()).unwrap(),
    };
    (ForwardReply::Values(vec![Some(entry)]), value.to_vec())
}

fn missed() -> (ForwardReply, Vec<u8>) {
    (ForwardReply::Values(vec![None]), Vec::new())
}

#[test]
fn a_moved_key_is_served_by_neither_owner_until_every_node_adopted_the_move() {
    on_a_core(|| async {
        let (one, two, three) = (TestNode::new(1), TestNode::new(2), TestNode::new(3));
        let before = map(1, &[1, 2]);
        let after = map(2, &[1, 2, 3]);
        let owners = |key: &[u8]| {
            (
                before.owner(key).unwrap().node.0,
                after.owner(key).unwrap().node.0,
            )
        };
        let keys: Vec<Vec<u8>> = (0..)
            .map(|i| format!("key:{i}").into_bytes())
            .take(400)
            .collect();
        let moved = keys.iter().find(|key| owners(key) == (1, 3)).unwrap();
        let kept = keys.iter().find(|key| owners(key) == (1, 1)).unwrap();
        for node in [&one, &two, &three] {
            assert_eq!(node.adopt(before.clone()).await, Adopted::Swept(0));
            node.current.settle(1).unwrap();
        }
        // v1 through node 2, at epoch 1: node 1 stores it.
        assert!(matches!(
            one.call(1, set(moved), b"v1").0,
            ForwardReply::Stored(_)
        ));
        assert!(matches!(
            one.call(1, set(kept), b"k1").0,
            ForwardReply::Stored(_)
        ));

        // Node 3 adopts epoch 2 first; nodes 1 and 2 still go by epoch 1.
        assert_eq!(three.adopt(after.clone()).await, Adopted::Swept(0));

        // What the owner check alone allowed (the map and the stamp): node
        // 3 takes v2 for the moved key while node 1, asked by node 2 at
        // epoch 1, still answers v1, so a client that stored v2 reads v1.
        let scratch = Server::start(Settings::default(), NOW).unwrap();
        let control = ForwardRequest {
            epoch: 2,
            command: set(moved),
        }
        .encode()
        .unwrap();
        let unfenced = serve(
            &scratch.store,
            &View::agreed(&after, NodeId(3)),
            NOW,
            &control,
            &IoChain::from(IoBuf::copy_from_slice(b"v2")),
        );
        assert!(matches!(unfenced.0, ForwardReply::Stored(_)));
        assert_eq!(one.call(1, get(moved), b""), found(b"v1"));

        // With the handover fence: node 3 neither takes nor answers the
        // key it gained until every registered node adopted epoch 2.
        assert!(!three.current.serves(moved));
        assert_eq!(
            three.call(2, set(moved), b"v2").0,
            ForwardReply::NotOwner(2)
        );
        assert_eq!(three.call(2, get(moved), b"").0, ForwardReply::NotOwner(2));
        // Node 1, at epoch 1, is still the only one serving it.
        assert!(matches!(
            one.call(1, set(moved), b"v3").0,
            ForwardReply::Stored(_)
        ));
        assert_eq!(one.call(1, get(moved), b""), found(b"v3"));

        // Nodes 1 and 2 adopt epoch 2: node 1 drops the keys it lost and
        // refuses requests stamped with epoch 1.
        assert!(matches!(one.adopt(after.clone()).await, Adopted::Swept(n) if n > 0));
        assert_eq!(two.adopt(after.clone()).await, Adopted::Swept(0));
        assert_eq!(one.call(1, get(moved), b"").0, ForwardReply::WrongEpoch(2));
        assert_eq!(one.call(2, get(moved), b"").0, ForwardReply::NotOwner(2));
        // A key node 1 owned in both maps is served all along.
        assert!(one.current.serves(kept));
        assert_eq!(one.call(2, get(kept), b""), found(b"k1"));
        // Not settled yet as node 3 knows: still fenced.
        assert_eq!(three.call(2, get(moved), b"").0, ForwardReply::NotOwner(2));

        // Every registered node published epoch 2: node 3 serves the key,
        // a miss at first (never v1 or v3), then what is written.
        three.current.settle(2).unwrap();
        assert!(three.current.serves(moved));
        assert_eq!(three.call(2, get(moved), b""), missed());
        assert!(matches!(
            three.call(2, set(moved), b"v4").0,
            ForwardReply::Stored(_)
        ));
        assert_eq!(three.call(2, get(moved), b""), found(b"v4"));

        // Every lease gone at once (the map unreachable longer than the
        // time to live): the settled epoch read is that of no registered
        // node, u64::MAX. It opens no fence of a map adopted later: node
        // 3 takes node 2's keys at epoch 3 and still serves none of them
        // until epoch 3 is settled.
        let third = map(3, &[1, 3]);
        let from_two = keys
            .iter()
            .find(|key| {
                after.owner(key).unwrap().node.0 == 2 && third.owner(key).unwrap().node.0 == 3
            })
            .unwrap();
        three.current.settle(u64::MAX).unwrap();
        assert_eq!(three.adopt(third.clone()).await, Adopted::Swept(0));
        assert!(!three.current.serves(from_two));
        assert_eq!(
            three.call(3, get(from_two), b"").0,
            ForwardReply::NotOwner(3)
        );
        three.current.settle(3).unwrap();
        assert!(three.current.serves(from_two));
    });
}

#[test]
fn a_node_whose_lease_may_have_lapsed_serves_none_of_its_keys_until_it_is_back() {
    on_a_clocked_core(|clock| async move {
        let flaky = Arc::new(TestMap::new(Arc::new(InProcessGlobalIdMap::new())));
        let map: Arc<dyn GlobalIdMap> = Arc::clone(&flaky) as Arc<dyn GlobalIdMap>;
        let server = Server::start(Settings::default(), NOW).unwrap();
        let current: &'static CurrentMap = Box::leak(Box::new(CurrentMap::new(NodeId(1))));
        let member = Member {
            node: NodeId(1),
            shard_ebb: 32_769,
        };
        let node = TestNode { server, current };
        // Joined as `node::try_join` does, without the Messenger: the node's
        // own keep-alive and follow tasks.
        let lease = enrol(&*map, member, current).await.unwrap();
        let held = stay_member(Arc::clone(&map), server, member, current, lease);
        let key = b"mine";
        // The follow task writes and adopts the first map and settles it.
        while !current.serves(key) {
            ebb_event::sleep(Duration::from_millis(10)).await;
        }
        let epoch = current.epoch();
        assert!(matches!(
            node.call(epoch, set(key), b"before").0,
            ForwardReply::Stored(_)
        ));

        // Keep-alives fail from now on: until the lease's time to live
        // minus the margin since the last one that succeeded was sent,
        // the node serves; after, it serves none of its keys.
        flaky.keep_alive_fails.store(true, Ordering::SeqCst);
        // The last keep-alive that succeeded was sent at or before now.
        let fenced_at = clock.read() + (LEASE_TTL - SELF_FENCE_MARGIN);
        ebb_event::sleep(LEASE_TTL - SELF_FENCE_MARGIN - Duration::from_secs(4)).await;
        assert!(clock.read() < fenced_at);
        assert_eq!(node.call(epoch, get(key), b""), found(b"before"));
        ebb_event::sleep(Duration::from_secs(4)).await;
        assert!(clock.read() >= fenced_at);
        assert!(!current.view(|view| view.lease_live()));
        assert_eq!(
            node.call(epoch, get(key), b"").0,
            ForwardReply::NotOwner(epoch)
        );
        assert_eq!(
            node.call(epoch, set(key), b"during").0,
            ForwardReply::NotOwner(epoch)
        );

        // The lease runs out: its registration goes; the map is reached
        // again, the keep-alive finds the lease expired, the node
        // registers again and its follow task adopts the map naming it.
        flaky
            .inner
            .expire(Lease(held.load(Ordering::SeqCst)))
            .unwrap();
        flaky.keep_alive_fails.store(false, Ordering::SeqCst);
        let deadline = clock.read() + Duration::from_secs(60);
        while !current.serves(key) {
            assert!(clock.read() < deadline, "the node did not come back");
            ebb_event::sleep(Duration::from_millis(100)).await;
        }
        assert_ne!(Lease(held.load(Ordering::SeqCst)), lease);
        let epoch = current.epoch();
        // Whatever it held from before the lapse is gone: a miss.
        assert_eq!(node.call(epoch, get(key), b""), missed());
        assert!(matches!(
            node.call(epoch, set(key), b"after").0,
            ForwardReply::Stored(_)
        ));
        assert_eq!(node.call(epoch, get(key), b""), found(b"after"));
    });
}
