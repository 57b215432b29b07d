//! The message layer between two nodes over an in-memory connection
//! (`pipe_support`): calls and replies, error replies, the handshake and a
//! version mismatch, a peer lost mid-call, size limits, back-pressure and
//! zero-copy payloads from 1 byte to 16 MiB.

mod echo_support;
mod pipe_support;

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use ebb_core::{EbbId, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{
    encode_message, hello_message, Call, Config, Header, Hello, Kind, Limits, LocalNode, Message,
    MessageNumber, MessengerError, Peer, PeerState, Request, Service, ServiceError, WireError,
};
use ebb_net::{TcpConnection, TcpHandler};
use echo_support::{Echo, ECHO, NOTE, REFUSE};
use pipe_support::Pipe;

const ROUNDS: usize = 1_000_000;

fn echo_id() -> EbbId {
    EbbId::new(40_000).unwrap()
}

fn doubler_id() -> EbbId {
    EbbId::new(40_002).unwrap()
}

struct Pair {
    a: Rc<Peer>,
    b: Rc<Peer>,
    echo: Rc<Echo>,
    pipe: Pipe,
}

/// Node 1 (`a`) connected to node 2 (`b`), which has the echo Ebb.
fn pair(config_a: Config, config_b: Config, window: usize, segment: usize) -> Pair {
    let node_a = LocalNode::new(NodeId(1), config_a);
    let node_b = LocalNode::new(NodeId(2), config_b);
    let echo = Rc::new(Echo::default());
    node_b.register(echo_id(), echo.clone());
    node_b.register(doubler_id(), Rc::new(Doubler));
    let a = Peer::new(node_a);
    let b = Peer::new(node_b);
    let pipe = Pipe::new(a.handler(), b.handler(), window, segment);
    Pair { a, b, echo, pipe }
}

fn default_pair() -> Pair {
    pair(Config::default(), Config::default(), 64 << 10, 1460)
}

/// Polls a call once: its result if it is complete.
fn poll_once(call: &mut Call) -> Option<Result<Message, MessengerError>> {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(call).poll(&mut cx) {
        Poll::Ready(result) => Some(result),
        Poll::Pending => None,
    }
}

fn payload(len: usize, seed: u8) -> IoBuf {
    IoBuf::from_vec(
        (0..len)
            .map(|i| u8::try_from(i % 251).unwrap() ^ seed)
            .collect(),
    )
}

#[test]
fn a_call_gets_its_reply_and_both_sides_know_each_other() {
    let mut p = default_pair();
    let mut call = p.a.call(
        echo_id(),
        ECHO,
        Message::payload(IoChain::from(IoBuf::from_static(b"ping"))),
    );
    assert!(poll_once(&mut call).is_none(), "no reply before delivery");
    assert_eq!(p.a.pending_calls(), 1);
    p.pipe.run(ROUNDS);
    let reply = poll_once(&mut call).expect("the reply arrived").unwrap();
    assert_eq!(reply.payload, *b"ping".as_slice());
    assert_eq!(p.a.state(), PeerState::Ready { node: NodeId(2) });
    assert_eq!(p.b.state(), PeerState::Ready { node: NodeId(1) });
    assert_eq!(p.a.pending_calls(), 0);
    assert_eq!(p.a.stray_replies(), 0);
}

#[test]
fn an_unknown_ebb_or_message_number_gets_an_error_reply() {
    let mut p = default_pair();
    let missing = EbbId::new(40_001).unwrap();
    let mut no_ebb = p.a.call(missing, ECHO, Message::default());
    let mut no_message = p.a.call(echo_id(), MessageNumber(99), Message::default());
    let mut refused = p.a.call(echo_id(), REFUSE, Message::default());
    p.pipe.run(ROUNDS);
    assert_eq!(
        poll_once(&mut no_ebb).unwrap().unwrap_err(),
        MessengerError::UnknownEbb {
            node: NodeId(2),
            ebb: 40_001
        }
    );
    assert_eq!(
        poll_once(&mut no_message).unwrap().unwrap_err(),
        MessengerError::UnknownMessage {
            node: NodeId(2),
            ebb: 40_000,
            message: MessageNumber(99)
        }
    );
    assert_eq!(
        poll_once(&mut refused).unwrap().unwrap_err(),
        MessengerError::Refused {
            node: NodeId(2),
            code: 7
        }
    );
    // The connection stays up: error replies are answers, not failures.
    let mut ok = p.a.call(echo_id(), ECHO, Message::default());
    p.pipe.run(ROUNDS);
    assert!(poll_once(&mut ok).unwrap().is_ok());
}

#[test]
fn a_peer_lost_mid_call_completes_every_pending_call_with_an_error_once() {
    let mut p = default_pair();
    p.pipe.run(ROUNDS);
    // B stops reading: the calls are out but unanswered when the link dies.
    p.pipe.stall(1, true);
    let mut calls: Vec<Call> = (0..5)
        .map(|_| p.a.call(echo_id(), ECHO, Message::default()))
        .collect();
    p.pipe.run(ROUNDS);
    assert!(calls.iter_mut().all(|c| poll_once(c).is_none()));
    assert_eq!(p.a.pending_calls(), 5);
    p.pipe.cut();
    for call in &mut calls {
        assert_eq!(
            poll_once(call).expect("completed by the loss"),
            Err(MessengerError::ConnectionLost)
        );
    }
    assert_eq!(p.a.pending_calls(), 0);
    assert_eq!(
        p.a.state(),
        PeerState::Closed(MessengerError::ConnectionLost)
    );
    // Later calls fail at once, without waiting.
    let mut late = p.a.call(echo_id(), ECHO, Message::default());
    assert_eq!(
        poll_once(&mut late),
        Some(Err(MessengerError::ConnectionLost))
    );
    assert_eq!(
        p.a.send(echo_id(), NOTE, Message::default()).unwrap_err(),
        MessengerError::ConnectionLost
    );
}

#[test]
fn an_orderly_close_by_the_peer_also_fails_pending_calls() {
    let mut p = default_pair();
    p.pipe.run(ROUNDS);
    p.pipe.stall(1, true);
    let mut call = p.a.call(echo_id(), ECHO, Message::default());
    // B's side closes (its FIN reaches A) while the call is out.
    p.pipe.conn(1).close();
    p.pipe.run(ROUNDS);
    assert_eq!(
        poll_once(&mut call),
        Some(Err(MessengerError::ConnectionLost))
    );
}

/// A node of another wire version: sends its hello (in its version) and
/// records what it receives.
struct OtherVersion {
    version: u16,
    received: Rc<RefCell<IoChain>>,
}

impl TcpHandler for OtherVersion {
    fn on_connected(&mut self, conn: &TcpConnection) {
        let hello = hello_message(NodeId(9), Limits::DEFAULT, self.version);
        conn.send(hello).unwrap();
    }

    fn on_data(&mut self, _conn: &TcpConnection, mut data: IoChain) {
        self.received.borrow_mut().append(&mut data);
    }
}

#[test]
fn a_version_mismatch_is_refused_on_both_sides_naming_both_versions() {
    let node_a = LocalNode::new(NodeId(1), Config::default());
    let a = Peer::new(node_a);
    let mut call = a.call(echo_id(), ECHO, Message::default());
    let received = Rc::new(RefCell::new(IoChain::new()));
    let other = OtherVersion {
        version: 2,
        received: received.clone(),
    };
    let mut pipe = Pipe::new(a.handler(), Box::new(other), 64 << 10, 1460);
    pipe.run(ROUNDS);
    let refused = MessengerError::VersionMismatch { theirs: 2, ours: 1 };
    assert_eq!(a.state(), PeerState::Closed(refused.clone()));
    assert_eq!(poll_once(&mut call), Some(Err(refused.clone())));
    assert_eq!(
        refused.to_string(),
        "refused: the peer speaks Messenger wire version 2, we speak version 1"
    );
    // A closed in order (not a reset), after its hello went out...
    assert_eq!(pipe.ended_by(0), (true, false));
    // ...so the version-2 side reads A's version (1) where every version
    // keeps it, and refuses as well.
    let received = received.borrow().to_vec();
    assert_eq!(received[0..4], *b"EBBM");
    assert_eq!(received[4..6], 1u16.to_le_bytes());
    assert_eq!(received[6..8], 1u16.to_le_bytes(), "a hello comes first");
}

/// Sends raw bytes as its first message.
struct Raw(Vec<u8>);

impl TcpHandler for Raw {
    fn on_connected(&mut self, conn: &TcpConnection) {
        conn.send(IoChain::from(IoBuf::from_vec(self.0.clone())))
            .unwrap();
    }

    fn on_data(&mut self, _conn: &TcpConnection, _data: IoChain) {}
}

fn raw_message(kind: Kind, control: &[u8], payload_len: usize) -> Vec<u8> {
    let header = Header {
        kind,
        destination: 40_000,
        message: ECHO,
        source: NodeId(9),
        correlation: 1,
        control_len: 0,
        payload_len: 0,
        core: None,
    };
    let unlimited = Limits {
        max_control_len: u32::MAX,
        max_payload_len: u32::MAX,
    };
    let payload = IoChain::from(IoBuf::from_vec(vec![0; payload_len]));
    encode_message(header, control, payload, &unlimited)
        .unwrap()
        .to_vec()
}

/// `message` with its header's source node (bytes 16..20, little-endian:
/// docs/messenger.md's header table) made `node`.
fn from_node(node: u32, mut message: Vec<u8>) -> Vec<u8> {
    message[16..20].copy_from_slice(&node.to_le_bytes());
    message
}

#[test]
fn a_peer_breaking_the_protocol_is_reset_with_the_wire_error() {
    let hello = Hello {
        limits: Limits::DEFAULT,
    }
    .encode();
    let cases = [
        (
            raw_message(Kind::Call, b"", 0),
            WireError::Unexpected { kind: Kind::Call },
        ),
        (
            [
                raw_message(Kind::Hello, &hello, 0),
                raw_message(Kind::Hello, &hello, 0),
            ]
            .concat(),
            WireError::Unexpected { kind: Kind::Hello },
        ),
        (
            raw_message(Kind::Hello, b"short", 0),
            WireError::ControlLength {
                expected: 8,
                found: 5,
            },
        ),
        (
            [
                raw_message(Kind::Hello, &hello, 0),
                raw_message(Kind::OneWay, b"", 2000),
            ]
            .concat(),
            WireError::PayloadTooLong {
                len: 2000,
                limit: 1000,
            },
        ),
        (
            // Node 9's hello, then a message saying it is from node 8.
            [
                raw_message(Kind::Hello, &hello, 0),
                from_node(8, raw_message(Kind::OneWay, b"", 0)),
            ]
            .concat(),
            WireError::WrongSource {
                hello: NodeId(9),
                found: NodeId(8),
            },
        ),
        (
            b"GET / HTTP/1.1\r\n\r\n........................".to_vec(),
            WireError::BadMagic { found: *b"GET " },
        ),
    ];
    for (bytes, error) in cases {
        let config = Config {
            limits: Limits {
                max_control_len: 64,
                max_payload_len: 1000,
            },
            ..Config::default()
        };
        let a = Peer::new(LocalNode::new(NodeId(1), config));
        let mut pipe = Pipe::new(a.handler(), Box::new(Raw(bytes)), 64 << 10, 1460);
        pipe.run(ROUNDS);
        assert_eq!(
            a.state(),
            PeerState::Closed(MessengerError::Protocol(error))
        );
        assert_eq!(pipe.ended_by(0), (false, true), "{error}: reset");
    }
}

#[test]
fn messages_over_the_limit_are_refused_before_sending() {
    let small = Config {
        limits: Limits {
            max_control_len: 16,
            max_payload_len: 1000,
        },
        ..Config::default()
    };
    // Our own limit, before the handshake.
    let mut p = pair(small, Config::default(), 64 << 10, 1460);
    assert_a_1001_byte_call_is_refused(&p);
    let control = Message {
        control: IoChain::from(payload(17, 0)),
        payload: IoChain::new(),
    };
    assert_eq!(
        p.a.send(echo_id(), NOTE, control).unwrap_err(),
        MessengerError::TooLarge {
            part: "control",
            len: 17,
            limit: 16
        }
    );
    p.pipe.run(ROUNDS);
    assert_eq!(p.echo.notes.get(), 0, "nothing was sent");
    // The peer's limit, learnt from its hello.
    let mut p = pair(Config::default(), small, 64 << 10, 1460);
    p.pipe.run(ROUNDS);
    assert_a_1001_byte_call_is_refused(&p);
    // A reply over the caller's limit becomes an error reply.
    let mut p = pair(small, Config::default(), 64 << 10, 1460);
    p.pipe.run(ROUNDS);
    let mut call = p.a.call(
        doubler_id(),
        ECHO,
        Message::payload(IoChain::from(payload(600, 0))),
    );
    p.pipe.run(ROUNDS);
    assert_eq!(
        poll_once(&mut call),
        Some(Err(MessengerError::ReplyTooLarge {
            node: NodeId(2),
            len: 1200
        }))
    );
}

/// A call with 1001 bytes of payload fails at once with `TooLarge`.
fn assert_a_1001_byte_call_is_refused(p: &Pair) {
    let mut call = p.a.call(
        echo_id(),
        ECHO,
        Message::payload(IoChain::from(payload(1001, 0))),
    );
    assert_eq!(
        poll_once(&mut call),
        Some(Err(MessengerError::TooLarge {
            part: "payload",
            len: 1001,
            limit: 1000
        }))
    );
}

/// Replies with its payload twice.
struct Doubler;

impl Service for Doubler {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        let mut twice = request.body.payload.clone();
        twice.append(&mut request.body.payload.clone());
        Ok(Message::payload(twice))
    }
}

#[test]
fn a_peer_that_does_not_read_cannot_make_us_queue_without_bound() {
    let config = Config {
        max_queued_bytes: 8 << 10,
        ..Config::default()
    };
    let mut p = pair(config, Config::default(), 4 << 10, 1460);
    p.pipe.run(ROUNDS);
    p.pipe.stall(1, true);
    let mut sent = 0;
    let refused = loop {
        match p.a.send(
            echo_id(),
            NOTE,
            Message::payload(IoChain::from(payload(1000, 0))),
        ) {
            Ok(()) => sent += 1,
            Err(error) => break error,
        }
        p.pipe.run(ROUNDS);
        assert!(sent < 100, "the queue never filled");
    };
    assert!(matches!(
        refused,
        MessengerError::Backpressure { limit: 8192, .. }
    ));
    assert!(p.pipe.in_flight(0) <= 4 << 10, "never more than the credit");
    assert!(p.a.queued_bytes() <= (8 << 10) + 1040);
    // Once B reads again, everything queued arrives and the queue drains.
    p.pipe.stall(1, false);
    p.pipe.run(ROUNDS);
    assert_eq!(p.echo.notes.get(), sent);
    assert_eq!(p.a.queued_bytes(), 0);
    assert!(p.a.send(echo_id(), NOTE, Message::default()).is_ok());
}

#[test]
fn a_caller_that_does_not_read_its_replies_is_paused_not_buffered_for() {
    let config = Config {
        max_queued_bytes: 8 << 10,
        ..Config::default()
    };
    // B serves; A calls a lot but stops reading.
    let mut p = pair(Config::default(), config, 16 << 10, 1460);
    p.pipe.run(ROUNDS);
    p.pipe.stall(0, true);
    let mut calls: Vec<Call> = (0..40)
        .map(|_| {
            p.a.call(
                echo_id(),
                ECHO,
                Message::payload(IoChain::from(payload(1000, 1))),
            )
        })
        .collect();
    p.pipe.run(ROUNDS);
    assert!(p.pipe.paused(1), "B stopped reading calls");
    assert!(p.b.queued_bytes() <= (8 << 10) + 2 * 1040);
    p.pipe.stall(0, false);
    p.pipe.run(ROUNDS);
    assert!(!p.pipe.paused(1));
    for call in &mut calls {
        assert_eq!(poll_once(call).unwrap().unwrap().payload.len(), 1000);
    }
}

#[test]
fn calls_arriving_in_one_read_stop_at_the_queue_bound() {
    // One read can carry many calls: pausing receives alone let every call
    // already received be answered, whatever the bound (a 32 KiB read of
    // empty calls to a service with 1 MiB replies queued 700 MiB). The
    // frames after the bound now wait in the deframer. Here a raw peer
    // writes its hello and 60 calls of 1000 bytes at once and reads none
    // of the 2000-byte replies.
    let hello = Hello {
        limits: Limits::DEFAULT,
    }
    .encode();
    let mut bytes = raw_message(Kind::Hello, &hello, 0);
    for _ in 0..60 {
        bytes.extend(raw_message(Kind::Call, b"", 1000));
    }
    let config = Config {
        max_queued_bytes: 8 << 10,
        ..Config::default()
    };
    let node = LocalNode::new(NodeId(1), config);
    // Replies twice the size of the calls, so that they outgrow the
    // credit (the window) while the calls fit in it.
    node.register(echo_id(), Rc::new(Doubler));
    let a = Peer::new(node);
    let mut pipe = Pipe::new(a.handler(), Box::new(Raw(bytes)), 64 << 10, 128 << 10);
    pipe.stall(1, true);
    pipe.run(ROUNDS);
    assert!(pipe.paused(0), "the peer's calls were still read");
    assert!(
        a.queued_bytes() <= (8 << 10) + 2100,
        "{} bytes of replies queued over a bound of 8 KiB",
        a.queued_bytes()
    );
}

#[test]
fn payloads_from_1_byte_to_16_mib_arrive_intact_without_copies() {
    let mut p = pair(Config::default(), Config::default(), 1 << 20, 64 << 10);
    for len in [1, 100, 1460, 65_536, 1 << 20, 16 << 20] {
        let sent = payload(len, 3);
        let base = sent.as_ptr() as usize;
        p.echo.views.borrow_mut().clear();
        let mut call = p.a.call(
            echo_id(),
            ECHO,
            Message::payload(IoChain::from(sent.clone())),
        );
        p.pipe.run(ROUNDS);
        let reply = poll_once(&mut call).expect("replied").unwrap();
        assert_eq!(reply.payload.len(), len);
        assert!(reply.payload == *sent.as_slice(), "{len} bytes intact");
        // The service saw views of the buffers as delivered, and so did the
        // reply: the bytes were never copied on either side.
        let inside = |&(ptr, vlen): &(usize, usize)| ptr >= base && ptr + vlen <= base + len;
        assert!(
            p.echo.views.borrow().iter().all(inside),
            "{len}: request copied"
        );
        assert!(
            reply
                .payload
                .segments()
                .map(|v| (v.as_ptr() as usize, v.len()))
                .all(|v| inside(&v)),
            "{len}: reply copied"
        );
    }
}
