//! What the tests of the global id map over the Messenger share: a
//! script of every map operation, good and bad, to run on a remote map
//! and on an in-process one, and the check of an `Unreachable`.

#![allow(dead_code)]

use std::time::Duration;

use ebb_core::{GlobalIdMap, InProcessGlobalIdMap, Lease, MapError, NodeId};

/// Every operation, good and bad, in an order whose results depend on
/// the ones before: each result as text, in order.
pub async fn every_operation(map: &dyn GlobalIdMap) -> Vec<String> {
    let mut said = Vec::new();
    let mut say = |what: &str, result: String| said.push(format!("{what}: {result}"));
    say("get absent", format!("{:?}", map.get("ebb/40001").await));
    say(
        "set",
        format!("{:?}", map.set("ebb/40001", b"node 3".to_vec(), None).await),
    );
    say("get", format!("{:?}", map.get("ebb/40001").await));
    say(
        "set invalid",
        format!("{:?}", map.set("/abs", b"x".to_vec(), None).await),
    );
    say("get invalid", format!("{:?}", map.get("a//b").await));
    say("delete", format!("{:?}", map.delete("ebb/40001").await));
    say(
        "delete again",
        format!("{:?}", map.delete("ebb/40001").await),
    );
    say(
        "swap in",
        format!("{:?}", map.compare_and_swap("k", None, b"1".to_vec()).await),
    );
    say(
        "swap conflict",
        format!("{:?}", map.compare_and_swap("k", None, b"2".to_vec()).await),
    );
    say(
        "swap over",
        format!(
            "{:?}",
            map.compare_and_swap("k", Some(b"1".to_vec()), vec![0, 255])
                .await
        ),
    );
    for key in ["nodes/2", "nodes/1", "nodesx", "ebb/1"] {
        let _ = map.set(key, key.as_bytes().to_vec(), None).await;
    }
    say("list", format!("{:?}", map.list("nodes/").await));
    say("list all", format!("{:?}", map.list("").await));
    say("list invalid", format!("{:?}", map.list("a b").await));
    say(
        "reserve",
        format!("{:?}", map.reserve_range(NodeId(1), 64).await),
    );
    say(
        "reserve again",
        format!("{:?}", map.reserve_range(NodeId(1), 10).await),
    );
    say(
        "reserve none",
        format!("{:?}", map.reserve_range(NodeId(1), 0).await),
    );
    // (More ids than are left: the service refuses a block that large
    // before the map sees it; `sim_global_map` checks that.)
    let lease = map.grant_lease(Duration::from_secs(5)).await;
    say("grant", format!("{lease:?}"));
    let lease = lease.unwrap_or(Lease(-1));
    say(
        "set leased",
        format!("{:?}", map.set("nodes/3", b"3".to_vec(), Some(lease)).await),
    );
    say("keep alive", format!("{:?}", map.keep_alive(lease).await));
    say("revoke", format!("{:?}", map.revoke(lease).await));
    say("get leased", format!("{:?}", map.get("nodes/3").await));
    say(
        "keep alive ended",
        format!("{:?}", map.keep_alive(lease).await),
    );
    say("revoke ended", format!("{:?}", map.revoke(lease).await));
    say(
        "set ended lease",
        format!("{:?}", map.set("nodes/3", b"3".to_vec(), Some(lease)).await),
    );
    say(
        "watch invalid",
        format!("{:?}", map.watch("../x").await.map(|_| ())),
    );
    let big = vec![7u8; 300_000];
    say(
        "set big",
        format!("{:?}", map.set("big", big.clone(), None).await),
    );
    say(
        "get big",
        format!("{:?}", map.get("big").await.map(|v| v == Some(big))),
    );
    said
}

/// Runs [`every_operation`] on `map` and on a fresh in-process map:
/// every line must be the same; some are checked for what they are.
pub async fn same_as_in_process(map: &dyn GlobalIdMap) {
    let expected = every_operation(&InProcessGlobalIdMap::new()).await;
    let got = every_operation(map).await;
    assert_eq!(got.len(), expected.len());
    for (got, expected) in got.iter().zip(&expected) {
        assert_eq!(got, expected);
    }
    // Which results those were, for the record.
    let line = |what: &str| {
        expected
            .iter()
            .find(|line| line.starts_with(&format!("{what}: ")))
            .unwrap()
            .clone()
    };
    assert_eq!(
        line("swap conflict"),
        "swap conflict: Ok(Conflict(Some([49])))"
    );
    assert!(line("set invalid").contains("InvalidKey"));
    assert!(line("reserve none").contains("IdsExhausted { wanted: 0"));
    assert_eq!(
        line("keep alive ended"),
        "keep alive ended: Err(LeaseExpired(Lease(1)))"
    );
    assert_eq!(line("get big"), "get big: Ok(true)");
}

/// `Unreachable`, naming the hosted node 0 at `address`.
pub fn assert_unreachable<T: std::fmt::Debug>(
    result: Result<T, MapError>,
    address: &str,
    reason: &str,
) {
    match result {
        Err(MapError::Unreachable {
            endpoint,
            reason: said,
        }) => {
            assert_eq!(endpoint, format!("the hosted node 0 ({address})"));
            assert!(said.contains(reason), "{said:?} does not say {reason:?}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}
