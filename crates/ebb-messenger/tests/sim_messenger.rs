//! Two nodes in one process, each on its own Ebbflow TCP/IP stack, talking
//! through the Messenger over the simulated link (`ebb_netstack::sim`, a
//! seeded clock, no root): call and reply, an unknown Ebb, a version
//! mismatch, a peer that vanishes mid-call, and payloads of 1 B to 16 MiB
//! that arrive as views into the receiving device's frame buffers.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use ebb_core::{EbbId, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{
    Call, Config as MessengerConfig, Header, Hello, Kind, Limits, LocalNode, Message,
    MessageNumber, MessengerError, Peer, PeerState, Request, Service, ServiceError,
};
use ebb_net::{NetStack, TcpConnection, TcpHandler};
use ebb_netstack::device::{Device, DeviceCapabilities};
use ebb_netstack::sim::{LinkConfig, Sim, SimPort};
use ebb_netstack::tcp::TcpConfig;
use ebb_netstack::{Config, EthernetAddress, Instant, IpConfig, Stack};

const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 7100;
const ECHO: MessageNumber = MessageNumber(1);

fn echo_id() -> EbbId {
    EbbId::new(40_100).unwrap()
}

/// Echoes message 1 and records where its payload's views point.
#[derive(Default)]
struct Echo {
    views: RefCell<Vec<(usize, usize)>>,
}

impl Service for Echo {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        if request.message != ECHO {
            return Err(ServiceError::UnknownMessage);
        }
        self.views.borrow_mut().extend(
            request
                .body
                .payload
                .segments()
                .map(|v| (v.as_ptr() as usize, v.len())),
        );
        Ok(request.body)
    }
}

/// The simulated port, recording where received frames live and going
/// silent (both ways) when told to: a node that vanished.
struct Port {
    inner: SimPort,
    received: Rc<RefCell<Vec<(usize, usize)>>>,
    vanished: Rc<Cell<bool>>,
}

impl Device for Port {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        let frame = self.inner.receive(now)?;
        if self.vanished.get() {
            return None;
        }
        self.received
            .borrow_mut()
            .push((frame.as_ptr() as usize, frame.len()));
        Some(frame)
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        if !self.vanished.get() {
            self.inner.transmit(now, frame);
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.inner.capabilities()
    }
}

struct Side {
    stack: Stack<Port>,
    received: Rc<RefCell<Vec<(usize, usize)>>>,
    vanished: Rc<Cell<bool>>,
}

fn side(sim: &Sim, mac: u8, addr: Ipv4Addr) -> Side {
    let received = Rc::new(RefCell::new(Vec::new()));
    let vanished = Rc::new(Cell::new(false));
    let port = Port {
        inner: sim.wire().port(),
        received: received.clone(),
        vanished: vanished.clone(),
    };
    let mut config = Config::new_static(
        EthernetAddress([2, 0, 0, 0, 0, mac]),
        IpConfig {
            addr,
            prefix_len: 24,
            gateway: None,
        },
    );
    config.tcp = TcpConfig {
        min_rto: Duration::from_millis(200),
        max_retries: 4,
        ..TcpConfig::default()
    };
    Side {
        stack: Stack::new(port, config, sim.now()),
        received,
        vanished,
    }
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
                let peer = Peer::new(node);
                peer.attach(conn.clone());
                ACCEPTED.with(|a| a.borrow_mut().push(peer.clone()));
                peer.handler()
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
        let header = Header {
            kind: Kind::Hello,
            destination: 0,
            message: MessageNumber(0),
            source: NodeId(9),
            correlation: 0,
            control_len: u32::try_from(Hello::LEN).unwrap(),
            payload_len: 0,
        };
        let mut bytes = header.encode_as(2).to_vec();
        bytes.extend_from_slice(
            &Hello {
                limits: Limits::DEFAULT,
            }
            .encode(),
        );
        let _ = conn.send(IoChain::from(IoBuf::from_vec(bytes)));
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
