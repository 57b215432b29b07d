//! A view of a shared in-process `GlobalIdMap` that a test can turn
//! against its user: its keep-alives fail (the map unreachable); its
//! reads of the shard map are held at one value, so a node keeps the map
//! it has while the others move on (its reconcile finds a map it cannot
//! replace and adopts nothing); or its next compare-and-swap loses a race
//! (another node writes the same value just before).

// Each test binary uses part of it.
#![allow(dead_code)]

use std::future::Future;
use std::ops::Range;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ebb_core::{
    GlobalIdMap, InProcessGlobalIdMap, Lease, MapError, MapFuture, NodeId, Swap, Watch,
};
use memcached::cluster::SHARD_MAP_KEY;

/// The in-process map's futures are ready at once: polls one once.
pub fn ready<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the in-process map's future was not ready"),
    }
}

/// One user's handle on the shared map.
pub struct TestMap {
    /// The map every node shares.
    pub inner: Arc<InProcessGlobalIdMap>,
    /// While set, keep-alives fail as unreachable.
    pub keep_alive_fails: AtomicBool,
    /// When set, the next compare-and-swap finds that another node has
    /// just written what it was about to write (that node won the race).
    pub lose_next_race: AtomicBool,
    /// While set, the shard map reads as this.
    held: Mutex<Option<Vec<u8>>>,
}

impl TestMap {
    pub fn new(inner: Arc<InProcessGlobalIdMap>) -> TestMap {
        TestMap {
            inner,
            keep_alive_fails: AtomicBool::new(false),
            lose_next_race: AtomicBool::new(false),
            held: Mutex::new(None),
        }
    }

    /// From now on the shard map reads as it is now.
    pub fn hold_shard_map(&self) {
        let now = ready(self.inner.get(SHARD_MAP_KEY)).unwrap();
        *self.held.lock().unwrap() = Some(now.expect("a shard map is stored"));
    }

    /// The shard map reads as stored again.
    pub fn release_shard_map(&self) {
        *self.held.lock().unwrap() = None;
    }

    fn held(&self) -> Option<Vec<u8>> {
        self.held.lock().unwrap().clone()
    }
}

impl GlobalIdMap for TestMap {
    fn get<'a>(&'a self, key: &'a str) -> MapFuture<'a, Option<Vec<u8>>> {
        match self.held() {
            Some(held) if key == SHARD_MAP_KEY => Box::pin(std::future::ready(Ok(Some(held)))),
            _ => self.inner.get(key),
        }
    }
    fn set<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<Lease>) -> MapFuture<'a, ()> {
        self.inner.set(key, value, lease)
    }
    fn delete<'a>(&'a self, key: &'a str) -> MapFuture<'a, bool> {
        self.inner.delete(key)
    }
    fn compare_and_swap<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Vec<u8>>,
        new: Vec<u8>,
    ) -> MapFuture<'a, Swap> {
        match self.held() {
            // Whatever is stored, it is not what the node expects to
            // replace: it loses every race.
            Some(held) if key == SHARD_MAP_KEY => {
                Box::pin(std::future::ready(Ok(Swap::Conflict(Some(held)))))
            }
            _ => {
                if self.lose_next_race.swap(false, Ordering::SeqCst) {
                    ready(
                        self.inner
                            .compare_and_swap(key, expected.clone(), new.clone()),
                    )
                    .unwrap();
                }
                self.inner.compare_and_swap(key, expected, new)
            }
        }
    }
    fn list<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>> {
        self.inner.list(prefix)
    }
    fn reserve_range(&self, node: NodeId, len: u32) -> MapFuture<'_, Range<u32>> {
        self.inner.reserve_range(node, len)
    }
    fn grant_lease(&self, ttl: Duration) -> MapFuture<'_, Lease> {
        self.inner.grant_lease(ttl)
    }
    fn keep_alive(&self, lease: Lease) -> MapFuture<'_, ()> {
        if self.keep_alive_fails.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(MapError::Unreachable {
                endpoint: String::from("the test's map"),
                reason: String::from("cut off by the test"),
            })));
        }
        self.inner.keep_alive(lease)
    }
    fn revoke(&self, lease: Lease) -> MapFuture<'_, ()> {
        self.inner.revoke(lease)
    }
    fn watch<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Watch> {
        self.inner.watch(prefix)
    }
}
