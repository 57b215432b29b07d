//! Membership over a `GlobalIdMap` (`src/cluster/membership.rs`), against
//! the in-process map: the first registration makes epoch 1, a join the
//! next epoch, a node whose lease expires leaves the map at the epoch
//! after, a node that loses the compare-and-swap race to another writes
//! nothing (the epoch grows once per change), what cannot be read is
//! reported and left as it is, and the settled epoch is the least promise
//! (`memcached/adopted/N`) of the registered nodes, a missing or
//! unreadable one counting as 0.

mod test_map;

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Waker};
use std::time::Duration;

use ebb_core::{
    GlobalIdMap, InProcessGlobalIdMap, Lease, MapError, MapFuture, NodeId, Swap, Watch,
};
use memcached::cluster::membership::{
    adopted_key, publish_adopted, reconcile, register, settled_epoch, MembershipError,
};
use memcached::cluster::{Member, ShardMap, ShardMapError, SHARD_MAP_KEY};
use test_map::{ready, TestMap};

fn member(node: u32) -> Member {
    Member {
        node: NodeId(node),
        shard_ebb: 32_768 + 64 * node,
    }
}

fn join(map: &dyn GlobalIdMap, node: u32) -> Lease {
    let lease = ready(map.grant_lease(Duration::from_secs(10))).unwrap();
    ready(register(map, member(node), lease)).unwrap();
    lease
}

fn stored(map: &dyn GlobalIdMap) -> ShardMap {
    ShardMap::decode(&ready(map.get(SHARD_MAP_KEY)).unwrap().unwrap()).unwrap()
}

#[test]
fn joins_and_an_expired_lease_each_make_one_new_epoch() {
    let map = InProcessGlobalIdMap::new();
    join(&map, 1);
    let first = ready(reconcile(&map)).unwrap();
    assert_eq!((first.epoch(), first.members()), (1, &[member(1)][..]));
    // Nothing changed: nothing written.
    assert_eq!(ready(reconcile(&map)).unwrap(), first);
    let lease_2 = join(&map, 2);
    join(&map, 3);
    let grown = ready(reconcile(&map)).unwrap();
    assert_eq!(grown.epoch(), 2);
    assert_eq!(grown.members(), &[member(1), member(2), member(3)]);
    assert_eq!(stored(&map), grown);
    // Node 2 is lost: nobody keeps its lease alive.
    map.expire(lease_2).unwrap();
    let shrunk = ready(reconcile(&map)).unwrap();
    assert_eq!(
        (shrunk.epoch(), shrunk.members()),
        (3, &[member(1), member(3)][..])
    );
}

#[test]
fn a_node_that_loses_the_race_writes_nothing() {
    let map = TestMap::new(Arc::new(InProcessGlobalIdMap::new()));
    join(&map, 1);
    join(&map, 2);
    map.lose_next_race.store(true, Ordering::SeqCst);
    let mut watch = ready(map.watch(SHARD_MAP_KEY)).unwrap();
    let in_force = ready(reconcile(&map)).unwrap();
    assert!(
        !map.lose_next_race.load(Ordering::SeqCst),
        "the race was run"
    );
    assert_eq!(
        (in_force.epoch(), in_force.members()),
        (1, &[member(1), member(2)][..])
    );
    // One write of the map: the winner's.
    let change = ready(watch.changed()).unwrap();
    assert_eq!(change.value, Some(in_force.encode()));
    assert!(watch
        .poll_change(&mut Context::from_waker(Waker::noop()))
        .is_pending());
}

#[test]
fn what_cannot_be_read_is_reported_and_left_alone() {
    let map = InProcessGlobalIdMap::new();
    join(&map, 1);
    ready(map.set(SHARD_MAP_KEY, b"garbage, not a shard map".to_vec(), None)).unwrap();
    assert_eq!(
        ready(reconcile(&map)),
        Err(MembershipError::BadShardMap(ShardMapError::BadMagic))
    );
    assert_eq!(
        ready(map.get(SHARD_MAP_KEY)).unwrap(),
        Some(b"garbage, not a shard map".to_vec())
    );
    ready(map.delete(SHARD_MAP_KEY)).unwrap();
    ready(map.set("memcached/members/2", b"two".to_vec(), None)).unwrap();
    assert_eq!(
        ready(reconcile(&map)),
        Err(MembershipError::BadRegistration {
            key: "memcached/members/2".into()
        })
    );
    ready(map.delete("memcached/members/2")).unwrap();
    ready(map.set("memcached/members/0", b"1".to_vec(), None)).unwrap();
    assert_eq!(
        ready(reconcile(&map)),
        Err(MembershipError::BadMembers(ShardMapError::FrontendAsMember))
    );
    assert_eq!(ready(map.get(SHARD_MAP_KEY)).unwrap(), None);
}

#[test]
fn an_unreachable_map_is_the_maps_error() {
    struct Down;
    fn down<'a, T: 'a>() -> MapFuture<'a, T> {
        Box::pin(async {
            Err(MapError::Unreachable {
                endpoint: "etcd at 127.0.0.1:1".into(),
                reason: "connection refused".into(),
            })
        })
    }
    impl GlobalIdMap for Down {
        fn get<'a>(&'a self, _: &'a str) -> MapFuture<'a, Option<Vec<u8>>> {
            down()
        }
        fn set<'a>(&'a self, _: &'a str, _: Vec<u8>, _: Option<Lease>) -> MapFuture<'a, ()> {
            down()
        }
        fn delete<'a>(&'a self, _: &'a str) -> MapFuture<'a, bool> {
            down()
        }
        fn compare_and_swap<'a>(
            &'a self,
            _: &'a str,
            _: Option<Vec<u8>>,
            _: Vec<u8>,
        ) -> MapFuture<'a, Swap> {
            down()
        }
        fn list<'a>(&'a self, _: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>> {
            down()
        }
        fn reserve_range(&self, _: NodeId, _: u32) -> MapFuture<'_, Range<u32>> {
            down()
        }
        fn grant_lease(&self, _: Duration) -> MapFuture<'_, Lease> {
            down()
        }
        fn keep_alive(&self, _: Lease) -> MapFuture<'_, ()> {
            down()
        }
        fn revoke(&self, _: Lease) -> MapFuture<'_, ()> {
            down()
        }
        fn watch<'a>(&'a self, _: &'a str) -> MapFuture<'a, Watch> {
            down()
        }
    }
    let error = ready(reconcile(&Down)).unwrap_err();
    assert!(matches!(
        &error,
        MembershipError::Map(MapError::Unreachable { endpoint, .. }) if endpoint == "etcd at 127.0.0.1:1"
    ));
    assert!(error.to_string().contains("etcd at 127.0.0.1:1"), "{error}");
}

#[test]
fn the_settled_epoch_is_the_least_promise_of_the_registered_nodes() {
    let map = InProcessGlobalIdMap::new();
    let lease_1 = join(&map, 1);
    join(&map, 2);
    let settled = |map: &InProcessGlobalIdMap| ready(settled_epoch(map, NodeId(1))).unwrap();
    // Node 2 promised nothing yet: it may serve under any epoch.
    ready(publish_adopted(&map, NodeId(1), 3, lease_1)).unwrap();
    assert_eq!(settled(&map), (0, Some(3)));
    // A promise that is not canonical decimal counts as none.
    ready(map.set(&adopted_key(NodeId(2)), b"05".to_vec(), None)).unwrap();
    assert_eq!(settled(&map), (0, Some(3)));
    ready(map.set(&adopted_key(NodeId(2)), b"4".to_vec(), None)).unwrap();
    assert_eq!(settled(&map), (3, Some(3)));
    // A node that is not registered is not waited for.
    ready(map.set(&adopted_key(NodeId(9)), b"0".to_vec(), None)).unwrap();
    assert_eq!(settled(&map), (3, Some(3)));
    // Nobody registered: nobody to wait for.
    let empty = InProcessGlobalIdMap::new();
    assert_eq!(settled(&empty), (u64::MAX, None));
    // Node 1's lease ends: its registration and promise go together.
    map.expire(lease_1).unwrap();
    assert_eq!(settled(&map), (4, None));
}
