//! The in-process [`GlobalIdMap`]: the default for a single node, and for
//! nodes that share one address space.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::format;
use alloc::string::String;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::future::ready;
use core::ops::Range;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use spin::Mutex;

use super::{
    check_key, check_writable_key, Change, GlobalIdMap, Lease, MapError, MapFuture, Swap, Watch,
    WatchStream,
};
use crate::{NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};

/// A [`GlobalIdMap`] for nodes that share one address space. Every future
/// it returns is ready at once.
///
/// Leases have no clock here (the crate has none): a lease lives until
/// [`GlobalIdMap::revoke`] or [`InProcessGlobalIdMap::expire`], which
/// tests use to play a lease running out. One address space cannot lose
/// one of its own nodes without losing all of them, so a single node never
/// needs more.
///
/// A watch holds at most [`WATCH_QUEUE_LIMIT`] changes nobody has read:
/// one more ends it with [`MapError::WatchEnded`] ("fell behind", after the
/// ones it holds), so a watch nobody reads cannot grow without bound; its
/// holder watches again and lists to catch up, as after etcd compacts.
pub struct InProcessGlobalIdMap {
    state: Arc<Mutex<State>>,
}

struct State {
    values: BTreeMap<String, Entry>,
    next_global: u32,
    next_lease: i64,
    leases: BTreeSet<Lease>,
    watchers: Vec<Weak<Mutex<Watcher>>>,
}

struct Entry {
    value: Vec<u8>,
    lease: Option<Lease>,
}

/// The most changes an in-process watch holds unread before it ends.
pub const WATCH_QUEUE_LIMIT: usize = 4096;

struct Watcher {
    prefix: String,
    changes: VecDeque<Change>,
    /// Why it ended (it fell behind): said once its changes are read.
    ended: Option<MapError>,
    waker: Option<Waker>,
}

impl InProcessGlobalIdMap {
    /// An empty map whose global ids start at [`FIRST_GLOBAL_ID`].
    #[must_use]
    pub fn new() -> Self {
        InProcessGlobalIdMap {
            state: Arc::new(Mutex::new(State {
                values: BTreeMap::new(),
                next_global: FIRST_GLOBAL_ID,
                next_lease: 1,
                leases: BTreeSet::new(),
                watchers: Vec::new(),
            })),
        }
    }

    /// Plays `lease` running out: it ends and its entries are deleted (and
    /// watchers told), as when nobody kept it alive.
    ///
    /// # Errors
    ///
    /// [`MapError::LeaseExpired`]: it had ended already.
    pub fn expire(&self, lease: Lease) -> Result<(), MapError> {
        self.state.lock().end_lease(lease)
    }

    /// Reserves `len` global ids now (the map is in this process, so no
    /// waiting is needed).
    ///
    /// # Errors
    ///
    /// [`MapError::IdsExhausted`] when fewer than `len` are left (or `len`
    /// is 0).
    pub fn reserve_range_now(&self, len: u32) -> Result<Range<u32>, MapError> {
        let mut state = self.state.lock();
        let start = state.next_global;
        let left = MAX_EBB_IDS - start;
        if len == 0 || len > left {
            return Err(MapError::IdsExhausted { wanted: len, left });
        }
        state.next_global = start + len;
        Ok(start..start + len)
    }
}

impl Default for InProcessGlobalIdMap {
    fn default() -> Self {
        Self::new()
    }
}

impl State {
    /// Records a change and tells the watchers of its key.
    fn changed(&mut self, key: &str, value: Option<Vec<u8>>) {
        self.watchers.retain(|watcher| watcher.strong_count() > 0);
        for watcher in self.watchers.iter().filter_map(Weak::upgrade) {
            let mut watcher = watcher.lock();
            if watcher.ended.is_none() && key.starts_with(watcher.prefix.as_str()) {
                if watcher.changes.len() >= WATCH_QUEUE_LIMIT {
                    watcher.ended = Some(MapError::WatchEnded(format!(
                        "it fell behind: {WATCH_QUEUE_LIMIT} changes under {:?} were not read; \
                         watch again and list to catch up",
                        watcher.prefix
                    )));
                } else {
                    watcher.changes.push_back(Change {
                        key: String::from(key),
                        value: value.clone(),
                    });
                }
                if let Some(waker) = watcher.waker.take() {
                    waker.wake();
                }
            }
        }
    }

    fn put(&mut self, key: &str, value: Vec<u8>, lease: Option<Lease>) -> Result<(), MapError> {
        if let Some(lease) = lease {
            if !self.leases.contains(&lease) {
                return Err(MapError::LeaseExpired(lease));
            }
        }
        self.values.insert(
            String::from(key),
            Entry {
                value: value.clone(),
                lease,
            },
        );
        self.changed(key, Some(value));
        Ok(())
    }

    fn end_lease(&mut self, lease: Lease) -> Result<(), MapError> {
        if !self.leases.remove(&lease) {
            return Err(MapError::LeaseExpired(lease));
        }
        let gone: Vec<String> = self
            .values
            .iter()
            .filter(|(_, entry)| entry.lease == Some(lease))
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            self.values.remove(&key);
            self.changed(&key, None);
        }
        Ok(())
    }
}

/// A finished future.
fn done<'a, T: Send + 'a>(result: Result<T, MapError>) -> MapFuture<'a, T> {
    Box::pin(ready(result))
}

impl GlobalIdMap for InProcessGlobalIdMap {
    fn get<'a>(&'a self, key: &'a str) -> MapFuture<'a, Option<Vec<u8>>> {
        done(check_key(key, false).map(|()| {
            let state = self.state.lock();
            state.values.get(key).map(|entry| entry.value.clone())
        }))
    }

    fn set<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<Lease>) -> MapFuture<'a, ()> {
        done(check_writable_key(key).and_then(|()| self.state.lock().put(key, value, lease)))
    }

    fn delete<'a>(&'a self, key: &'a str) -> MapFuture<'a, bool> {
        done(check_writable_key(key).map(|()| {
            let mut state = self.state.lock();
            let was = state.values.remove(key).is_some();
            if was {
                state.changed(key, None);
            }
            was
        }))
    }

    fn compare_and_swap<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Vec<u8>>,
        new: Vec<u8>,
    ) -> MapFuture<'a, Swap> {
        done(check_writable_key(key).and_then(|()| {
            let mut state = self.state.lock();
            let found = state.values.get(key).map(|entry| entry.value.clone());
            if found != expected {
                return Ok(Swap::Conflict(found));
            }
            state.put(key, new, None)?;
            Ok(Swap::Done)
        }))
    }

    fn list<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>> {
        done(check_key(prefix, true).map(|()| {
            let state = self.state.lock();
            state
                .values
                .range::<str, _>((
                    core::ops::Bound::Included(prefix),
                    core::ops::Bound::Unbounded,
                ))
                .take_while(|(key, _)| key.starts_with(prefix))
                .map(|(key, entry)| (key.clone(), entry.value.clone()))
                .collect()
        }))
    }

    fn reserve_range(&self, _node: NodeId, len: u32) -> MapFuture<'_, Range<u32>> {
        done(self.reserve_range_now(len))
    }

    fn grant_lease(&self, _ttl: Duration) -> MapFuture<'_, Lease> {
        let mut state = self.state.lock();
        let lease = Lease(state.next_lease);
        state.next_lease += 1;
        state.leases.insert(lease);
        done(Ok(lease))
    }

    fn keep_alive(&self, lease: Lease) -> MapFuture<'_, ()> {
        let alive = self.state.lock().leases.contains(&lease);
        done(if alive {
            Ok(())
        } else {
            Err(MapError::LeaseExpired(lease))
        })
    }

    fn revoke(&self, lease: Lease) -> MapFuture<'_, ()> {
        done(self.state.lock().end_lease(lease))
    }

    fn watch<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Watch> {
        done(check_key(prefix, true).map(|()| {
            let watcher = Arc::new(Mutex::new(Watcher {
                prefix: String::from(prefix),
                changes: VecDeque::new(),
                ended: None,
                waker: None,
            }));
            self.state.lock().watchers.push(Arc::downgrade(&watcher));
            Watch::new(Box::new(InProcessWatch { watcher }))
        }))
    }
}

/// A watch on an [`InProcessGlobalIdMap`]: the map holds it weakly, so
/// dropping the watch ends it.
struct InProcessWatch {
    watcher: Arc<Mutex<Watcher>>,
}

impl WatchStream for InProcessWatch {
    fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Result<Change, MapError>> {
        let mut watcher = self.watcher.lock();
        match watcher.changes.pop_front() {
            Some(change) => Poll::Ready(Ok(change)),
            None if watcher.ended.is_some() => Poll::Ready(Err(watcher
                .ended
                .clone()
                .unwrap_or_else(|| MapError::WatchEnded(String::from("it fell behind"))))),
            None => {
                watcher.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use core::future::Future;
    use core::pin::pin;
    use core::task::Waker;

    /// Every future of this map is ready at once.
    fn now<T>(future: impl Future<Output = T>) -> T {
        let mut cx = Context::from_waker(Waker::noop());
        match pin!(future).poll(&mut cx) {
            Poll::Ready(value) => value,
            Poll::Pending => panic!("an in-process map future was pending"),
        }
    }

    #[test]
    fn values_are_stored_replaced_and_deleted() {
        let map = InProcessGlobalIdMap::new();
        assert_eq!(now(map.get("ebb/40001")), Ok(None));
        now(map.set("ebb/40001", b"node 3".to_vec(), None)).unwrap();
        now(map.set("ebb/40001", b"node 4".to_vec(), None)).unwrap();
        assert_eq!(now(map.get("ebb/40001")), Ok(Some(b"node 4".to_vec())));
        assert_eq!(now(map.delete("ebb/40001")), Ok(true));
        assert_eq!(now(map.delete("ebb/40001")), Ok(false));
        assert!(matches!(
            now(map.get("/ebb")),
            Err(MapError::InvalidKey { .. })
        ));
    }

    #[test]
    fn compare_and_swap_writes_only_over_the_expected_value() {
        let map = InProcessGlobalIdMap::new();
        assert_eq!(
            now(map.compare_and_swap("k", None, b"1".to_vec())),
            Ok(Swap::Done)
        );
        assert_eq!(
            now(map.compare_and_swap("k", None, b"2".to_vec())),
            Ok(Swap::Conflict(Some(b"1".to_vec())))
        );
        assert_eq!(
            now(map.compare_and_swap("k", Some(b"1".to_vec()), b"2".to_vec())),
            Ok(Swap::Done)
        );
        assert_eq!(now(map.get("k")), Ok(Some(b"2".to_vec())));
    }

    /// Only `reserve_range` moves the id counter: writes to the map's own
    /// keys are refused and change nothing.
    #[test]
    fn the_id_counter_cannot_be_written() {
        let map = InProcessGlobalIdMap::new();
        let first = map.reserve_range_now(10).unwrap();
        let refused = |result: Result<(), MapError>| match result {
            Err(MapError::InvalidKey { key, why }) => {
                assert_eq!(key, crate::NEXT_GLOBAL_ID);
                assert!(why.contains("only reserve_range"), "{why}");
            }
            other => panic!("a write to the counter gave {other:?}"),
        };
        refused(now(map.set(crate::NEXT_GLOBAL_ID, b"32768".to_vec(), None)));
        refused(now(map.delete(crate::NEXT_GLOBAL_ID)).map(drop));
        refused(now(map.compare_and_swap(crate::NEXT_GLOBAL_ID, None, b"1".to_vec())).map(drop));
        assert_eq!(now(map.get(crate::NEXT_GLOBAL_ID)), Ok(None));
        assert_eq!(map.reserve_range_now(10), Ok(first.end..first.end + 10));
    }

    #[test]
    fn list_gives_the_prefix_in_key_order() {
        let map = InProcessGlobalIdMap::new();
        for key in ["nodes/2", "nodes/1", "nodesx", "ebb/1"] {
            now(map.set(key, key.as_bytes().to_vec(), None)).unwrap();
        }
        let keys: Vec<String> = now(map.list("nodes/"))
            .unwrap()
            .into_iter()
            .map(|(key, _)| key)
            .collect();
        assert_eq!(keys, ["nodes/1", "nodes/2"]);
    }

    #[test]
    fn ranges_never_overlap_and_run_out() {
        let map = InProcessGlobalIdMap::new();
        let a = now(map.reserve_range(NodeId(1), 10)).unwrap();
        let b = now(map.reserve_range(NodeId(2), 10)).unwrap();
        assert_eq!(a, FIRST_GLOBAL_ID..FIRST_GLOBAL_ID + 10);
        assert_eq!(b.start, a.end);
        assert_eq!(
            now(map.reserve_range(NodeId(1), MAX_EBB_IDS)),
            Err(MapError::IdsExhausted {
                wanted: MAX_EBB_IDS,
                left: MAX_EBB_IDS - b.end
            })
        );
        assert!(matches!(
            now(map.reserve_range(NodeId(1), 0)),
            Err(MapError::IdsExhausted { wanted: 0, .. })
        ));
    }

    #[test]
    fn an_expired_lease_takes_its_entries_and_watchers_hear_of_it() {
        let map = InProcessGlobalIdMap::new();
        let mut watch = now(map.watch("nodes/")).unwrap();
        let lease = now(map.grant_lease(Duration::from_secs(5))).unwrap();
        now(map.set("nodes/1", b"here".to_vec(), Some(lease))).unwrap();
        now(map.set("other", b"x".to_vec(), Some(lease))).unwrap();
        assert_eq!(now(map.keep_alive(lease)), Ok(()));
        map.expire(lease).unwrap();
        assert_eq!(now(map.get("nodes/1")), Ok(None));
        assert_eq!(
            now(map.keep_alive(lease)),
            Err(MapError::LeaseExpired(lease))
        );
        assert_eq!(
            now(map.set("nodes/1", b"again".to_vec(), Some(lease))),
            Err(MapError::LeaseExpired(lease))
        );
        assert_eq!(
            now(watch.changed()),
            Ok(Change {
                key: "nodes/1".into(),
                value: Some(b"here".to_vec())
            })
        );
        assert_eq!(
            now(watch.changed()),
            Ok(Change {
                key: "nodes/1".into(),
                value: None
            })
        );
        let mut cx = Context::from_waker(Waker::noop());
        assert!(watch.poll_change(&mut cx).is_pending());
    }

    #[test]
    fn a_watch_nobody_reads_ends_when_its_queue_is_full() {
        let map = InProcessGlobalIdMap::new();
        let mut watch = now(map.watch("k/")).unwrap();
        for n in 0..=WATCH_QUEUE_LIMIT {
            now(map.set(&format!("k/{n}"), vec![1], None)).unwrap();
        }
        for n in 0..WATCH_QUEUE_LIMIT {
            assert_eq!(now(watch.changed()).unwrap().key, format!("k/{n}"));
        }
        let fell_behind = now(watch.changed());
        assert!(
            matches!(&fell_behind, Err(MapError::WatchEnded(why)) if why.contains("fell behind")),
            "{fell_behind:?}"
        );
        // Later changes do not revive it; it keeps saying why it ended.
        now(map.set("k/later", vec![1], None)).unwrap();
        assert_eq!(now(watch.changed()), fell_behind);
    }
}
