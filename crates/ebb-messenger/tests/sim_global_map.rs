//! The global id map over the Messenger, on the simulated link: node 1's
//! `RemoteGlobalIdMap` against node 0's `MapService` (the hosted node's
//! side) serving an in-process map. Every operation gives through the
//! remote map what it gives on an in-process map (the same results, the
//! same errors); a watch delivers the changes in order across polls that
//! find nothing; a dropped watch ends on the hosted node; and a hosted
//! node that is not known, vanishes or is lost is `Unreachable`, naming
//! it. The service refuses a request that does not decode, another
//! node's watch, and a second poll of a watch while one waits.

mod map_support;
mod sim_support;

use std::sync::Arc;
use std::time::Duration;

use ebb_core::{
    Change, GlobalIdMap, InProcessGlobalIdMap, Lease, MapError, MapFuture, NodeId, Swap, Watch,
};
use ebb_event::sleep;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::map::{
    decode_reply, MapReply, MapRequest, MapService, RemoteGlobalIdMap, GET, MAP_EBB, MAP_MALFORMED,
    MAX_REPLY_BYTES, MAX_RESERVE_LEN, MAX_VALUE_BYTES, MAX_WATCHES_PER_NODE,
};
use ebb_messenger::MessengerError;
use map_support::{assert_unreachable, same_as_in_process};
use sim_support::nodes::{learn, sim_node, simulate, SimNode};

/// Node 0 serving `backing` and node 1 knowing where it is.
fn hosted_and_node(
    sim: &std::cell::RefCell<ebb_netstack::sim::Sim>,
    backing: Arc<dyn GlobalIdMap>,
) -> (SimNode, SimNode, Arc<MapService>) {
    let hosted = sim_node(sim, 0);
    let node = sim_node(sim, 1);
    let service = MapService::new(backing);
    service.serve(hosted.messenger).unwrap();
    learn(&node, &hosted);
    (hosted, node, service)
}

#[test]
fn every_operation_gives_through_the_hosted_node_what_it_gives_in_process() {
    simulate(|sim| async move {
        let (_hosted, node, _service) =
            hosted_and_node(&sim, Arc::new(InProcessGlobalIdMap::new()));
        let remote = RemoteGlobalIdMap::new(node.messenger);
        same_as_in_process(&remote).await;
        // And a swap through the remote map is seen by the hosted one.
        assert_eq!(
            remote.compare_and_swap("k", None, b"x".to_vec()).await,
            Ok(Swap::Conflict(Some(vec![0, 255])))
        );
    });
}

#[test]
fn a_watch_delivers_every_change_in_order_and_ends_on_the_hosted_node_when_dropped() {
    simulate(|sim| async move {
        let backing = Arc::new(InProcessGlobalIdMap::new());
        let (_hosted, node, service) = hosted_and_node(&sim, backing.clone());
        let remote =
            RemoteGlobalIdMap::new(node.messenger).with_poll_wait(Duration::from_millis(300));
        let mut watch = remote.watch("nodes/").await.unwrap();
        assert_eq!(service.open_watches(), 1);
        // Polls that find nothing come back empty and are made again.
        sleep(Duration::from_secs(1)).await;
        let lease = backing.grant_lease(Duration::from_secs(5)).await.unwrap();
        backing
            .set("nodes/1", b"up".to_vec(), Some(lease))
            .await
            .unwrap();
        backing.set("other", b"x".to_vec(), None).await.unwrap();
        // Through the remote map as well as on the hosted node.
        remote.set("nodes/2", b"up".to_vec(), None).await.unwrap();
        backing.expire(lease).unwrap();
        let change = |key: &str, value: Option<&[u8]>| Change {
            key: key.into(),
            value: value.map(<[u8]>::to_vec),
        };
        assert_eq!(watch.changed().await, Ok(change("nodes/1", Some(b"up"))));
        assert_eq!(watch.changed().await, Ok(change("nodes/2", Some(b"up"))));
        assert_eq!(watch.changed().await, Ok(change("nodes/1", None)));
        // Many changes at once come in several polls, all of them.
        for n in 0..600 {
            backing
                .set(&format!("nodes/many/{n}"), vec![1], None)
                .await
                .unwrap();
        }
        for n in 0..600 {
            assert_eq!(
                watch.changed().await.unwrap().key,
                format!("nodes/many/{n}")
            );
        }
        drop(watch);
        sleep(Duration::from_millis(100)).await;
        assert_eq!(service.open_watches(), 0);
        // A node that is lost takes its watches with it.
        let _again = remote.watch("ebb/").await.unwrap();
        assert_eq!(service.open_watches(), 1);
        service.forget_node(NodeId(1));
        assert_eq!(service.open_watches(), 0);
    });
}

#[test]
fn a_hosted_node_unknown_vanished_or_lost_is_unreachable_and_named() {
    simulate(|sim| async move {
        let lonely = sim_node(&sim, 2);
        let remote = RemoteGlobalIdMap::new(lonely.messenger);
        assert_unreachable(
            remote.get("k").await,
            "address unknown",
            "no address is known",
        );

        let (hosted, node, _service) = hosted_and_node(&sim, Arc::new(InProcessGlobalIdMap::new()));
        let remote = RemoteGlobalIdMap::new(node.messenger)
            .with_call_timeout(Duration::from_secs(2))
            .with_poll_wait(Duration::from_secs(1));
        let mut watch = remote.watch("nodes/").await.unwrap();
        hosted.side.vanished.set(true);
        let started = ebb_event::now();
        assert_unreachable(
            remote.get("k").await,
            "10.0.0.10:7100",
            "no reply within 2000 ms",
        );
        assert!(ebb_event::now().saturating_since(started) < Duration::from_secs(3));
        // The watch's poll fails the same way, and the watch stays ended.
        assert_unreachable(watch.changed().await, "10.0.0.10:7100", "");
        assert_unreachable(watch.changed().await, "10.0.0.10:7100", "");
        // The frontend's launcher says the hosted node... is lost: at once.
        let pending = ebb_event::spawn_task({
            let remote = remote.clone();
            async move { remote.list("").await }
        });
        sleep(Duration::from_millis(100)).await;
        node.rep.lose_node(NodeId(0));
        assert_unreachable(pending.await.unwrap(), "address unknown", "node 0 is lost");
    });
}

#[test]
fn a_node_without_the_service_refuses_and_says_so() {
    simulate(|sim| async move {
        let hosted = sim_node(&sim, 0);
        let node = sim_node(&sim, 1);
        learn(&node, &hosted);
        let remote = RemoteGlobalIdMap::new(node.messenger);
        match remote.get("k").await {
            Err(MapError::Refused(why)) => {
                assert!(why.contains("does not serve the global id map"), "{why}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    });
}

#[test]
fn the_service_refuses_a_malformed_request_another_node_s_watch_and_a_second_poll() {
    simulate(|sim| async move {
        let (hosted, node, service) = hosted_and_node(&sim, Arc::new(InProcessGlobalIdMap::new()));
        let other = sim_node(&sim, 2);
        learn(&other, &hosted);
        let raw = |from: &SimNode, request: MapRequest| {
            let number = request.number();
            let call = from.rep.call(
                NodeId(0),
                MAP_EBB,
                number,
                IoChain::from(IoBuf::from_vec(request.encode())),
            );
            async move {
                call.await
                    .map(|reply| decode_reply(number, &reply.payload.to_vec()).unwrap())
            }
        };
        // A request that does not decode: refused with MAP_MALFORMED.
        assert_eq!(
            node.rep
                .call(
                    NodeId(0),
                    MAP_EBB,
                    GET,
                    IoChain::from(IoBuf::from_static(b"\x05"))
                )
                .await
                .unwrap_err(),
            MessengerError::Refused {
                node: NodeId(0),
                code: MAP_MALFORMED
            }
        );
        let Ok(Ok(MapReply::Watching(watch))) = raw(
            &node,
            MapRequest::Watch {
                prefix: "nodes/".into(),
            },
        )
        .await
        else {
            panic!("node 1 watches");
        };
        // Node 2 cannot poll or end node 1's watch.
        let poll = || MapRequest::NextChanges {
            watch,
            wait_ms: 1000,
        };
        assert!(matches!(
            raw(&other, poll()).await,
            Ok(Err(MapError::WatchEnded(why))) if why.contains("node 2 has no watch")
        ));
        // A second poll while the first waits is refused; the first
        // still gets its (empty) answer.
        let first = ebb_event::spawn_task(raw(&node, poll()));
        sleep(Duration::from_millis(100)).await;
        assert!(matches!(
            raw(&node, poll()).await,
            Ok(Err(MapError::Refused(why))) if why.contains("being polled already")
        ));
        assert_eq!(first.await.unwrap(), Ok(Ok(MapReply::Changes(vec![]))));
        assert_eq!(
            raw(&other, MapRequest::Unwatch { watch }).await,
            Ok(Ok(MapReply::Done))
        );
        assert_eq!(service.open_watches(), 1, "only node 1 ends its watch");
        assert_eq!(
            raw(&node, MapRequest::Unwatch { watch }).await,
            Ok(Ok(MapReply::Done))
        );
        assert_eq!(service.open_watches(), 0);
        assert!(matches!(
            raw(&node, poll()).await,
            Ok(Err(MapError::WatchEnded(_)))
        ));
    });
}

#[test]
fn a_node_reserves_ids_only_for_itself_and_a_bounded_block_at_a_time() {
    simulate(|sim| async move {
        let (_hosted, node, _service) =
            hosted_and_node(&sim, Arc::new(InProcessGlobalIdMap::new()));
        let remote = RemoteGlobalIdMap::new(node.messenger);
        match remote.reserve_range(NodeId(2), 10).await {
            Err(MapError::Refused(why)) => {
                assert!(
                    why.contains("node 1 asked for global ids for node 2"),
                    "{why}"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        match remote.reserve_range(NodeId(1), MAX_RESERVE_LEN + 1).await {
            Err(MapError::Refused(why)) => {
                assert!(why.contains(&format!("at most {MAX_RESERVE_LEN}")), "{why}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // Nothing was taken by the refused calls.
        let first = remote
            .reserve_range(NodeId(1), MAX_RESERVE_LEN)
            .await
            .unwrap();
        assert_eq!(
            first,
            ebb_core::FIRST_GLOBAL_ID..ebb_core::FIRST_GLOBAL_ID + MAX_RESERVE_LEN
        );
    });
}

/// An in-process map whose `watch` and `grant_lease` take 300 ms (a
/// store across a network), to lose the node while one runs.
struct Slow(InProcessGlobalIdMap);

impl GlobalIdMap for Slow {
    fn get<'a>(&'a self, key: &'a str) -> MapFuture<'a, Option<Vec<u8>>> {
        self.0.get(key)
    }
    fn set<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<Lease>) -> MapFuture<'a, ()> {
        self.0.set(key, value, lease)
    }
    fn delete<'a>(&'a self, key: &'a str) -> MapFuture<'a, bool> {
        self.0.delete(key)
    }
    fn compare_and_swap<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Vec<u8>>,
        new: Vec<u8>,
    ) -> MapFuture<'a, Swap> {
        self.0.compare_and_swap(key, expected, new)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>> {
        self.0.list(prefix)
    }
    fn reserve_range(&self, node: NodeId, len: u32) -> MapFuture<'_, std::ops::Range<u32>> {
        self.0.reserve_range(node, len)
    }
    fn grant_lease(&self, ttl: Duration) -> MapFuture<'_, Lease> {
        Box::pin(async move {
            sleep(Duration::from_millis(300)).await;
            self.0.grant_lease(ttl).await
        })
    }
    fn keep_alive(&self, lease: Lease) -> MapFuture<'_, ()> {
        self.0.keep_alive(lease)
    }
    fn revoke(&self, lease: Lease) -> MapFuture<'_, ()> {
        self.0.revoke(lease)
    }
    fn watch<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Watch> {
        Box::pin(async move {
            sleep(Duration::from_millis(300)).await;
            self.0.watch(prefix).await
        })
    }
}

#[test]
fn watches_are_bounded_per_node_and_none_is_left_behind() {
    simulate(|sim| async move {
        let (hosted, node, service) = hosted_and_node(&sim, Arc::new(InProcessGlobalIdMap::new()));
        let remote = RemoteGlobalIdMap::new(node.messenger)
            .with_call_timeout(Duration::from_millis(500))
            .with_poll_wait(Duration::from_millis(200));
        let mut open = Vec::new();
        for _ in 0..MAX_WATCHES_PER_NODE {
            open.push(remote.watch("").await.unwrap());
        }
        match remote.watch("").await {
            Err(MapError::Refused(why)) => {
                assert!(why.contains("watches open"), "{why}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(service.open_watches(), MAX_WATCHES_PER_NODE);
        open.truncate(1);
        sleep(Duration::from_millis(200)).await;
        assert_eq!(service.open_watches(), 1);
        // A poll that fails without the hosted node ending the watch
        // (no reply in time): dropping the watch still ends it there.
        let mut watch = open.pop().unwrap();
        hosted.side.vanished.set(true);
        assert_unreachable(watch.changed().await, "10.0.0.10:7100", "no reply within");
        hosted.side.vanished.set(false);
        drop(watch);
        sleep(Duration::from_secs(3)).await;
        assert_eq!(service.open_watches(), 0);
    });
}

#[test]
fn a_node_lost_while_its_watch_is_opened_keeps_no_watch() {
    simulate(|sim| async move {
        let (_hosted, node, service) =
            hosted_and_node(&sim, Arc::new(Slow(InProcessGlobalIdMap::new())));
        let remote = RemoteGlobalIdMap::new(node.messenger);
        let opening =
            ebb_event::spawn_task(async move { remote.watch("nodes/").await.map(|_| ()) });
        sleep(Duration::from_millis(100)).await;
        service.forget_node(NodeId(1));
        match opening.await.unwrap() {
            Err(MapError::WatchEnded(why)) => assert!(why.contains("was lost"), "{why}"),
            other => panic!("expected WatchEnded, got {other:?}"),
        }
        assert_eq!(service.open_watches(), 0);
    });
}

#[test]
fn a_forgotten_node_s_leases_are_revoked_and_their_entries_go() {
    simulate(|sim| async move {
        let backing = Arc::new(InProcessGlobalIdMap::new());
        let (_hosted, node, service) = hosted_and_node(&sim, backing.clone());
        let remote = RemoteGlobalIdMap::new(node.messenger);
        let kept = remote.grant_lease(Duration::from_secs(5)).await.unwrap();
        let revoked = remote.grant_lease(Duration::from_secs(5)).await.unwrap();
        remote
            .set("nodes/1", b"up".to_vec(), Some(kept))
            .await
            .unwrap();
        remote.revoke(revoked).await.unwrap();
        assert_eq!(service.leases_of(NodeId(1)), [kept]);
        service.forget_node(NodeId(1));
        assert_eq!(service.leases_of(NodeId(1)), []);
        assert_eq!(backing.get("nodes/1").await, Ok(None));
        assert_eq!(
            backing.keep_alive(kept).await,
            Err(MapError::LeaseExpired(kept))
        );
    });
}

#[test]
fn a_lease_granted_while_its_node_is_forgotten_is_revoked() {
    simulate(|sim| async move {
        let backing = InProcessGlobalIdMap::new();
        let (_hosted, node, service) = hosted_and_node(&sim, Arc::new(Slow(backing)));
        let remote = RemoteGlobalIdMap::new(node.messenger);
        let granting = ebb_event::spawn_task({
            let remote = remote.clone();
            async move { remote.grant_lease(Duration::from_secs(5)).await }
        });
        sleep(Duration::from_millis(100)).await;
        service.forget_node(NodeId(1));
        let Err(MapError::LeaseExpired(lease)) = granting.await.unwrap() else {
            panic!("expected LeaseExpired");
        };
        assert_eq!(service.leases_of(NodeId(1)), []);
        assert_eq!(
            remote.keep_alive(lease).await,
            Err(MapError::LeaseExpired(lease))
        );
    });
}

#[test]
fn replies_are_bounded_in_bytes_and_a_poll_loses_no_change() {
    simulate(|sim| async move {
        let backing = Arc::new(InProcessGlobalIdMap::new());
        let (_hosted, node, _service) = hosted_and_node(&sim, backing.clone());
        let remote =
            RemoteGlobalIdMap::new(node.messenger).with_poll_wait(Duration::from_millis(300));
        let refused = |result: Result<String, MapError>, says: &str| match result {
            Err(MapError::Refused(why)) => assert!(why.contains(says), "{why}"),
            other => panic!("expected a refusal saying {says:?}, got {other:?}"),
        };
        refused(
            remote
                .set("v", vec![1; MAX_VALUE_BYTES + 1], None)
                .await
                .map(|()| String::new()),
            &format!("more than the {MAX_VALUE_BYTES} a value may have"),
        );
        refused(
            remote
                .compare_and_swap("v", None, vec![1; MAX_VALUE_BYTES + 1])
                .await
                .map(|swap| format!("{swap:?}")),
            "a value may have",
        );
        // The hosted node itself may write more than a reply carries.
        let mut watch = remote.watch("w/").await.unwrap();
        backing
            .set("huge", vec![2; MAX_REPLY_BYTES], None)
            .await
            .unwrap();
        refused(
            remote.get("huge").await.map(|v| format!("{v:?}")),
            &format!("more than the {MAX_REPLY_BYTES} a reply may carry"),
        );
        refused(
            remote.list("").await.map(|v| format!("{}", v.len())),
            "list narrower prefixes",
        );
        assert_eq!(remote.list("w/").await, Ok(vec![]));
        // Five values of 400 KiB: a poll carries two, all five arrive in order.
        for n in 0..5u8 {
            remote
                .set(&format!("w/{n}"), vec![n; 400 << 10], None)
                .await
                .unwrap();
        }
        for n in 0..5u8 {
            let change = watch.changed().await.unwrap();
            assert_eq!(change.key, format!("w/{n}"));
            assert_eq!(change.value, Some(vec![n; 400 << 10]));
        }
    });
}

#[test]
fn a_write_sent_but_not_answered_may_have_been_applied() {
    simulate(|sim| async move {
        // Not sent (no address): nothing was written.
        let lonely = sim_node(&sim, 2);
        let remote = RemoteGlobalIdMap::new(lonely.messenger);
        assert_unreachable(
            remote.set("k", b"v".to_vec(), None).await,
            "address unknown",
            "no address is known",
        );

        let backing = Arc::new(InProcessGlobalIdMap::new());
        let (hosted, node, _service) = hosted_and_node(&sim, backing.clone());
        let remote =
            RemoteGlobalIdMap::new(node.messenger).with_call_timeout(Duration::from_secs(2));
        remote.set("k", b"1".to_vec(), None).await.unwrap();
        hosted.side.vanished.set(true);
        // Sent, never answered: a write's outcome is unknown ...
        match remote
            .compare_and_swap("k", Some(b"1".to_vec()), b"2".to_vec())
            .await
        {
            Err(error @ MapError::OutcomeUnknown { .. }) => {
                let MapError::OutcomeUnknown { endpoint, reason } = &error else {
                    unreachable!()
                };
                assert_eq!(endpoint, "the hosted node 0 (10.0.0.10:7100)");
                assert!(reason.contains("no reply within 2000 ms"), "{reason}");
                assert!(
                    error
                        .to_string()
                        .contains("may or may not have been applied"),
                    "{error}"
                );
            }
            other => panic!("expected OutcomeUnknown, got {other:?}"),
        }
        // ... (it may well have been: the request reached the hosted node
        // before its replies were lost or not) ...
        let now = backing.get("k").await.unwrap();
        assert!(now == Some(b"1".to_vec()) || now == Some(b"2".to_vec()));
        // ... while a read wrote nothing.
        assert_unreachable(
            remote.get("k").await,
            "10.0.0.10:7100",
            "no reply within 2000 ms",
        );
    });
}
