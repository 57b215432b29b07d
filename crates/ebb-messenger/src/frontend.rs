//! The frontend's registry of nodes (DESIGN §5), and a node's side of the
//! announcement.
//!
//! The frontend hands each node it is about to start an id range of
//! global Ebb ids ([`Frontend::expect`]; ranges never overlap), then
//! accepts that node's [`Announce`] once: a node it does not expect, a
//! second announcement of the same id, or an announcement naming another
//! node than its sender is refused with a [`Refusal`]. An accepted node
//! goes into the frontend's Messenger directory, and its reply lists the
//! nodes that announced before it, so it can call them.
//!
//! **The allocator's hook.** Issue 16 has `allocate` resolve once the
//! node has announced itself: [`Frontend::when_announced`] is a future
//! (any executor: it keeps a `core::task::Waker`) and
//! [`Frontend::announced`] polls. The `NodeAllocator` (`ebb-cluster`)
//! waits on it (`ebb_cluster::Announced`).

use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::net::{Ipv4Addr, SocketAddr};
use core::ops::Range;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use ebb_core::{EbbError, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use spin::Mutex;

use crate::announce::{
    Announce, AnnounceReply, NodeEntry, Refusal, ANNOUNCE, FRONTEND_EBB, FRONTEND_NODE, LOOKUP,
    LOOKUP_UNKNOWN,
};
use crate::{
    Answer, Message, MessengerError, MessengerRef, MessengerRep, Request, ServiceError,
    Unreachable, WireError,
};

/// Why the frontend could not expect a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrontendError {
    /// The node is already expected (or announced).
    AlreadyExpected(NodeId),
    /// Not that many global ids are left.
    IdsExhausted {
        /// Ids asked for.
        wanted: u32,
        /// Ids left.
        left: u32,
    },
}

impl fmt::Display for FrontendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrontendError::AlreadyExpected(node) => {
                write!(f, "node {node} already has an id range")
            }
            FrontendError::IdsExhausted { wanted, left } => {
                write!(f, "{wanted} global Ebb ids asked for, only {left} are left")
            }
        }
    }
}

impl core::error::Error for FrontendError {}

#[derive(Default)]
struct State {
    /// The next global id to hand out, and the end of the space.
    next_id: u32,
    end_id: u32,
    /// Each expected node's range.
    ranges: BTreeMap<NodeId, Range<u32>>,
    /// The nodes that announced themselves.
    announced: BTreeMap<NodeId, NodeEntry>,
    /// Futures waiting for a node's announcement: the node, the future's
    /// number, its waker.
    waiters: Vec<(NodeId, u64, Waker)>,
    /// The number the next `WhenAnnounced` gets.
    next_waiter: u64,
    /// How often each node was forgotten: a future made before the last
    /// time resolves with `Forgotten`.
    forgotten: BTreeMap<NodeId, u64>,
}

/// The frontend's registry of nodes. Shared by the frontend's cores.
pub struct Frontend {
    state: Mutex<State>,
}

impl Frontend {
    /// A registry handing out global Ebb ids from `ids`.
    #[must_use]
    pub fn new(ids: Range<u32>) -> Arc<Frontend> {
        Arc::new(Frontend {
            state: Mutex::new(State {
                next_id: ids.start,
                end_id: ids.end.max(ids.start),
                ..State::default()
            }),
        })
    }

    /// Expects node `node` and hands it `len` global Ebb ids (what its
    /// boot contract's `ebb_ids=` says).
    ///
    /// # Errors
    ///
    /// The node already has a range, or the space has fewer than `len`
    /// ids left.
    pub fn expect(&self, node: NodeId, len: u32) -> Result<Range<u32>, FrontendError> {
        let mut state = self.state.lock();
        if state.ranges.contains_key(&node) {
            return Err(FrontendError::AlreadyExpected(node));
        }
        let left = state.end_id - state.next_id;
        if len == 0 || len > left {
            return Err(FrontendError::IdsExhausted { wanted: len, left });
        }
        let range = state.next_id..state.next_id + len;
        state.next_id = range.end;
        state.ranges.insert(node, range.clone());
        Ok(range)
    }

    /// Expects node `node` with the global ids `ids`, reserved elsewhere
    /// (a cluster's frontend reserves each node's from the global id map
    /// as it allocates the node), not from this registry's own space.
    ///
    /// # Errors
    ///
    /// The node already has a range, or `ids` is empty.
    pub fn expect_range(&self, node: NodeId, ids: Range<u32>) -> Result<(), FrontendError> {
        let mut state = self.state.lock();
        if state.ranges.contains_key(&node) {
            return Err(FrontendError::AlreadyExpected(node));
        }
        if ids.is_empty() {
            return Err(FrontendError::IdsExhausted { wanted: 0, left: 0 });
        }
        state.ranges.insert(node, ids);
        Ok(())
    }

    /// Node `from`'s announcement: accepted (the node is recorded, and
    /// whoever waits for it is woken) or refused. An announced address of
    /// 0.0.0.0 means "where you see me": `seen`, the connection's remote
    /// address (a node listening on every address of its interface need
    /// not know which one the frontend reaches).
    pub fn accept(
        &self,
        from: NodeId,
        announce: &Announce,
        seen: Option<Ipv4Addr>,
    ) -> AnnounceReply {
        let mut entry = announce.0;
        if entry.addr.ip().is_unspecified() {
            match seen {
                Some(seen) => entry.addr.set_ip(seen),
                // Relayed to other nodes, 0.0.0.0 would point them at
                // themselves.
                None => return AnnounceReply::Refused(Refusal::NoAddress),
            }
        }
        let (woken, reply) = {
            let mut state = self.state.lock();
            let refusal = if entry.node != from {
                Some(Refusal::WrongId)
            } else if !state.ranges.contains_key(&from) {
                Some(Refusal::UnknownNode)
            } else {
                match state.announced.get(&from) {
                    // The same announcement again (its reply was lost with
                    // the connection, and the node retried): accepted
                    // again, with the other nodes announced so far.
                    Some(known) if *known == entry => {
                        let ids = &state.ranges[&from];
                        return AnnounceReply::Accepted {
                            ebb_ids: (ids.start, ids.end),
                            directory: state
                                .announced
                                .values()
                                .filter(|other| other.node != from)
                                .copied()
                                .collect(),
                        };
                    }
                    Some(_) => Some(Refusal::Duplicate),
                    None => None,
                }
            };
            if let Some(refusal) = refusal {
                return AnnounceReply::Refused(refusal);
            }
            let directory = state.announced.values().copied().collect();
            let ids = &state.ranges[&from];
            let ebb_ids = (ids.start, ids.end);
            state.announced.insert(from, entry);
            let (woken, waiting) = core::mem::take(&mut state.waiters)
                .into_iter()
                .partition(|(node, _, _)| *node == from);
            state.waiters = waiting;
            (woken, AnnounceReply::Accepted { ebb_ids, directory })
        };
        // Woken outside the lock: a waker may poll at once.
        let woken: Vec<(NodeId, u64, Waker)> = woken;
        for (_, _, waker) in woken {
            waker.wake();
        }
        reply
    }

    /// Node `node`'s announcement, if it made one.
    #[must_use]
    pub fn announced(&self, node: NodeId) -> Option<NodeEntry> {
        self.state.lock().announced.get(&node).copied()
    }

    /// Resolves with node `node`'s announcement once it is made (at once
    /// if it was): the hook `allocate` is to wait on.
    #[must_use]
    pub fn when_announced(self: &Arc<Self>, node: NodeId) -> WhenAnnounced {
        let mut state = self.state.lock();
        let number = state.next_waiter;
        state.next_waiter += 1;
        WhenAnnounced {
            frontend: Arc::clone(self),
            node,
            number,
            forgotten: state.forgotten.get(&node).copied().unwrap_or(0),
        }
    }

    /// Forgets node `node` (lost or stopped): its announcement, not its
    /// id range (ids are never handed out twice). Futures waiting for its
    /// announcement resolve with [`Forgotten`]. A node started again with
    /// the same id may announce itself again.
    pub fn forget(&self, node: NodeId) {
        let woken: Vec<(NodeId, u64, Waker)> = {
            let mut state = self.state.lock();
            state.announced.remove(&node);
            *state.forgotten.entry(node).or_insert(0) += 1;
            let (woken, waiting) = core::mem::take(&mut state.waiters)
                .into_iter()
                .partition(|(waiting_for, _, _)| *waiting_for == node);
            state.waiters = waiting;
            woken
        };
        // Woken outside the lock: a waker may poll at once.
        for (_, _, waker) in woken {
            waker.wake();
        }
    }

    /// Every node that announced itself, in id order.
    #[must_use]
    pub fn nodes(&self) -> Vec<NodeEntry> {
        self.state.lock().announced.values().copied().collect()
    }

    /// Serves announcements on every core of `messenger`'s node (which
    /// must be node [`FRONTEND_NODE`]): accepted nodes go into its
    /// directory.
    ///
    /// # Errors
    ///
    /// The calling thread is not one of the node's cores.
    pub fn serve(self: &Arc<Self>, messenger: MessengerRef) -> Result<(), EbbError> {
        let rep = messenger.get()?;
        let frontend = Arc::clone(self);
        rep.local().shared().register(
            FRONTEND_EBB,
            Arc::new(move |request: Request| Answer::Now(frontend.answer(messenger, request))),
        );
        Ok(())
    }
}

impl Frontend {
    /// Answers a message to the registry: an [`ANNOUNCE`] or a [`LOOKUP`].
    fn answer(&self, messenger: MessengerRef, request: Request) -> Result<Message, ServiceError> {
        if request.message == LOOKUP {
            return self.lookup(&request.body.control);
        }
        if request.message != ANNOUNCE {
            return Err(ServiceError::UnknownMessage);
        }
        // A control that does not decode is refused in the announcement's
        // own reply, so the node can say what was wrong.
        let reply = match Announce::decode(&request.body.control) {
            Ok(announce) => {
                let seen = match request.peer_addr {
                    Some(SocketAddr::V4(addr)) => Some(*addr.ip()),
                    _ => None,
                };
                self.accept(request.from, &announce, seen)
            }
            Err(_) => AnnounceReply::Refused(Refusal::Malformed),
        };
        if matches!(reply, AnnounceReply::Accepted { .. }) {
            if let (Ok(rep), Some(entry)) = (messenger.get(), self.announced(request.from)) {
                rep.directory().insert(entry.node, entry.socket_addr());
            }
        }
        Ok(Message {
            control: IoChain::from(IoBuf::from_vec(reply.encode())),
            payload: IoChain::new(),
        })
    }

    /// Answers a [`LOOKUP`]: the entry of the node whose id the control
    /// holds.
    fn lookup(&self, control: &IoChain) -> Result<Message, ServiceError> {
        let mut id = [0u8; 4];
        if control.len() != id.len() || control.copy_to_slice(&mut id).is_err() {
            return Err(ServiceError::Refused(u32::from(LOOKUP_UNKNOWN)));
        }
        let entry = self
            .announced(NodeId(u32::from_le_bytes(id)))
            .ok_or(ServiceError::Refused(u32::from(LOOKUP_UNKNOWN)))?;
        Ok(Message {
            control: IoChain::from(IoBuf::from_vec(Announce(entry).encode())),
            payload: IoChain::new(),
        })
    }
}

/// Asks the frontend where node `node` is (a node that announced after
/// this one), and puts the answer in `rep`'s directory.
///
/// # Errors
///
/// The frontend does not know the node (`Unreachable` with
/// `NotInDirectory`), or the call to the frontend failed.
pub(crate) async fn look_up(
    messenger: MessengerRef,
    node: NodeId,
) -> Result<SocketAddr, MessengerError> {
    let not_known = MessengerError::Unreachable {
        node,
        reason: Unreachable::NotInDirectory,
    };
    // The representative is fetched again after each wait, never held
    // across one (the future may be sent to the core it runs on).
    let rep = || messenger.get().map_err(|_| MessengerError::ConnectionLost);
    let reply = rep()?
        .call_with(
            FRONTEND_NODE,
            None,
            FRONTEND_EBB,
            LOOKUP,
            Message {
                control: IoChain::from(IoBuf::from_vec(node.0.to_le_bytes().to_vec())),
                payload: IoChain::new(),
            },
        )
        .await
        .map_err(|error| match error {
            MessengerError::Refused { .. } => not_known.clone(),
            other => other,
        })?;
    let entry = Announce::decode(&reply.control).map_err(|_| not_known.clone())?;
    if entry.0.node != node {
        return Err(not_known);
    }
    let addr = entry.0.socket_addr();
    rep()?.directory().insert(node, addr);
    Ok(addr)
}

/// The future of [`Frontend::when_announced`].
pub struct WhenAnnounced {
    frontend: Arc<Frontend>,
    node: NodeId,
    /// This future's number among the waiters.
    number: u64,
    /// How often the node had been forgotten when this future was made.
    forgotten: u64,
}

/// [`Frontend::when_announced`]'s error: the node was forgotten (lost or
/// stopped) before it announced itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forgotten(pub NodeId);

impl fmt::Display for Forgotten {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} was forgotten before it announced itself",
            self.0
        )
    }
}

impl core::error::Error for Forgotten {}

impl Future for WhenAnnounced {
    type Output = Result<NodeEntry, Forgotten>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.frontend.state.lock();
        if let Some(entry) = state.announced.get(&self.node) {
            return Poll::Ready(Ok(*entry));
        }
        if state.forgotten.get(&self.node).copied().unwrap_or(0) > self.forgotten {
            return Poll::Ready(Err(Forgotten(self.node)));
        }
        let number = self.number;
        state.waiters.retain(|(_, waiter, _)| *waiter != number);
        state.waiters.push((self.node, number, cx.waker().clone()));
        Poll::Pending
    }
}

impl Drop for WhenAnnounced {
    /// A future given up on (an allocate that timed out) leaves no waker
    /// behind.
    fn drop(&mut self) {
        let number = self.number;
        self.frontend
            .state
            .lock()
            .waiters
            .retain(|(_, waiter, _)| *waiter != number);
    }
}

/// Why a node's announcement did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnnounceError {
    /// The call to the frontend failed.
    Messenger(MessengerError),
    /// The frontend's reply did not decode.
    Protocol(WireError),
    /// The frontend refused.
    Refused(Refusal),
}

impl fmt::Display for AnnounceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnnounceError::Messenger(error) => write!(f, "announcing to the frontend: {error}"),
            AnnounceError::Protocol(error) => {
                write!(f, "the frontend's answer to the announcement: {error}")
            }
            AnnounceError::Refused(refusal) => write!(f, "the frontend refused: {refusal}"),
        }
    }
}

impl core::error::Error for AnnounceError {}

/// What an accepted node learns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Welcome {
    /// Its global Ebb ids.
    pub ebb_ids: Range<u32>,
    /// The nodes that announced before it (now in its directory).
    pub directory: Vec<NodeEntry>,
}

/// Announces this node (`rep`'s) to the frontend at `frontend` as `me`
/// (its id, where its Messenger listens, its cores; the id must be
/// `rep`'s node's, or the frontend refuses; address 0.0.0.0: the one the
/// frontend sees the node at); the nodes the frontend lists go into this
/// node's directory.
///
/// # Errors
///
/// The frontend was unreachable, refused, or answered something else.
pub async fn announce(
    rep: &'static MessengerRep,
    frontend: SocketAddr,
    me: NodeEntry,
) -> Result<Welcome, AnnounceError> {
    rep.directory().insert(FRONTEND_NODE, frontend);
    let announce = Announce(me);
    let reply = rep
        .call_with(
            FRONTEND_NODE,
            None,
            FRONTEND_EBB,
            ANNOUNCE,
            Message {
                control: IoChain::from(IoBuf::from_vec(announce.encode())),
                payload: IoChain::new(),
            },
        )
        .await
        .map_err(AnnounceError::Messenger)?;
    match AnnounceReply::decode(&reply.control).map_err(AnnounceError::Protocol)? {
        AnnounceReply::Refused(refusal) => Err(AnnounceError::Refused(refusal)),
        AnnounceReply::Accepted { ebb_ids, directory } => {
            for entry in &directory {
                rep.directory().insert(entry.node, entry.socket_addr());
            }
            Ok(Welcome {
                ebb_ids: ebb_ids.0..ebb_ids.1,
                directory,
            })
        }
    }
}

/// [`announce`], tried again every `pause` while the frontend cannot be
/// reached yet (it may start after the node) or the connection dropped
/// before the reply (the frontend accepts the same announcement again),
/// `tries` times at most in all; any other outcome at once.
///
/// # Errors
///
/// The last try's.
pub async fn announce_retrying(
    rep: &'static MessengerRep,
    frontend: SocketAddr,
    me: NodeEntry,
    tries: u32,
    pause: core::time::Duration,
) -> Result<Welcome, AnnounceError> {
    let mut tried = 0;
    loop {
        tried += 1;
        match announce(rep, frontend, me).await {
            Err(AnnounceError::Messenger(
                MessengerError::Unreachable { .. } | MessengerError::ConnectionLost,
            )) if tried < tries => ebb_event::sleep(pause).await,
            outcome => return outcome,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::SocketAddrV4;

    fn entry(node: u32, ip: [u8; 4]) -> Announce {
        Announce(NodeEntry {
            node: NodeId(node),
            addr: SocketAddrV4::new(Ipv4Addr::from(ip), 7100),
            cores: 1,
        })
    }

    /// A range reserved elsewhere is the node's, as one from the
    /// registry's own space would be.
    #[test]
    fn a_range_reserved_elsewhere_is_what_the_node_is_accepted_with() {
        let frontend = Frontend::new(100..100);
        assert_eq!(frontend.expect_range(NodeId(1), 5000..5064), Ok(()));
        assert_eq!(
            frontend.expect_range(NodeId(1), 6000..6064),
            Err(FrontendError::AlreadyExpected(NodeId(1)))
        );
        assert_eq!(
            frontend.expect_range(NodeId(2), 7000..7000),
            Err(FrontendError::IdsExhausted { wanted: 0, left: 0 })
        );
        assert_eq!(
            frontend.accept(NodeId(1), &entry(1, [10, 0, 0, 1]), None),
            AnnounceReply::Accepted {
                ebb_ids: (5000, 5064),
                directory: Vec::new(),
            }
        );
    }

    #[test]
    fn the_same_announcement_twice_is_accepted_twice_and_another_refused() {
        let frontend = Frontend::new(100..200);
        frontend.expect(NodeId(1), 10).unwrap();
        frontend.expect(NodeId(2), 10).unwrap();
        let one = entry(1, [10, 0, 0, 1]);
        let accepted = AnnounceReply::Accepted {
            ebb_ids: (100, 110),
            directory: Vec::new(),
        };
        assert_eq!(frontend.accept(NodeId(1), &one, None), accepted);
        // Its reply was lost and it retries: the same answer.
        assert_eq!(frontend.accept(NodeId(1), &one, None), accepted);
        // Another node claiming id 1 from elsewhere is refused.
        assert_eq!(
            frontend.accept(NodeId(1), &entry(1, [10, 0, 0, 7]), None),
            AnnounceReply::Refused(Refusal::Duplicate)
        );
        // 0.0.0.0 where the frontend sees no IPv4 address: relayed to
        // others, it would point them at themselves.
        assert_eq!(
            frontend.accept(NodeId(2), &entry(2, [0, 0, 0, 0]), None),
            AnnounceReply::Refused(Refusal::NoAddress)
        );
        assert_eq!(frontend.announced(NodeId(2)), None);
    }

    #[test]
    fn a_forgotten_node_may_announce_itself_again_with_the_same_ids() {
        let frontend = Frontend::new(100..200);
        assert_eq!(frontend.expect(NodeId(1), 10), Ok(100..110));
        assert_eq!(
            frontend.expect(NodeId(1), 10),
            Err(FrontendError::AlreadyExpected(NodeId(1)))
        );
        let first = frontend.accept(NodeId(1), &entry(1, [10, 0, 0, 1]), None);
        assert_eq!(
            first,
            AnnounceReply::Accepted {
                ebb_ids: (100, 110),
                directory: Vec::new()
            }
        );
        frontend.forget(NodeId(1));
        assert_eq!(frontend.announced(NodeId(1)), None);
        // Restarted elsewhere, announcing 0.0.0.0: recorded where it is seen.
        let again = frontend.accept(
            NodeId(1),
            &entry(1, [0, 0, 0, 0]),
            Some(Ipv4Addr::new(10, 0, 0, 9)),
        );
        assert!(matches!(
            again,
            AnnounceReply::Accepted {
                ebb_ids: (100, 110),
                ..
            }
        ));
        assert_eq!(
            frontend.announced(NodeId(1)).map(|e| e.addr),
            Some(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 7100))
        );
        assert_eq!(
            frontend.expect(NodeId(2), 10),
            Ok(110..120),
            "ids are not reused"
        );
    }
}
