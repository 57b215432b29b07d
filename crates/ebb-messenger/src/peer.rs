//! One connection to one peer node: the handshake, calls paired with their
//! replies, serving the peer's messages, and back-pressure.
//!
//! A [`Peer`] sits on one core, over one [`TcpConnection`]; its
//! [`PeerHandler`] is the connection's [`TcpHandler`]. Nothing here knows
//! the platform.
//!
//! **Invariants.**
//! - Every call completes exactly once: its sender lives in `pending`
//!   until a reply or an error reply with its correlation id takes it out,
//!   or the connection's end drains `pending` with the error that ended it
//!   (a [`Call`] whose sender vanished reads [`MessengerError::ConnectionLost`]).
//! - Our hello is the first message on the connection: it is put at the
//!   front of the queue when the connection is attached, before which
//!   nothing is sent.
//! - The peer's hello is the first message we accept; anything before it,
//!   or a second one, is a wire error. A version mismatch is reported on
//!   both sides, because each side's hello (in its own version) reaches the
//!   other before the refusing side closes.
//! - We never hand the connection more than its send credit, so the
//!   platform buffers nothing for us; what waits is in our queue, which
//!   new messages may not grow past [`Config::max_queued_bytes`].
//! - No `RefCell` borrow is held across a call out (the connection, a
//!   service, a waker), since each may call back into this peer.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::rc::{Rc, Weak};
use alloc::sync::Arc;
use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use ebb_core::{CoreId, EbbId, NodeId};
use ebb_event::{oneshot, JoinHandle, Receiver, Sender};
use ebb_iobuf::IoChain;
use ebb_net::{NetError, SendError, TcpConnection, TcpHandler};

use crate::framing::encode_chain;
use crate::node::{error_reply, serve_shared, Answer, CoreResult, Deferred, Route};
use crate::{
    encode_message, hello_message, Deframer, ErrorReply, Frame, Header, Hello, Kind, Limits,
    LocalNode, Message, MessageNumber, MessengerError, Request, Unreachable, WireError,
    MAX_NAMED_CORE, VERSION,
};

/// Where the connection is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerState {
    /// Waiting for the peer's hello.
    Handshaking,
    /// Handshake done; messages flow.
    Ready {
        /// The peer's node id.
        node: NodeId,
    },
    /// The connection ended; every call made from now on fails with this.
    Closed(MessengerError),
}

type ReplySender = Sender<Result<Message, MessengerError>>;

struct Inner {
    conn: Option<TcpConnection>,
    state: PeerState,
    deframer: Deframer,
    /// Messages waiting for send credit, oldest first; the front one may
    /// be partly sent already.
    outbox: VecDeque<IoChain>,
    queued: usize,
    /// Bytes of our hello still at the front of `outbox`. Until the peer's
    /// hello arrives only these are sent: the peer's hello names the node
    /// that answered, and a call must never reach another node than the
    /// one dialed (a stale directory entry), so calls wait for it.
    hello_unsent: usize,
    /// The node we dialed, whose hello must name it (`Peer::expect`).
    expected: Option<NodeId>,
    /// Whether we paused receiving because replies filled the queue.
    /// Frames already received wait in the deframer meanwhile.
    paused: bool,
    /// Receiving resumed during this flush: frames held in the deframer
    /// are to be dispatched.
    resumed: bool,
    /// Frames are being dispatched (a reply's flush that resumes
    /// receiving leaves the dispatching to that loop).
    dispatching: bool,
    pending: BTreeMap<u64, ReplySender>,
    next_correlation: u64,
    /// What both sides accept (ours until the peer's hello arrives).
    limits: Limits,
    /// Replies whose call we do not know (counted, then dropped).
    stray_replies: u64,
    /// Close the connection once no call of ours waits on it and the
    /// queue is empty ([`Peer::retire`]).
    retiring: bool,
}

/// One connection to one peer.
pub struct Peer {
    local: Rc<LocalNode>,
    /// This peer, for the answers of messages handed to another core.
    this: Weak<Peer>,
    inner: RefCell<Inner>,
}

impl Peer {
    /// A peer with no connection yet; attach one with [`Peer::attach`] or
    /// hand [`Peer::handler`] to `connect` (it attaches when connected).
    /// Calls made before wait for the peer's hello.
    #[must_use]
    pub fn new(local: Rc<LocalNode>) -> Rc<Peer> {
        let config = *local.config();
        Rc::new_cyclic(|this| Peer {
            local,
            this: this.clone(),
            inner: RefCell::new(Inner {
                conn: None,
                state: PeerState::Handshaking,
                deframer: Deframer::new(config.limits),
                outbox: VecDeque::new(),
                queued: 0,
                hello_unsent: 0,
                expected: None,
                paused: false,
                resumed: false,
                dispatching: false,
                pending: BTreeMap::new(),
                next_correlation: 1,
                limits: config.limits,
                stray_replies: 0,
                retiring: false,
            }),
        })
    }

    /// The connection's handler, for `connect` or a listener's accept.
    #[must_use]
    pub fn handler(self: &Rc<Self>) -> Box<dyn TcpHandler> {
        Box::new(PeerHandler {
            peer: Rc::clone(self),
        })
    }

    /// A peer for a connection a listener accepted, attached at once, and
    /// the handler to give the platform for it.
    pub fn accept(local: Rc<LocalNode>, conn: &TcpConnection) -> (Rc<Peer>, Box<dyn TcpHandler>) {
        let peer = Peer::new(local);
        peer.attach(conn.clone());
        let handler = peer.handler();
        (peer, handler)
    }

    /// Refuses the connection unless the peer's hello comes from `node`
    /// (the node we dialed): an address that answers as another node (a
    /// stale directory entry) fails every call queued for `node` with
    /// [`Unreachable::WrongNode`] before any of them is sent.
    pub fn expect(&self, node: NodeId) {
        self.inner.borrow_mut().expected = Some(node);
    }

    /// Uses `conn` (once): sends our hello, then whatever was queued.
    pub fn attach(&self, conn: TcpConnection) {
        {
            let mut inner = self.inner.borrow_mut();
            if inner.conn.is_some() || matches!(inner.state, PeerState::Closed(_)) {
                return;
            }
            let message = hello_message(self.local.id(), self.local.config().limits, VERSION);
            inner.queued += message.len();
            inner.hello_unsent = message.len();
            inner.outbox.push_front(message);
            inner.conn = Some(conn);
        }
        self.flush();
    }

    /// Where the connection is.
    #[must_use]
    pub fn state(&self) -> PeerState {
        self.inner.borrow().state.clone()
    }

    /// Calls waiting for their reply.
    #[must_use]
    pub fn pending_calls(&self) -> usize {
        self.inner.borrow().pending.len()
    }

    /// Bytes waiting for send credit.
    #[must_use]
    pub fn queued_bytes(&self) -> usize {
        self.inner.borrow().queued
    }

    /// Replies that answered no call of ours.
    #[must_use]
    pub fn stray_replies(&self) -> u64 {
        self.inner.borrow().stray_replies
    }

    /// The node this peer belongs to.
    #[must_use]
    pub fn local(&self) -> &Rc<LocalNode> {
        &self.local
    }

    /// Calls message `message` of Ebb `ebb` on the peer; the future gives
    /// its reply, or the error that prevented one. The peer's core on the
    /// connection handles it.
    pub fn call(&self, ebb: EbbId, message: MessageNumber, body: Message) -> Call {
        self.call_to(None, ebb, message, body)
    }

    /// As [`Peer::call`], handled by the peer's core `core` (a core above
    /// [`MAX_NAMED_CORE`] is named as that one, which no node has).
    pub fn call_on(&self, core: CoreId, ebb: EbbId, message: MessageNumber, body: Message) -> Call {
        let core = u16::try_from(core.0).map_or(MAX_NAMED_CORE, |c| c.min(MAX_NAMED_CORE));
        self.call_to(Some(core), ebb, message, body)
    }

    fn call_to(
        &self,
        core: Option<u16>,
        ebb: EbbId,
        message: MessageNumber,
        body: Message,
    ) -> Call {
        let (sender, receiver) = oneshot();
        let message = {
            let mut inner = self.inner.borrow_mut();
            let correlation = inner.next_correlation;
            let mut header = self.header(Kind::Call, ebb.raw(), message, correlation);
            header.core = core;
            let message = match self.admit(&inner, header, body) {
                Ok(message) => message,
                Err(error) => return Call::failed(error),
            };
            inner.next_correlation += 1;
            inner.pending.insert(correlation, sender);
            message
        };
        self.transmit(message, false);
        Call {
            state: CallState::Waiting(receiver),
        }
    }

    /// Sends message `message` to Ebb `ebb` on the peer, expecting no
    /// answer.
    ///
    /// # Errors
    ///
    /// The connection ended, the message is over the limits, or the queue
    /// is full ([`MessengerError::Backpressure`]); nothing was sent.
    pub fn send(
        &self,
        ebb: EbbId,
        message: MessageNumber,
        body: Message,
    ) -> Result<(), MessengerError> {
        let message = {
            let inner = self.inner.borrow();
            let header = self.header(Kind::OneWay, ebb.raw(), message, 0);
            self.admit(&inner, header, body)?
        };
        self.transmit(message, false);
        Ok(())
    }

    fn header(
        &self,
        kind: Kind,
        destination: u32,
        message: MessageNumber,
        correlation: u64,
    ) -> Header {
        Header {
            kind,
            destination,
            message,
            source: self.local.id(),
            correlation,
            control_len: 0,
            payload_len: 0,
            core: None,
        }
    }

    /// A new message, encoded, if the connection is open, it fits the
    /// limits and the queue has room.
    fn admit(
        &self,
        inner: &Inner,
        header: Header,
        body: Message,
    ) -> Result<IoChain, MessengerError> {
        if let PeerState::Closed(error) = &inner.state {
            return Err(error.clone());
        }
        let limit = self.local.config().max_queued_bytes;
        if inner.queued > 0 && inner.queued + body.payload.len() > limit {
            return Err(MessengerError::Backpressure {
                queued: inner.queued,
                limit,
            });
        }
        encode_chain(header, &body.control, body.payload, &inner.limits).map_err(too_large)
    }

    /// Sends `message` at once if nothing waits before it, the handshake
    /// is done and the connection's credit takes it whole (the common
    /// case: one call or reply at a time); queues it behind the others
    /// otherwise, so the
    /// order and the credit rule stay those of [`Peer::send_queued`]. A
    /// reply queued past [`Config::max_queued_bytes`] pauses our receive
    /// side (a reply is never dropped: its call would hang).
    fn transmit(&self, message: IoChain, reply: bool) {
        let direct = {
            let inner = self.inner.borrow();
            let idle = inner.outbox.is_empty() && !inner.paused;
            match (&inner.conn, &inner.state) {
                (Some(conn), PeerState::Ready { .. }) if idle => Some(conn.clone()),
                _ => None,
            }
        };
        let message = match direct {
            // `send` takes all or nothing: a message over the credit comes
            // back, and `send_queued` splits it to the credit.
            Some(conn) => match conn.send(message) {
                Ok(()) => return,
                Err(SendError {
                    error: NetError::NoCredit { .. },
                    data,
                }) => data,
                Err(_) => {
                    self.end(MessengerError::ConnectionLost);
                    return;
                }
            },
            None => message,
        };
        {
            let mut inner = self.inner.borrow_mut();
            if matches!(inner.state, PeerState::Closed(_)) {
                return;
            }
            inner.queued += message.len();
            inner.outbox.push_back(message);
            if reply && !inner.paused && inner.queued > self.local.config().max_queued_bytes {
                inner.paused = true;
                if let Some(conn) = &inner.conn {
                    conn.pause_receive();
                }
            }
        }
        self.flush();
    }

    /// Hands the connection as much of the queue as its credit takes, and
    /// dispatches the frames held while receiving was paused if that
    /// resumed it.
    fn flush(&self) {
        self.send_queued();
        let resumed = core::mem::take(&mut self.inner.borrow_mut().resumed);
        if resumed {
            self.dispatch_received();
        }
    }

    fn send_queued(&self) {
        loop {
            let (conn, chunk, was_hello) = {
                let mut inner = self.inner.borrow_mut();
                let Some(conn) = inner.conn.clone() else {
                    return;
                };
                let handshaking = inner.state == PeerState::Handshaking;
                if handshaking && inner.hello_unsent == 0 {
                    // Calls wait for the peer's hello (see `hello_unsent`).
                    return;
                }
                let hello_unsent = inner.hello_unsent;
                let Some(front) = inner.outbox.front_mut() else {
                    return;
                };
                // Asking while it is 0 also asks to hear when it grows
                // (`on_send_credit`).
                let mut credit = conn.send_credit();
                if credit == 0 {
                    return;
                }
                if handshaking {
                    credit = credit.min(hello_unsent);
                }
                let chunk = if front.len() <= credit {
                    inner.outbox.pop_front().unwrap_or_default()
                } else {
                    front.split_to(credit).unwrap_or_default()
                };
                inner.queued -= chunk.len();
                inner.hello_unsent = inner.hello_unsent.saturating_sub(chunk.len());
                if inner.paused && inner.queued <= self.local.config().max_queued_bytes / 2 {
                    inner.paused = false;
                    inner.resumed = true;
                    conn.resume_receive();
                }
                (conn, chunk, handshaking)
            };
            match conn.send(chunk) {
                Ok(()) => {}
                Err(SendError {
                    error: NetError::NoCredit { .. },
                    data,
                }) => {
                    let mut inner = self.inner.borrow_mut();
                    inner.queued += data.len();
                    if was_hello {
                        inner.hello_unsent += data.len();
                    }
                    inner.outbox.push_front(data);
                    return;
                }
                Err(_) => {
                    self.end(MessengerError::ConnectionLost);
                    return;
                }
            }
        }
    }

    /// Bytes from the peer.
    fn receive(&self, data: IoChain) {
        {
            let mut inner = self.inner.borrow_mut();
            if matches!(inner.state, PeerState::Closed(_)) {
                return;
            }
            inner.deframer.push(data);
        }
        self.dispatch_received();
    }

    /// Dispatches the frames received, until none is whole or receiving
    /// is paused: a paused peer's frames stay in the deframer, so replies
    /// queued past the bound stop at the frames that made them (not at
    /// the next read, which may hold hundreds of calls).
    fn dispatch_received(&self) {
        {
            let mut inner = self.inner.borrow_mut();
            if inner.dispatching {
                return;
            }
            inner.dispatching = true;
        }
        loop {
            let next = {
                let mut inner = self.inner.borrow_mut();
                if matches!(inner.state, PeerState::Closed(_)) || inner.paused {
                    break;
                }
                inner.deframer.next_frame()
            };
            match next {
                Ok(Some(frame)) => self.dispatch(frame),
                Ok(None) => break,
                Err(error) => {
                    self.wire_error(error);
                    break;
                }
            }
        }
        self.inner.borrow_mut().dispatching = false;
    }

    fn dispatch(&self, frame: Frame) {
        let state = self.state();
        let header = frame.header;
        match (state, header.kind) {
            (PeerState::Handshaking, Kind::Hello) => match Hello::decode(&frame.control) {
                Ok(hello) => {
                    let expected = self.inner.borrow().expected;
                    if let Some(dialed) = expected.filter(|&dialed| dialed != header.source) {
                        self.give_up(MessengerError::Unreachable {
                            node: dialed,
                            reason: Unreachable::WrongNode {
                                found: header.source,
                            },
                        });
                        return;
                    }
                    {
                        let mut inner = self.inner.borrow_mut();
                        inner.limits = inner.limits.min(hello.limits);
                        inner.state = PeerState::Ready {
                            node: header.source,
                        };
                    }
                    // The calls queued behind our hello may go now.
                    self.send_queued();
                }
                Err(error) => self.wire_error(error),
            },
            // The source is checked once here, so that what a service is
            // told (`Request::from`) is the node that said hello, never a
            // claim of the frame's.
            (PeerState::Ready { node }, _) if header.source != node => {
                self.wire_error(WireError::WrongSource {
                    hello: node,
                    found: header.source,
                });
            }
            (PeerState::Ready { .. }, Kind::Call | Kind::OneWay) => self.serve(frame),
            (PeerState::Ready { .. }, Kind::Reply) => self.complete(
                header.correlation,
                Ok(Message {
                    control: frame.control,
                    payload: frame.payload,
                }),
            ),
            (PeerState::Ready { node }, Kind::ErrorReply) => {
                match ErrorReply::decode(&frame.control) {
                    Ok(reply) => {
                        self.complete(header.correlation, Err(remote_error(node, header, reply)))
                    }
                    Err(error) => self.wire_error(error),
                }
            }
            (PeerState::Closed(_), _) => {}
            (_, kind) => self.wire_error(WireError::Unexpected { kind }),
        }
    }

    /// Runs the destination's service, here or on the core the message
    /// names; answers a call.
    fn serve(&self, frame: Frame) {
        let header = frame.header;
        let peer_addr = self
            .inner
            .borrow()
            .conn
            .as_ref()
            .map(TcpConnection::peer_addr);
        let request = Request {
            from: header.source,
            peer_addr,
            message: header.message,
            body: Message {
                control: frame.control,
                payload: frame.payload,
            },
        };
        let result = match self.local.route(header.core) {
            Route::Here => match self.local.serve(header.destination, request) {
                None => Err(ErrorReply::UnknownEbb(header.destination)),
                Some(Answer::Now(result)) => {
                    result.map_err(|error| error_reply(header.destination, header.message, error))
                }
                Some(Answer::Later(reply)) => {
                    self.answer_later(header, reply);
                    return;
                }
            },
            Route::NoSuchCore(core) => Err(ErrorReply::NoSuchCore(core)),
            Route::Core(core) => {
                self.hand_off(core, header, request);
                return;
            }
        };
        self.answer(header, result);
    }

    /// Answers once the service's deferred reply is there (a task on this
    /// core; a connection gone meanwhile takes no answer).
    fn answer_later(&self, header: Header, reply: Deferred) {
        let this = self.this.clone();
        ebb_event::spawn_task(async move {
            let result = reply
                .await
                .map_err(|error| error_reply(header.destination, header.message, error));
            if let Some(peer) = this.upgrade() {
                peer.answer(header, result);
            }
        });
    }

    /// Runs a message on another core of this node (the request moves
    /// there, its payload with it); the answer comes back to this core.
    fn hand_off(&self, core: CoreId, header: Header, request: Request) {
        let Some(router) = self.local.router() else {
            self.answer(
                header,
                Err(ErrorReply::NoSuchCore(
                    u32::try_from(core.0).unwrap_or(u32::MAX),
                )),
            );
            return;
        };
        let shared = Arc::clone(self.local.shared());
        let destination = header.destination;
        let this = self.this.clone();
        router.run_on(
            core,
            Box::new(move || serve_shared(&shared, destination, request)),
            Box::new(move |result| {
                if let Some(peer) = this.upgrade() {
                    peer.answer(header, result);
                }
            }),
        );
    }

    /// Sends a call's answer (a one-way message has none).
    fn answer(&self, header: Header, result: CoreResult) {
        if header.kind != Kind::Call {
            return;
        }
        let limits = {
            let inner = self.inner.borrow();
            if matches!(inner.state, PeerState::Closed(_)) {
                return;
            }
            inner.limits
        };
        // The reply goes straight from its encoding to `transmit` (each
        // `Result` adapter on the way would move its two chains again).
        let error = match result {
            Ok(body) => {
                let len = body.payload.len();
                let reply = self.header(
                    Kind::Reply,
                    header.destination,
                    header.message,
                    header.correlation,
                );
                match encode_chain(reply, &body.control, body.payload, &limits) {
                    // A peer that calls faster than it reads is held back
                    // by pausing our receive side (`transmit`).
                    Ok(message) => return self.transmit(message, true),
                    Err(_) => ErrorReply::ReplyTooLarge(u32::try_from(len).unwrap_or(u32::MAX)),
                }
            }
            Err(error) => error,
        };
        let header = self.header(
            Kind::ErrorReply,
            header.destination,
            header.message,
            header.correlation,
        );
        match encode_message(header, &error.encode(), IoChain::new(), &Limits::DEFAULT) {
            Ok(message) => self.transmit(message, true),
            Err(_) => unreachable!("an error reply is within the default limits"),
        }
    }

    /// Completes the call `correlation`, if it is still pending.
    fn complete(&self, correlation: u64, result: Result<Message, MessengerError>) {
        let sender = {
            let mut inner = self.inner.borrow_mut();
            let sender = inner.pending.remove(&correlation);
            if sender.is_none() {
                inner.stray_replies += 1;
            }
            sender
        };
        if let Some(sender) = sender {
            sender.send(result);
        }
        self.close_if_retired();
    }

    /// The peer broke the wire format, or speaks another version: both end
    /// the connection. A version mismatch closes in order, so that our
    /// hello (already sent) reaches the peer and it refuses too.
    fn wire_error(&self, error: WireError) {
        let conn = self.inner.borrow().conn.clone();
        match error {
            WireError::Version { theirs, ours } => {
                self.end(MessengerError::VersionMismatch { theirs, ours });
                if let Some(conn) = conn {
                    conn.close();
                }
            }
            error => {
                self.end(MessengerError::Protocol(error));
                if let Some(conn) = conn {
                    conn.abort();
                }
            }
        }
    }

    /// Gives the peer up with `error` (every pending call completes with
    /// it) and aborts the connection: a connection that never said hello.
    pub fn give_up(&self, error: MessengerError) {
        let conn = self.inner.borrow().conn.clone();
        self.end(error);
        if let Some(conn) = conn {
            conn.abort();
        }
    }

    /// Closes the connection in order now (a FIN, not a reset, so the
    /// peer reads what we sent and then the end of the stream): every
    /// pending call completes with `error`, and so will every later one.
    pub fn close(&self, error: MessengerError) {
        let conn = self.inner.borrow().conn.clone();
        self.end(error);
        if let Some(conn) = conn {
            conn.close();
        }
    }

    /// Closes the connection in order once no call of ours waits on it and
    /// nothing is queued: the losing one of two connections between the
    /// same nodes, which takes no new calls but finishes the ones it has.
    pub fn retire(&self) {
        self.inner.borrow_mut().retiring = true;
        self.close_if_retired();
    }

    fn close_if_retired(&self) {
        let conn = {
            let inner = self.inner.borrow();
            if !inner.retiring || !inner.pending.is_empty() || !inner.outbox.is_empty() {
                return;
            }
            inner.conn.clone()
        };
        if let Some(conn) = conn {
            self.end(MessengerError::ConnectionLost);
            conn.close();
        }
    }

    /// Whether [`Peer::retire`] was called.
    #[must_use]
    pub fn is_retired(&self) -> bool {
        self.inner.borrow().retiring
    }

    /// Ends the peer (once): every pending call completes with `error`,
    /// and so will every later one.
    fn end(&self, error: MessengerError) {
        let pending = {
            let mut inner = self.inner.borrow_mut();
            if matches!(inner.state, PeerState::Closed(_)) {
                return;
            }
            inner.state = PeerState::Closed(error.clone());
            inner.outbox.clear();
            inner.queued = 0;
            inner.deframer = Deframer::new(inner.limits);
            core::mem::take(&mut inner.pending)
        };
        for sender in pending.into_values() {
            sender.send(Err(error.clone()));
        }
    }
}

fn too_large(error: WireError) -> MessengerError {
    match error {
        WireError::ControlTooLong { len, limit } => MessengerError::TooLarge {
            part: "control",
            len: usize::try_from(len).unwrap_or(usize::MAX),
            limit,
        },
        WireError::PayloadTooLong { len, limit } => MessengerError::TooLarge {
            part: "payload",
            len: usize::try_from(len).unwrap_or(usize::MAX),
            limit,
        },
        other => MessengerError::Protocol(other),
    }
}

fn remote_error(node: NodeId, header: Header, reply: ErrorReply) -> MessengerError {
    match reply {
        ErrorReply::UnknownEbb(ebb) => MessengerError::UnknownEbb { node, ebb },
        ErrorReply::UnknownMessage(number) => MessengerError::UnknownMessage {
            node,
            ebb: header.destination,
            message: MessageNumber(number),
        },
        ErrorReply::Refused(code) => MessengerError::Refused { node, code },
        ErrorReply::ReplyTooLarge(len) => MessengerError::ReplyTooLarge { node, len },
        ErrorReply::NoRepresentative(ebb) => MessengerError::NoRepresentative { node, ebb },
        ErrorReply::NoSuchCore(core) => MessengerError::NoSuchCore { node, core },
    }
}

/// The connection's handler: feeds the [`Peer`].
pub struct PeerHandler {
    peer: Rc<Peer>,
}

impl TcpHandler for PeerHandler {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.peer.attach(conn.clone());
    }

    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        // An accepted connection's first event may be its data.
        self.peer.attach(conn.clone());
        self.peer.receive(data);
    }

    fn on_send_credit(&mut self, _conn: &TcpConnection) {
        self.peer.flush();
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        self.peer.end(MessengerError::ConnectionLost);
        conn.close();
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, _error: NetError) {
        self.peer.end(MessengerError::ConnectionLost);
    }
}

enum CallState {
    Failed(Option<MessengerError>),
    Waiting(Receiver<Result<Message, MessengerError>>),
    /// Made on another core (the one holding the connection).
    Forwarded(JoinHandle<Result<Message, MessengerError>>),
}

/// The future of a [`Peer::call`]: the reply, or why there is none.
pub struct Call {
    state: CallState,
}

impl Call {
    /// A call made on another core, whose task gives the result.
    pub(crate) fn forwarded(handle: JoinHandle<Result<Message, MessengerError>>) -> Self {
        Call {
            state: CallState::Forwarded(handle),
        }
    }

    /// A call that failed before anything was sent.
    pub(crate) fn failed(error: MessengerError) -> Self {
        Call {
            state: CallState::Failed(Some(error)),
        }
    }
}

impl Future for Call {
    type Output = Result<Message, MessengerError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().state {
            CallState::Failed(error) => {
                Poll::Ready(Err(error.take().unwrap_or(MessengerError::ConnectionLost)))
            }
            // Matched rather than mapped: each adapter would move the
            // reply (two chains) once more.
            CallState::Waiting(receiver) => match Pin::new(receiver).poll(cx) {
                Poll::Ready(Ok(result)) => Poll::Ready(result),
                Poll::Ready(Err(_)) => Poll::Ready(Err(MessengerError::ConnectionLost)),
                Poll::Pending => Poll::Pending,
            },
            // The other core stopped before answering (its node shuts down).
            CallState::Forwarded(handle) => Pin::new(handle)
                .poll(cx)
                .map(|result| result.unwrap_or(Err(MessengerError::ConnectionLost))),
        }
    }
}

impl core::fmt::Debug for Peer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Peer(node {} -> {:?})", self.local.id(), self.state())
    }
}
