//! The hosted node's side: [`MapService`] answers the map protocol's
//! calls from the hosted node's own [`GlobalIdMap`] (in-process or etcd),
//! each as a deferred answer (the map is asynchronous), and keeps the
//! watches the nodes asked for until they poll them.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::future::Future;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use ebb_core::{check_writable_key, Change, EbbError, GlobalIdMap, Lease, MapError, NodeId, Watch};
use ebb_iobuf::{IoBuf, IoChain};
use spin::Mutex;

use super::messages::{encode_reply, MapReply, MapRequest};
use super::{
    MAP_EBB, MAP_MALFORMED, MAX_CHANGES_PER_POLL, MAX_POLL_WAIT, MAX_REPLY_BYTES, MAX_RESERVE_LEN,
    MAX_VALUE_BYTES, MAX_WATCHES_PER_NODE,
};
use crate::bound::within;
use crate::{Answer, Message, MessengerRef, Request, ServiceError};

/// Serves the map protocol ([`MAP_EBB`]) on a hosted node from `map`.
pub struct MapService {
    map: Arc<dyn GlobalIdMap>,
    watches: Mutex<Watches>,
}

/// What the service keeps for nodes: the watches they opened, by number,
/// and the leases they were granted.
#[derive(Default)]
struct Watches {
    next: u64,
    slots: BTreeMap<u64, Slot>,
    /// The leases granted to each node and not revoked through the
    /// service: revoked when the node is forgotten.
    leases: BTreeMap<NodeId, BTreeSet<Lease>>,
    /// How many times each node was forgotten: a call that began before
    /// [`MapService::forget_node`] ran keeps nothing for the node.
    losses: BTreeMap<NodeId, u64>,
}

impl Watches {
    fn losses(&self, node: NodeId) -> u64 {
        self.losses.get(&node).copied().unwrap_or(0)
    }

    fn count(&self, node: NodeId) -> usize {
        self.slots.values().filter(|slot| slot.node == node).count()
    }
}

struct Slot {
    /// The node that opened it (only it may poll or end it).
    node: NodeId,
    /// `None` while a poll holds it.
    watch: Option<Watch>,
    /// The error that ended it, found after changes that went out first.
    ended: Option<MapError>,
    /// A change taken from the watch that did not fit in the last poll's
    /// reply ([`MAX_REPLY_BYTES`]): the next poll's first.
    held: Option<Change>,
}

/// The bytes `change` takes in a [`super::NEXT_CHANGES`] reply: its key's
/// length and bytes, the option tag and the value's length and bytes.
fn change_bytes(change: &Change) -> usize {
    4 + change.key.len() + 1 + change.value.as_ref().map_or(0, |value| 4 + value.len())
}

/// `Refused` for a value larger than [`MAX_VALUE_BYTES`].
fn check_value(value: &[u8]) -> Result<(), MapError> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(MapError::Refused(format!(
            "a value of {} bytes is more than the {MAX_VALUE_BYTES} a value may have",
            value.len()
        )));
    }
    Ok(())
}

impl MapService {
    /// A service answering from `map`.
    #[must_use]
    pub fn new(map: Arc<dyn GlobalIdMap>) -> Arc<MapService> {
        Arc::new(MapService {
            map,
            watches: Mutex::new(Watches::default()),
        })
    }

    /// The map it serves.
    #[must_use]
    pub fn map(&self) -> &Arc<dyn GlobalIdMap> {
        &self.map
    }

    /// Makes every core of `messenger`'s node answer [`MAP_EBB`].
    ///
    /// # Errors
    ///
    /// The calling thread is not a core of that node.
    pub fn serve(self: &Arc<Self>, messenger: MessengerRef) -> Result<(), EbbError> {
        let service = Arc::clone(self);
        messenger.get()?.local().shared().register(
            MAP_EBB,
            Arc::new(move |request: Request| Arc::clone(&service).answer(request)),
        );
        Ok(())
    }

    /// Node `node` is gone: its watches end (nobody will poll them) and
    /// the leases it was granted are revoked, so the entries it kept alive
    /// go (the in-process map has no clock to expire them). Callable from
    /// any thread: each revoke is asked for at once and not awaited (the
    /// in-process map's is done then; the etcd map starts it when asked,
    /// and etcd expires the lease by its time to live anyway).
    pub fn forget_node(&self, node: NodeId) {
        let leases = {
            let mut watches = self.watches.lock();
            watches.slots.retain(|_, slot| slot.node != node);
            *watches.losses.entry(node).or_insert(0) += 1;
            watches.leases.remove(&node).unwrap_or_default()
        };
        let mut cx = Context::from_waker(Waker::noop());
        for lease in leases {
            // An already ended lease is what was wanted.
            let _ = self.map.revoke(lease).as_mut().poll(&mut cx);
        }
    }

    /// The leases granted to `node` through the service and not revoked
    /// (for tests).
    #[must_use]
    pub fn leases_of(&self, node: NodeId) -> Vec<Lease> {
        self.watches
            .lock()
            .leases
            .get(&node)
            .map(|leases| leases.iter().copied().collect())
            .unwrap_or_default()
    }

    /// How many watches are open (for tests).
    #[must_use]
    pub fn open_watches(&self) -> usize {
        self.watches.lock().slots.len()
    }

    /// Answers one call: at once when the map's future is ready at once
    /// (the in-process map), else when it ends.
    fn answer(self: Arc<Self>, request: Request) -> Answer {
        let Ok(operation) = MapRequest::decode(request.message, &request.body.payload.to_vec())
        else {
            return Answer::Now(Err(ServiceError::Refused(MAP_MALFORMED)));
        };
        let from = request.from;
        let number = request.message;
        let mut reply = Box::pin(async move {
            let result = self.run(from, operation).await;
            let mut reply = encode_reply(&result);
            // A node receives a reply whole: one it cannot hold (a list of
            // many entries, a large value the hosted node wrote) is refused.
            if reply.len() > MAX_REPLY_BYTES {
                reply = encode_reply(&Err(MapError::Refused(format!(
                    "the reply to map operation {} is {} bytes, more than the {MAX_REPLY_BYTES} \
                     a reply may carry (a list: list narrower prefixes)",
                    number.0,
                    reply.len()
                ))));
            }
            Ok(Message::payload(IoChain::from(IoBuf::from_vec(reply))))
        });
        match reply.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(result) => Answer::Now(result),
            Poll::Pending => Answer::Later(reply),
        }
    }

    async fn run(&self, from: NodeId, operation: MapRequest) -> Result<MapReply, MapError> {
        let map = &self.map;
        match operation {
            MapRequest::Get { key } => map.get(&key).await.map(MapReply::Value),
            // A node never writes the map's own keys (the id counter),
            // whatever map the service serves: only reserve_range moves it.
            MapRequest::Set { key, value, lease } => {
                check_writable_key(&key)?;
                check_value(&value)?;
                map.set(&key, value, lease).await.map(|()| MapReply::Done)
            }
            MapRequest::Delete { key } => {
                check_writable_key(&key)?;
                map.delete(&key).await.map(MapReply::Deleted)
            }
            MapRequest::CompareAndSwap { key, expected, new } => {
                check_writable_key(&key)?;
                check_value(&new)?;
                map.compare_and_swap(&key, expected, new)
                    .await
                    .map(MapReply::Swap)
            }
            MapRequest::List { prefix } => map.list(&prefix).await.map(MapReply::Entries),
            MapRequest::ReserveRange { node, len } => {
                // A node reserves for itself only, and a bounded block at a
                // time: otherwise one node could use up every global id.
                if node != from {
                    return Err(MapError::Refused(format!(
                        "node {from} asked for global ids for node {node}: a node reserves \
                         ids for itself only"
                    )));
                }
                if len > MAX_RESERVE_LEN {
                    return Err(MapError::Refused(format!(
                        "node {from} asked for {len} global ids at once; at most \
                         {MAX_RESERVE_LEN} are given per reservation"
                    )));
                }
                map.reserve_range(node, len).await.map(MapReply::Range)
            }
            MapRequest::GrantLease { ttl_ms } => {
                let losses = self.watches.lock().losses(from);
                let lease = map.grant_lease(Duration::from_millis(ttl_ms)).await?;
                let mut watches = self.watches.lock();
                if watches.losses(from) != losses {
                    drop(watches);
                    // Forgotten meanwhile: nobody will keep it alive.
                    let _ = map.revoke(lease).await;
                    return Err(MapError::LeaseExpired(lease));
                }
                watches.leases.entry(from).or_default().insert(lease);
                Ok(MapReply::Lease(lease))
            }
            MapRequest::KeepAlive(lease) => map.keep_alive(lease).await.map(|()| MapReply::Done),
            MapRequest::Revoke(lease) => {
                let result = map.revoke(lease).await.map(|()| MapReply::Done);
                if let Some(leases) = self.watches.lock().leases.get_mut(&from) {
                    leases.remove(&lease);
                }
                result
            }
            MapRequest::Watch { prefix } => {
                let too_many = || {
                    MapError::Refused(format!(
                        "node {from} has {MAX_WATCHES_PER_NODE} watches open on the hosted \
                         node, the most it may: end one first"
                    ))
                };
                let losses = {
                    let watches = self.watches.lock();
                    if watches.count(from) >= MAX_WATCHES_PER_NODE {
                        return Err(too_many());
                    }
                    watches.losses(from)
                };
                let watch = map.watch(&prefix).await?;
                let mut watches = self.watches.lock();
                if watches.losses(from) != losses {
                    return Err(MapError::WatchEnded(format!(
                        "node {from} was lost while its watch was being opened"
                    )));
                }
                if watches.count(from) >= MAX_WATCHES_PER_NODE {
                    return Err(too_many());
                }
                watches.next += 1;
                let number = watches.next;
                watches.slots.insert(
                    number,
                    Slot {
                        node: from,
                        watch: Some(watch),
                        ended: None,
                        held: None,
                    },
                );
                Ok(MapReply::Watching(number))
            }
            MapRequest::NextChanges { watch, wait_ms } => {
                let wait = Duration::from_millis(u64::from(wait_ms)).min(MAX_POLL_WAIT);
                self.poll(from, watch, wait).await.map(MapReply::Changes)
            }
            MapRequest::Unwatch { watch } => {
                let mut watches = self.watches.lock();
                if watches
                    .slots
                    .get(&watch)
                    .is_some_and(|slot| slot.node == from)
                {
                    watches.slots.remove(&watch);
                }
                Ok(MapReply::Done)
            }
        }
    }

    /// The changes of watch `number` since its last poll: waits up to
    /// `wait` for the first, then takes those already there, as many as
    /// fit in [`MAX_REPLY_BYTES`] (the one that does not fit is held for
    /// the next poll).
    async fn poll(
        &self,
        from: NodeId,
        number: u64,
        wait: Duration,
    ) -> Result<Vec<Change>, MapError> {
        let (mut watch, held) = {
            let mut watches = self.watches.lock();
            let Some(slot) = watches
                .slots
                .get_mut(&number)
                .filter(|slot| slot.node == from)
            else {
                return Err(MapError::WatchEnded(format!(
                    "node {from} has no watch {number} on the hosted node (ended, or the hosted \
                     node started again): watch again and list to catch up"
                )));
            };
            if let Some(error) = slot.ended.take() {
                watches.slots.remove(&number);
                return Err(error);
            }
            let watch = slot.watch.take().ok_or_else(|| {
                MapError::Refused(format!("watch {number} is being polled already"))
            })?;
            (watch, slot.held.take())
        };
        let mut changes = Vec::new();
        let mut ended = None;
        let mut held_back = None;
        {
            let first = match held {
                Some(change) => Some(Ok(change)),
                None => within(wait, watch.changed()).await,
            };
            match first {
                None => {}
                Some(Err(error)) => ended = Some(error),
                Some(Ok(change)) => {
                    // The count, then each change.
                    let mut bytes = 4 + change_bytes(&change);
                    changes.push(change);
                    let mut cx = Context::from_waker(Waker::noop());
                    while changes.len() < MAX_CHANGES_PER_POLL {
                        match watch.poll_change(&mut cx) {
                            Poll::Ready(Ok(change)) => {
                                bytes += change_bytes(&change);
                                if bytes > MAX_REPLY_BYTES {
                                    held_back = Some(change);
                                    break;
                                }
                                changes.push(change);
                            }
                            Poll::Ready(Err(error)) => {
                                ended = Some(error);
                                break;
                            }
                            Poll::Pending => break,
                        }
                    }
                }
            }
        }
        let mut watches = self.watches.lock();
        // Gone: the node ended it (or was lost) while this poll waited.
        let Some(slot) = watches.slots.get_mut(&number) else {
            return Ok(changes);
        };
        match ended {
            Some(error) if changes.is_empty() => {
                watches.slots.remove(&number);
                Err(error)
            }
            ended => {
                slot.watch = Some(watch);
                slot.ended = ended;
                slot.held = held_back;
                Ok(changes)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::pin::pin;

    use ebb_core::{MapFuture, Swap, NEXT_GLOBAL_ID};

    /// A map that would write whatever it is asked to: the service alone
    /// must keep nodes off the map's own keys.
    struct Permissive(ebb_core::InProcessGlobalIdMap);

    fn written<'a, T: Send + 'a>() -> MapFuture<'a, T> {
        panic!("the service passed a write of the map's own key to the map")
    }

    // By path, not imported: calls on it are GlobalIdMap's.
    impl ebb_core::MapInFront for Permissive {
        fn inner(&self) -> &dyn GlobalIdMap {
            &self.0
        }
        fn set<'a>(&'a self, _: &'a str, _: Vec<u8>, _: Option<Lease>) -> MapFuture<'a, ()> {
            written()
        }
        fn delete<'a>(&'a self, _: &'a str) -> MapFuture<'a, bool> {
            written()
        }
        fn compare_and_swap<'a>(
            &'a self,
            _: &'a str,
            _: Option<Vec<u8>>,
            _: Vec<u8>,
        ) -> MapFuture<'a, Swap> {
            written()
        }
    }

    #[test]
    fn a_node_cannot_write_the_id_counter_whatever_the_map() {
        let service = MapService::new(Arc::new(Permissive(ebb_core::InProcessGlobalIdMap::new())));
        for request in [
            MapRequest::Set {
                key: NEXT_GLOBAL_ID.into(),
                value: b"40000".to_vec(),
                lease: None,
            },
            MapRequest::Delete {
                key: NEXT_GLOBAL_ID.into(),
            },
            MapRequest::CompareAndSwap {
                key: "ids/other".into(),
                expected: None,
                new: b"1".to_vec(),
            },
        ] {
            let answer =
                pin!(service.run(NodeId(1), request)).poll(&mut Context::from_waker(Waker::noop()));
            match answer {
                Poll::Ready(Err(MapError::InvalidKey { why, .. })) => {
                    assert!(why.contains("only reserve_range"), "{why}");
                }
                other => panic!("a write of the counter gave {other:?}"),
            }
        }
    }
}
