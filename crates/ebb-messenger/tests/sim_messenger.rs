//! Two nodes in one process, each on its own Ebbflow TCP/IP stack, talking
//! through the Messenger over the simulated link (`ebb_netstack::sim`, a
//! seeded clock, no root): call and reply, an unknown Ebb, lazy creation of
//! the receiving representative by its fault handler, a version
//! mismatch, a peer that vanishes mid-call, and payloads of 1 B to 16 MiB
//! that arrive as views into the receiving device's frame buffers; and a
//! property test of random calls, node losses and replacement nodes in
//! which every call completes exactly once, with the reply or the error its
//! node's fate allows.

mod echo_support;
mod sim_support;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};

use ebb_core::{enter_core, CoreId, Ebb, EbbError, EbbId, EbbRef, FaultContext, Node, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{
    hello_message, Call, Config as MessengerConfig, Limits, LocalNode, Message, MessengerError,
    Peer, PeerState, Request, Service, ServiceError,
};
use ebb_net::{NetStack, TcpConnection, TcpHandler};
use ebb_netstack::sim::{LinkConfig, Sim};
use echo_support::{Echo, ECHO};
use sim_support::{side, Side};

const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 7100;

fn echo_id() -> EbbId {
    EbbId::new(40_100).unwrap()
}

thread_local! {
    /// Node B, for the listener's accept function (which must be `Send`).
    static NODE_B: RefCell<Option<Rc<LocalNode>>> = const { RefCell::new(None) };
    /// The peers B accepted.
    static ACCEPTED: RefCell<Vec<Rc<Peer>>> = const { RefCell::new(Vec::new()) };
}

struct Cluster {
    sim: Sim,
    a: Side,
    b: Side,
    to_b: Rc<Peer>,
    echo: Rc<Echo>,
}

/// Node 1 on stack A connected through the Messenger to node 2 on stack B,
/// which serves the echo Ebb.
fn cluster() -> Cluster {
    let mut sim = Sim::new(LinkConfig {
        latency: Duration::from_micros(50),
        bandwidth_bps: 10_000_000_000,
        ..LinkConfig::default()
    });
    let a = side(&sim, 0xa, IP_A);
    let b = side(&sim, 0xb, IP_B);
    sim.add(Box::new(a.stack.clone()));
    sim.add(Box::new(b.stack.clone()));
    let node_b = LocalNode::new(NodeId(2), MessengerConfig::default());
    let echo = Rc::new(Echo::default());
    node_b.register(echo_id(), echo.clone());
    NODE_B.with(|n| *n.borrow_mut() = Some(node_b));
    ACCEPTED.with(|a| a.borrow_mut().clear());
    b.stack
        .listen(
            SocketAddr::from((IP_B, PORT)),
            Arc::new(|conn: &TcpConnection| {
                let node = NODE_B.with(|n| n.borrow().clone().unwrap());
                let (peer, handler) = Peer::accept(node, conn);
                ACCEPTED.with(|a| a.borrow_mut().push(peer));
                handler
            }),
        )
        .unwrap();
    let to_b = Peer::new(LocalNode::new(NodeId(1), MessengerConfig::default()));
    a.stack
        .connect(SocketAddr::from((IP_B, PORT)), to_b.handler())
        .unwrap();
    Cluster {
        sim,
        a,
        b,
        to_b,
        echo,
    }
}

/// Runs the simulation until `call` completes (at most `limit` of
/// simulated time).
fn finish(sim: &mut Sim, call: &mut Call, limit: Duration) -> Result<Message, MessengerError> {
    let step = Duration::from_millis(5);
    let mut waited = Duration::ZERO;
    loop {
        let mut cx = Context::from_waker(Waker::noop());
        if let Poll::Ready(result) = pin!(&mut *call).poll(&mut cx) {
            return result;
        }
        assert!(waited < limit, "the call did not complete in {limit:?}");
        sim.run_for(step);
        waited += step;
    }
}

fn payload(len: usize) -> IoBuf {
    IoBuf::from_vec((0..len).map(|i| u8::try_from(i % 253).unwrap()).collect())
}

#[test]
fn a_call_over_our_stack_gets_its_reply() {
    let mut c = cluster();
    let mut call = c.to_b.call(
        echo_id(),
        ECHO,
        Message::payload(IoChain::from(IoBuf::from_static(b"ping"))),
    );
    let reply = finish(&mut c.sim, &mut call, Duration::from_secs(5)).unwrap();
    assert_eq!(reply.payload, *b"ping".as_slice());
    assert_eq!(c.to_b.state(), PeerState::Ready { node: NodeId(2) });
    let accepted = ACCEPTED.with(|a| a.borrow().clone());
    assert_eq!(accepted.len(), 1);
    assert_eq!(accepted[0].state(), PeerState::Ready { node: NodeId(1) });
}

#[test]
fn an_unknown_ebb_gets_an_error_reply_over_our_stack() {
    let mut c = cluster();
    let mut call = c
        .to_b
        .call(EbbId::new(40_101).unwrap(), ECHO, Message::default());
    assert_eq!(
        finish(&mut c.sim, &mut call, Duration::from_secs(5)).unwrap_err(),
        MessengerError::UnknownEbb {
            node: NodeId(2),
            ebb: 40_101
        }
    );
}

#[test]
fn a_peer_that_vanishes_mid_call_completes_the_call_with_an_error() {
    let mut c = cluster();
    let mut first = c.to_b.call(echo_id(), ECHO, Message::default());
    finish(&mut c.sim, &mut first, Duration::from_secs(5)).unwrap();
    // B goes silent (a killed node): A's call is retransmitted until TCP
    // gives up, and the call completes with the loss.
    c.b.vanished.set(true);
    let mut call = c.to_b.call(
        echo_id(),
        ECHO,
        Message::payload(IoChain::from(payload(3000))),
    );
    assert_eq!(
        finish(&mut c.sim, &mut call, Duration::from_secs(120)),
        Err(MessengerError::ConnectionLost)
    );
    assert_eq!(c.to_b.pending_calls(), 0);
    let mut late = c.to_b.call(echo_id(), ECHO, Message::default());
    assert_eq!(
        finish(&mut c.sim, &mut late, Duration::ZERO),
        Err(MessengerError::ConnectionLost)
    );
}

/// A node of wire version 2 (see `peer_pipe.rs`), accepted by B's stack.
struct OtherVersion;

impl TcpHandler for OtherVersion {
    fn on_data(&mut self, conn: &TcpConnection, _data: IoChain) {
        let _ = conn.send(hello_message(NodeId(9), Limits::DEFAULT, 2));
    }
}

#[test]
fn a_version_mismatch_over_our_stack_is_refused_naming_both_versions() {
    let mut sim = Sim::new(LinkConfig::default());
    let a = side(&sim, 0xa, IP_A);
    let b = side(&sim, 0xb, IP_B);
    sim.add(Box::new(a.stack.clone()));
    sim.add(Box::new(b.stack.clone()));
    b.stack
        .listen(
            SocketAddr::from((IP_B, PORT)),
            Arc::new(|_: &TcpConnection| Box::new(OtherVersion) as Box<dyn TcpHandler>),
        )
        .unwrap();
    let peer = Peer::new(LocalNode::new(NodeId(1), MessengerConfig::default()));
    a.stack
        .connect(SocketAddr::from((IP_B, PORT)), peer.handler())
        .unwrap();
    let mut call = peer.call(echo_id(), ECHO, Message::default());
    let refused = MessengerError::VersionMismatch { theirs: 2, ours: 1 };
    assert_eq!(
        finish(&mut sim, &mut call, Duration::from_secs(5)),
        Err(refused.clone())
    );
    assert_eq!(peer.state(), PeerState::Closed(refused));
}

/// Faults taken by [`Counter`].
static COUNTER_FAULTS: AtomicUsize = AtomicUsize::new(0);

/// An Ebb whose representative counts the messages it handled.
struct Counter;

struct CounterRep {
    handled: Cell<u32>,
}

impl Service for CounterRep {
    fn handle(&self, _request: Request) -> Result<Message, ServiceError> {
        self.handled.set(self.handled.get() + 1);
        let count = self.handled.get().to_le_bytes().to_vec();
        Ok(Message::payload(IoChain::from(IoBuf::from_vec(count))))
    }
}

impl Ebb for Counter {
    type Rep = CounterRep;

    fn fault(_ctx: &FaultContext<'_>) -> Result<&'static CounterRep, EbbError> {
        COUNTER_FAULTS.fetch_add(1, Ordering::SeqCst);
        Ok(Box::leak(Box::new(CounterRep {
            handled: Cell::new(0),
        })))
    }
}

/// An Ebb whose fault handler always fails.
struct Broken;

impl Ebb for Broken {
    type Rep = CounterRep;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static CounterRep, EbbError> {
        Err(EbbError::Unregistered(ctx.id))
    }
}

#[test]
fn the_receiving_nodes_fault_handler_builds_the_representative_once() {
    // The test thread is core 0 (both simulated nodes run on it).
    let _core = enter_core(CoreId(0), Node::standalone(1)).unwrap();
    let mut c = cluster();
    let node_b = NODE_B.with(|n| n.borrow().clone().unwrap());
    let counter = EbbRef::<Counter>::bind(EbbId::new(40_150).unwrap()).unwrap();
    let broken = EbbRef::<Broken>::bind(EbbId::new(40_151).unwrap()).unwrap();
    node_b.register_ebb(counter);
    node_b.register_ebb(broken);
    assert_eq!(
        COUNTER_FAULTS.load(Ordering::SeqCst),
        0,
        "no representative before a message"
    );
    for expected in 1..=3u32 {
        let mut call = c.to_b.call(counter.id(), ECHO, Message::default());
        let reply = finish(&mut c.sim, &mut call, Duration::from_secs(5)).unwrap();
        assert_eq!(reply.payload, *expected.to_le_bytes().as_slice());
    }
    assert_eq!(
        COUNTER_FAULTS.load(Ordering::SeqCst),
        1,
        "built once, on the first message"
    );
    let mut call = c.to_b.call(broken.id(), ECHO, Message::default());
    assert_eq!(
        finish(&mut c.sim, &mut call, Duration::from_secs(5)).unwrap_err(),
        MessengerError::NoRepresentative {
            node: NodeId(2),
            ebb: 40_151
        }
    );
}

/// Whether every view lies inside one of the `buffers` (sorted by start).
/// Freed frame buffers are reused, so recorded buffers may overlap: every
/// one starting at or before the view is a candidate.
fn all_inside(views: &[(usize, usize)], buffers: &[(usize, usize)]) -> bool {
    views.iter().all(|&(ptr, len)| {
        let at = buffers.partition_point(|&(start, _)| start <= ptr);
        buffers[..at]
            .iter()
            .rev()
            .any(|&(start, blen)| ptr + len <= start + blen)
    })
}

#[test]
fn payloads_from_1_byte_to_16_mib_arrive_intact_as_views_of_receive_buffers() {
    let mut c = cluster();
    for len in [1, 1000, 1460, 65_536, 1 << 20, 16 << 20] {
        c.echo.views.borrow_mut().clear();
        c.a.received.borrow_mut().clear();
        c.b.received.borrow_mut().clear();
        let sent = payload(len);
        let mut call = c.to_b.call(
            echo_id(),
            ECHO,
            Message::payload(IoChain::from(sent.clone())),
        );
        let reply = finish(&mut c.sim, &mut call, Duration::from_secs(60)).unwrap();
        assert!(reply.payload == *sent.as_slice(), "{len} bytes intact");
        // B's service saw views of the frames B's device received, and A's
        // reply is views of the frames A's device received: no copy on
        // receive on either node.
        assert!(
            !c.echo.views.borrow().is_empty(),
            "{len}: the service saw no payload"
        );
        let mut b_frames = c.b.received.borrow().clone();
        b_frames.sort_unstable();
        assert!(
            all_inside(&c.echo.views.borrow(), &b_frames),
            "{len}: the request was copied on receive"
        );
        let mut a_frames = c.a.received.borrow().clone();
        a_frames.sort_unstable();
        let reply_views: Vec<_> = reply
            .payload
            .segments()
            .map(|v| (v.as_ptr() as usize, v.len()))
            .collect();
        assert!(
            all_inside(&reply_views, &a_frames),
            "{len}: the reply was copied on receive"
        );
    }
}

/// One step of the property test.
#[derive(Clone, Debug)]
enum Op {
    /// Node 1 calls the current server: the echo Ebb, or an Ebb it lacks.
    Call { known: bool, len: usize },
    /// Time passes.
    Run { ms: u64 },
    /// The current server vanishes for good.
    Lose,
    /// A new server node joins (new stack, address and id) and node 1
    /// connects to it; later calls go there.
    Replace,
}

fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (any::<bool>(), 0usize..4000).prop_map(|(known, len)| Op::Call { known, len }),
        3 => (1u64..40).prop_map(|ms| Op::Run { ms }),
        1 => Just(Op::Lose),
        1 => Just(Op::Replace),
    ]
}

thread_local! {
    /// The server nodes of the property test, by generation.
    static SERVERS: RefCell<Vec<Rc<LocalNode>>> = const { RefCell::new(Vec::new()) };
}

/// A server generation: its stack, on a fresh address, serving the echo
/// Ebb, and node 1's peer connected to it.
struct Server {
    side: Side,
    peer: Rc<Peer>,
    lost: bool,
}

fn server(sim: &mut Sim, a: &Side, generation: usize) -> Server {
    let host = u8::try_from(generation + 2).unwrap();
    let ip = Ipv4Addr::new(10, 0, 0, host);
    let side = side(sim, host, ip);
    sim.add(Box::new(side.stack.clone()));
    let node = LocalNode::new(NodeId(u32::from(host)), MessengerConfig::default());
    node.register(echo_id(), Rc::new(Echo::default()));
    SERVERS.with(|s| s.borrow_mut().push(node));
    side.stack
        .listen(
            SocketAddr::from((ip, PORT)),
            Arc::new(move |conn: &TcpConnection| {
                let node = SERVERS.with(|s| s.borrow()[generation].clone());
                Peer::accept(node, conn).1
            }),
        )
        .unwrap();
    let peer = Peer::new(LocalNode::new(NodeId(1), MessengerConfig::default()));
    a.stack
        .connect(SocketAddr::from((ip, PORT)), peer.handler())
        .unwrap();
    Server {
        side,
        peer,
        lost: false,
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    #[test]
    fn every_call_completes_exactly_once_through_losses_and_replacements(
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        SERVERS.with(|s| s.borrow_mut().clear());
        let mut sim = Sim::new(LinkConfig {
            latency: Duration::from_micros(100),
            ..LinkConfig::default()
        });
        let a = side(&sim, 0xa, IP_A);
        sim.add(Box::new(a.stack.clone()));
        let mut servers = vec![server(&mut sim, &a, 0)];
        // (the call, its server's generation, whether the Ebb exists, the
        // payload sent, its outcome once polled ready)
        let mut calls = Vec::new();
        for op in ops {
            match op {
                Op::Call { known, len } => {
                    let generation = servers.len() - 1;
                    let ebb = if known { echo_id() } else { EbbId::new(40_199).unwrap() };
                    let sent = payload(len);
                    let call = servers[generation].peer.call(
                        ebb,
                        ECHO,
                        Message::payload(IoChain::from(sent.clone())),
                    );
                    calls.push((call, generation, known, sent, None));
                }
                Op::Run { ms } => sim.run_for(Duration::from_millis(ms)),
                Op::Lose => {
                    let current = servers.last_mut().unwrap();
                    current.side.vanished.set(true);
                    current.lost = true;
                }
                Op::Replace => {
                    let generation = servers.len();
                    servers.push(server(&mut sim, &a, generation));
                }
            }
            poll_all(&mut calls);
        }
        // Every call completes within bounded simulated time: replies from
        // live servers, errors once TCP gives up on lost ones.
        let mut waited = Duration::ZERO;
        while calls.iter().any(|c| c.4.is_none()) {
            proptest::prop_assert!(waited < Duration::from_secs(120), "calls still pending");
            sim.run_for(Duration::from_millis(20));
            waited += Duration::from_millis(20);
            poll_all(&mut calls);
        }
        for (_, generation, known, sent, outcome) in &calls {
            let lost = servers[*generation].lost;
            let node = NodeId(u32::try_from(*generation + 2).unwrap());
            match outcome.as_ref().unwrap() {
                Ok(reply) => {
                    proptest::prop_assert!(*known, "a reply from an Ebb that does not exist");
                    proptest::prop_assert!(reply.payload == *sent.as_slice());
                }
                Err(MessengerError::UnknownEbb { node: from, ebb: 40_199 }) => {
                    proptest::prop_assert!(!*known);
                    proptest::prop_assert_eq!(*from, node);
                }
                Err(MessengerError::ConnectionLost) => {
                    proptest::prop_assert!(lost, "a call to a live node failed");
                }
                Err(other) => proptest::prop_assert!(false, "unexpected error {other}"),
            }
        }
        for server in &servers {
            proptest::prop_assert_eq!(server.peer.pending_calls(), 0);
            proptest::prop_assert_eq!(server.peer.stray_replies(), 0);
        }
    }
}

type Tracked = (
    Call,
    usize,
    bool,
    IoBuf,
    Option<Result<Message, MessengerError>>,
);

/// Polls every call not yet complete, recording its outcome once.
fn poll_all(calls: &mut [Tracked]) {
    let mut cx = Context::from_waker(Waker::noop());
    for (call, _, _, _, outcome) in calls.iter_mut() {
        if outcome.is_none() {
            if let Poll::Ready(result) = pin!(call).poll(&mut cx) {
                *outcome = Some(result);
            }
        }
    }
}
