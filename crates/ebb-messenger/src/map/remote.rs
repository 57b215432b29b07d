//! A node's side: [`RemoteGlobalIdMap`] ships every [`GlobalIdMap`]
//! operation over the Messenger to the hosted node's [`super::MapService`]
//! (there is no etcd client in a native node, as in EbbRT), each call
//! bounded in time; [`RemoteWatch`] long-polls a watch there.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::ops::Range;
use core::task::{Context, Poll};
use core::time::Duration;

use ebb_core::{Change, GlobalIdMap, Lease, MapError, MapFuture, NodeId, Swap, Watch, WatchStream};
use ebb_iobuf::{IoBuf, IoChain};

use super::messages::{decode_reply, MapReply, MapRequest};
use super::{MAP_EBB, MAP_MALFORMED};
use crate::bound::within;
use crate::{Message, MessengerError, MessengerRef, FRONTEND_NODE};

/// How long a call may wait for its reply by default.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the hosted node holds a watch's poll by default.
pub const DEFAULT_POLL_WAIT: Duration = Duration::from_secs(20);

/// The hosted node's [`GlobalIdMap`], reached over this node's Messenger.
/// Cheap to clone.
#[derive(Clone)]
pub struct RemoteGlobalIdMap {
    messenger: MessengerRef,
    hosted: NodeId,
    call_timeout: Duration,
    poll_wait: Duration,
}

impl RemoteGlobalIdMap {
    /// The map of the hosted node 0 (the frontend), through `messenger`.
    #[must_use]
    pub fn new(messenger: MessengerRef) -> RemoteGlobalIdMap {
        RemoteGlobalIdMap {
            messenger,
            hosted: FRONTEND_NODE,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            poll_wait: DEFAULT_POLL_WAIT,
        }
    }

    /// The map served by node `hosted` instead (tests).
    #[must_use]
    pub fn on_node(mut self, hosted: NodeId) -> Self {
        self.hosted = hosted;
        self
    }

    /// Calls wait at most `limit` for their reply (a watch's poll: its
    /// poll wait and `limit`).
    #[must_use]
    pub fn with_call_timeout(mut self, limit: Duration) -> Self {
        self.call_timeout = limit;
        self
    }

    /// The hosted node holds a watch's poll up to `wait` (at most
    /// [`super::MAX_POLL_WAIT`]) before it answers with no changes.
    #[must_use]
    pub fn with_poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait.min(super::MAX_POLL_WAIT);
        self
    }

    /// Sends `request`; its reply or the error.
    fn call(&self, request: MapRequest) -> MapFuture<'static, MapReply> {
        let limit = match request {
            MapRequest::NextChanges { .. } => self.poll_wait + self.call_timeout,
            _ => self.call_timeout,
        };
        call(self.messenger, self.hosted, request, limit)
    }
}

/// Sends `request` to node `hosted`'s map service and decodes the reply.
fn call(
    messenger: MessengerRef,
    hosted: NodeId,
    request: MapRequest,
    limit: Duration,
) -> MapFuture<'static, MapReply> {
    Box::pin(async move {
        let number = request.number();
        let writes = writes(&request);
        let body = Message::payload(IoChain::from(IoBuf::from_vec(request.encode())));
        let sent = match messenger.get() {
            Ok(rep) => Ok(rep.call_with(hosted, None, MAP_EBB, number, body)),
            Err(error) => Err(error.to_string()),
        };
        let call = sent.map_err(|why| unreachable(messenger, hosted, why))?;
        let reply = within(limit, call).await.ok_or_else(|| {
            unanswered(
                messenger,
                hosted,
                writes,
                format!("no reply within {} ms", limit.as_millis()),
            )
        })?;
        let reply = reply.map_err(|error| from_messenger(messenger, hosted, writes, &error))?;
        decode_reply(number, &reply.payload.to_vec()).map_err(|error| {
            MapError::Refused(format!(
                "the reply of the hosted node {hosted} to map operation {} does not decode: \
                 {error}",
                number.0
            ))
        })?
    })
}

/// `the hosted node 0 (10.96.0.1:7000)`: who was asked.
fn endpoint(messenger: MessengerRef, hosted: NodeId) -> String {
    let address = messenger
        .get()
        .ok()
        .and_then(|rep| rep.directory().address(hosted));
    match address {
        Some(address) => format!("the hosted node {hosted} ({address})"),
        None => format!("the hosted node {hosted} (address unknown)"),
    }
}

fn unreachable(messenger: MessengerRef, hosted: NodeId, reason: String) -> MapError {
    MapError::Unreachable {
        endpoint: endpoint(messenger, hosted),
        reason,
    }
}

/// Whether `request` may change the hosted node's map (or what the
/// service keeps for this node): only `get`, `list` and a watch's poll do
/// not.
fn writes(request: &MapRequest) -> bool {
    !matches!(
        request,
        MapRequest::Get { .. } | MapRequest::List { .. } | MapRequest::NextChanges { .. }
    )
}

/// A call that was sent but not answered: an operation that writes may
/// have been applied ([`MapError::OutcomeUnknown`]); one that only reads
/// wrote nothing ([`MapError::Unreachable`]).
fn unanswered(messenger: MessengerRef, hosted: NodeId, writes: bool, reason: String) -> MapError {
    if writes {
        MapError::OutcomeUnknown {
            endpoint: endpoint(messenger, hosted),
            reason,
        }
    } else {
        unreachable(messenger, hosted, reason)
    }
}

/// A failed call as the map's error: the hosted node could not be asked
/// is `Unreachable`; its answer did not come back (the connection or the
/// node lost after the call went out) is [`unanswered`]; anything else is
/// a refusal.
fn from_messenger(
    messenger: MessengerRef,
    hosted: NodeId,
    writes: bool,
    error: &MessengerError,
) -> MapError {
    match error {
        MessengerError::Unreachable { .. } => unreachable(messenger, hosted, error.to_string()),
        MessengerError::ConnectionLost | MessengerError::NodeLost { .. } => {
            unanswered(messenger, hosted, writes, error.to_string())
        }
        MessengerError::UnknownEbb { .. } => MapError::Refused(format!(
            "the hosted node {hosted} does not serve the global id map ({error})"
        )),
        MessengerError::Refused { code, .. } if *code == MAP_MALFORMED => MapError::Refused(
            format!("the hosted node {hosted} could not decode the request ({error})"),
        ),
        _ => MapError::Refused(error.to_string()),
    }
}

/// The reply of another operation: the service broke the protocol.
fn unexpected(reply: &MapReply) -> MapError {
    MapError::Refused(format!("the hosted node answered with {reply:?}"))
}

impl GlobalIdMap for RemoteGlobalIdMap {
    fn get<'a>(&'a self, key: &'a str) -> MapFuture<'a, Option<Vec<u8>>> {
        expect(
            self.call(MapRequest::Get { key: key.into() }),
            |reply| match reply {
                MapReply::Value(value) => Ok(value),
                other => Err(other),
            },
        )
    }

    fn set<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<Lease>) -> MapFuture<'a, ()> {
        done(self.call(MapRequest::Set {
            key: key.into(),
            value,
            lease,
        }))
    }

    fn delete<'a>(&'a self, key: &'a str) -> MapFuture<'a, bool> {
        expect(
            self.call(MapRequest::Delete { key: key.into() }),
            |reply| match reply {
                MapReply::Deleted(value) => Ok(value),
                other => Err(other),
            },
        )
    }

    fn compare_and_swap<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Vec<u8>>,
        new: Vec<u8>,
    ) -> MapFuture<'a, Swap> {
        expect(
            self.call(MapRequest::CompareAndSwap {
                key: key.into(),
                expected,
                new,
            }),
            |reply| match reply {
                MapReply::Swap(value) => Ok(value),
                other => Err(other),
            },
        )
    }

    fn list<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>> {
        expect(
            self.call(MapRequest::List {
                prefix: prefix.into(),
            }),
            |reply| match reply {
                MapReply::Entries(value) => Ok(value),
                other => Err(other),
            },
        )
    }

    fn reserve_range(&self, node: NodeId, len: u32) -> MapFuture<'_, Range<u32>> {
        expect(
            self.call(MapRequest::ReserveRange { node, len }),
            |reply| match reply {
                MapReply::Range(value) => Ok(value),
                other => Err(other),
            },
        )
    }

    fn grant_lease(&self, ttl: Duration) -> MapFuture<'_, Lease> {
        expect(
            self.call(MapRequest::grant_lease(ttl)),
            |reply| match reply {
                MapReply::Lease(value) => Ok(value),
                other => Err(other),
            },
        )
    }

    fn keep_alive(&self, lease: Lease) -> MapFuture<'_, ()> {
        done(self.call(MapRequest::KeepAlive(lease)))
    }

    fn revoke(&self, lease: Lease) -> MapFuture<'_, ()> {
        done(self.call(MapRequest::Revoke(lease)))
    }

    fn watch<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Watch> {
        let reply = self.call(MapRequest::Watch {
            prefix: prefix.into(),
        });
        let map = self.clone();
        Box::pin(async move {
            match reply.await? {
                MapReply::Watching(number) => Ok(Watch::new(Box::new(RemoteWatch {
                    map,
                    number,
                    ready: VecDeque::new(),
                    polling: None,
                    ended: None,
                }))),
                other => Err(unexpected(&other)),
            }
        })
    }
}

/// The value `pick` takes from the reply, which must be the operation's
/// (else the service broke the protocol).
fn expect<'a, T: Send + 'a>(
    reply: MapFuture<'static, MapReply>,
    pick: fn(MapReply) -> Result<T, MapReply>,
) -> MapFuture<'a, T> {
    Box::pin(async move { pick(reply.await?).map_err(|other| unexpected(&other)) })
}

/// An operation whose success carries nothing.
fn done<'a>(reply: MapFuture<'static, MapReply>) -> MapFuture<'a, ()> {
    expect(reply, |reply| match reply {
        MapReply::Done => Ok(()),
        other => Err(other),
    })
}

/// A watch on the hosted node's map, read by long polls: one
/// [`super::NEXT_CHANGES`] call at a time, which the hosted node answers
/// once it has changes (all it has, in order) or, empty, after the poll
/// wait. The hosted node's watch holds the changes between polls, so none
/// is lost; a poll that fails (the hosted node unreachable) ends the
/// watch with that error, and the holder watches again and lists to catch
/// up. Dropping it ends the hosted node's watch ([`super::UNWATCH`]),
/// unless the hosted node ended it already ([`MapError::WatchEnded`]).
pub struct RemoteWatch {
    map: RemoteGlobalIdMap,
    number: u64,
    ready: VecDeque<Change>,
    polling: Option<MapFuture<'static, MapReply>>,
    ended: Option<MapError>,
}

impl WatchStream for RemoteWatch {
    fn poll_change(&mut self, cx: &mut Context<'_>) -> Poll<Result<Change, MapError>> {
        loop {
            if let Some(change) = self.ready.pop_front() {
                return Poll::Ready(Ok(change));
            }
            if let Some(error) = &self.ended {
                return Poll::Ready(Err(error.clone()));
            }
            let wait_ms = u32::try_from(self.map.poll_wait.as_millis()).unwrap_or(u32::MAX);
            let number = self.number;
            let poll = self.polling.get_or_insert_with(|| {
                self.map.call(MapRequest::NextChanges {
                    watch: number,
                    wait_ms,
                })
            });
            let reply = match poll.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(reply) => reply,
            };
            self.polling = None;
            match reply {
                Ok(MapReply::Changes(changes)) => self.ready.extend(changes),
                Ok(other) => self.ended = Some(unexpected(&other)),
                Err(error) => self.ended = Some(error),
            }
        }
    }
}

impl Drop for RemoteWatch {
    fn drop(&mut self) {
        // The hosted node removed a watch that ended there (`WatchEnded`);
        // after any other error (a poll that timed out, a refusal) it may
        // still hold it, so it is told.
        if matches!(self.ended, Some(MapError::WatchEnded(_))) {
            return;
        }
        // The call goes out now; its reply is not awaited. Off a core (a
        // watch dropped by another thread) the hosted node ends the watch
        // when this node is lost instead.
        if let Ok(rep) = self.map.messenger.get() {
            let request = MapRequest::Unwatch { watch: self.number };
            let body = Message::payload(IoChain::from(IoBuf::from_vec(request.encode())));
            drop(rep.call_with(self.map.hosted, None, MAP_EBB, request.number(), body));
        }
    }
}
