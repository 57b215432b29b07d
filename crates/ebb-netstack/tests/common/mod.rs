//! Shared pieces of the link and TCP tests: two stacks on a simulated wire, handlers
//! that record what they hear, a device spy, and a raw peer that speaks TCP
//! by hand (a small packetdrill).

#![allow(dead_code, clippy::cast_possible_truncation, clippy::type_complexity)]

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetError, NetStack, TcpConnection, TcpHandler};
use ebb_netstack::device::{Device, DeviceCapabilities};
use ebb_netstack::sim::{LinkConfig, Node, Sim, SimPort};
use ebb_netstack::tcp::segment::{self, Flags, OutSegment, Segment};
use ebb_netstack::tcp::{Seq, State, TcpConfig};
use ebb_netstack::{arp, ethernet, ipv4, Config, EthernetAddress, Instant, IpConfig, Stack};
use smoltcp::wire::{ArpOperation, ArpRepr, EthernetProtocol, IpProtocol};

pub const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa]);
pub const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);
pub const MAC_X: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xee]);
pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const IP_X: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);

pub fn sock(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(ip, port))
}

pub fn config(mac: EthernetAddress, addr: Ipv4Addr, tcp: TcpConfig) -> Config {
    let mut config = Config::new_static(
        mac,
        IpConfig {
            addr,
            prefix_len: 24,
            gateway: None,
        },
    );
    config.tcp = tcp;
    config
}

/// A TCP configuration for tests: a short minimum RTO, a trace.
pub fn test_tcp() -> TcpConfig {
    TcpConfig {
        min_rto: Duration::from_millis(200),
        trace_capacity: 1 << 20,
        ..TcpConfig::default()
    }
}

/// Two stacks A (10.0.0.1) and B (10.0.0.2) on one wire.
pub fn two_stacks(
    link: LinkConfig,
    tcp_a: TcpConfig,
    tcp_b: TcpConfig,
) -> (Sim, Stack<SimPort>, Stack<SimPort>) {
    // A new pair of stacks: forget connections accepted by earlier ones on
    // this thread (proptest runs its cases on one thread).
    ACCEPTED.with(|a| a.borrow_mut().clear());
    let mut sim = Sim::new(link);
    let a = Stack::new(sim.wire().port(), config(MAC_A, IP_A, tcp_a), sim.now());
    let b = Stack::new(sim.wire().port(), config(MAC_B, IP_B, tcp_b), sim.now());
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b.clone()));
    (sim, a, b)
}

/// What a handler heard.
#[derive(Default)]
pub struct Heard {
    pub connected: bool,
    pub data: Vec<u8>,
    /// Each `on_data` chain's segments: (address, length).
    pub views: Vec<(usize, usize)>,
    pub peer_closed: bool,
    pub aborted: Option<NetError>,
    pub credit_calls: usize,
    pub conn: Option<TcpConnection>,
    /// The stack dropped the handler.
    pub dropped: bool,
}

pub type Log = Rc<RefCell<Heard>>;

/// Records everything; closes its side when the peer does (if `close_back`);
/// sends `to_send` (buffered) once connected or accepted, then closes if
/// `close_after_send`.
pub struct Recorder {
    pub log: Log,
    pub close_back: bool,
    pub to_send: Option<IoChain>,
    pub close_after_send: bool,
    /// Pause receiving as soon as the connection starts.
    pub pause: bool,
    pub drop_flag: DropFlag,
}

impl Recorder {
    pub fn new(log: Log) -> Self {
        Recorder {
            drop_flag: DropFlag(log.clone()),
            log,
            close_back: true,
            to_send: None,
            close_after_send: false,
            pause: false,
        }
    }

    fn start(&mut self, conn: &TcpConnection) {
        self.log.borrow_mut().conn = Some(conn.clone());
        if self.pause {
            conn.pause_receive();
        }
        if let Some(data) = self.to_send.take() {
            conn.send_or_buffer(data).unwrap();
            if self.close_after_send {
                conn.close();
            }
        }
    }
}

/// Notes in its log when the handler holding it is dropped.
pub struct DropFlag(Log);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.borrow_mut().dropped = true;
    }
}

impl TcpHandler for Recorder {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.log.borrow_mut().connected = true;
        self.start(conn);
    }

    fn on_data(&mut self, _conn: &TcpConnection, data: IoChain) {
        let mut log = self.log.borrow_mut();
        for s in data.segments() {
            log.views.push((s.as_ptr() as usize, s.len()));
        }
        log.data.extend_from_slice(&data.to_vec());
    }

    fn on_send_credit(&mut self, _conn: &TcpConnection) {
        self.log.borrow_mut().credit_calls += 1;
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        self.log.borrow_mut().peer_closed = true;
        if self.close_back {
            conn.close();
        }
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, error: NetError) {
        self.log.borrow_mut().aborted = Some(error);
    }
}

thread_local! {
    /// Logs of accepted connections by listening port (each test runs on
    /// its own thread; the accept function must be `Send + Sync`).
    static ACCEPTED: RefCell<Vec<(u16, Log)>> = const { RefCell::new(Vec::new()) };
}

/// Listens on `port` of `stack`; each accepted connection gets a Recorder
/// built by `make`; [`accepted`] returns their logs.
pub fn listen_recording<D: Device + 'static>(
    stack: &Stack<D>,
    port: u16,
    make: impl Fn(Log) -> Recorder + Send + Sync + 'static,
) {
    let addr = stack
        .listen(
            sock(Ipv4Addr::UNSPECIFIED, port),
            Arc::new(move |conn: &TcpConnection| {
                let log = Log::default();
                ACCEPTED.with(|a| a.borrow_mut().push((port, log.clone())));
                let mut recorder = make(log);
                recorder.start(conn);
                Box::new(recorder) as Box<dyn TcpHandler>
            }),
        )
        .unwrap();
    assert_eq!(addr.port(), port);
}

/// The logs of connections accepted on `port` so far.
pub fn accepted(port: u16) -> Vec<Log> {
    ACCEPTED.with(|a| {
        a.borrow()
            .iter()
            .filter(|(p, _)| *p == port)
            .map(|(_, l)| l.clone())
            .collect()
    })
}

/// Deterministic test bytes.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ ((i >> 8) as u8))
        .collect()
}

/// `data` as a chain of buffers of `chunk` bytes.
pub fn chunks(data: &[u8], chunk: usize) -> IoChain {
    data.chunks(chunk).map(IoBuf::copy_from_slice).collect()
}

/// The state of the only connection of `stack`, if any.
pub fn only_state<D: Device + 'static>(stack: &Stack<D>) -> Option<State> {
    stack.tcp(|t| t.ids().first().and_then(|id| t.state(*id)))
}

/// A device that records where frame bytes live.
pub struct Spy<D> {
    pub inner: D,
    pub rx: Rc<RefCell<Vec<(usize, usize)>>>,
    pub tx: Rc<RefCell<Vec<Vec<(usize, usize)>>>>,
}

impl<D: Device> Device for Spy<D> {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        let frame = self.inner.receive(now)?;
        self.rx
            .borrow_mut()
            .push((frame.as_ptr() as usize, frame.len()));
        Some(frame)
    }
    fn transmit(&mut self, now: Instant, frame: IoChain) {
        self.tx.borrow_mut().push(
            frame
                .segments()
                .map(|s| (s.as_ptr() as usize, s.len()))
                .collect(),
        );
        self.inner.transmit(now, frame);
    }
    fn capabilities(&self) -> DeviceCapabilities {
        self.inner.capabilities()
    }
}

/// A hand-driven TCP peer X (10.0.0.9) on the wire: answers ARP, records
/// every TCP segment addressed to it, sends what the test tells it to.
pub struct RawPeer {
    pub port: SimPort,
    pub received: Vec<(Instant, Segment)>,
    pub now: Instant,
}

#[derive(Clone)]
pub struct Raw(pub Rc<RefCell<RawPeer>>);

impl Raw {
    pub fn new(sim: &mut Sim) -> Raw {
        let raw = Raw(Rc::new(RefCell::new(RawPeer {
            port: sim.wire().port(),
            received: Vec::new(),
            now: sim.now(),
        })));
        sim.add(Box::new(raw.clone()));
        raw
    }

    /// Sends `segment` from X to `dst_mac` (source/destination fields of
    /// the segment name the addresses).
    pub fn send(&self, dst_mac: EthernetAddress, segment: &OutSegment) {
        let mut inner = self.0.borrow_mut();
        let now = inner.now;
        let frame = tcp_frame(MAC_X, dst_mac, segment);
        inner
            .port
            .transmit(now, IoChain::from(IoBuf::from_vec(frame)));
    }

    pub fn take(&self) -> Vec<Segment> {
        self.0
            .borrow_mut()
            .received
            .drain(..)
            .map(|(_, s)| s)
            .collect()
    }
}

impl Node for Raw {
    fn poll(&mut self, now: Instant) -> bool {
        let mut inner = self.0.borrow_mut();
        inner.now = now;
        let mut any = false;
        while let Some(frame) = inner.port.receive(now) {
            any = true;
            let Ok(eth) = ethernet::parse(&frame, Some(MAC_X)) else {
                continue;
            };
            if eth.ethertype == EthernetProtocol::Arp {
                if let Ok(ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Request,
                    source_hardware_addr,
                    source_protocol_addr,
                    target_protocol_addr,
                    ..
                }) = arp::parse(&eth.payload)
                {
                    if target_protocol_addr == IP_X {
                        let reply = ArpRepr::EthernetIpv4 {
                            operation: ArpOperation::Reply,
                            source_hardware_addr: MAC_X,
                            source_protocol_addr: IP_X,
                            target_hardware_addr: source_hardware_addr,
                            target_protocol_addr: source_protocol_addr,
                        };
                        let mut out = vec![0u8; ethernet::HEADER_LEN + arp::PACKET_LEN];
                        ethernet::emit(
                            &mut out[..ethernet::HEADER_LEN],
                            MAC_X,
                            source_hardware_addr,
                            EthernetProtocol::Arp,
                        );
                        arp::emit(&mut out[ethernet::HEADER_LEN..], &reply);
                        inner
                            .port
                            .transmit(now, IoChain::from(IoBuf::from_vec(out)));
                    }
                }
                continue;
            }
            let Ok(ip) = ipv4::parse(&eth.payload, true) else {
                continue;
            };
            if ip.protocol != IpProtocol::Tcp || ip.dst != IP_X {
                continue;
            }
            if let Ok(seg) = segment::parse(&ip.payload, ip.src, ip.dst, true) {
                inner.received.push((now, seg));
            }
        }
        any
    }

    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

/// A whole Ethernet/IPv4/TCP frame in one buffer.
pub fn tcp_frame(src_mac: EthernetAddress, dst_mac: EthernetAddress, seg: &OutSegment) -> Vec<u8> {
    let header = seg.emit_header(0, false);
    let tcp_len = header.len() + seg.payload.len();
    let mut frame = vec![0u8; ethernet::HEADER_LEN + ipv4::HEADER_LEN];
    ethernet::emit(
        &mut frame[..ethernet::HEADER_LEN],
        src_mac,
        dst_mac,
        EthernetProtocol::Ipv4,
    );
    ipv4::emit(
        &mut frame[ethernet::HEADER_LEN..],
        &ipv4::Header {
            src: seg.src.0,
            dst: seg.dst.0,
            protocol: IpProtocol::Tcp,
            ident: 0,
            payload_len: tcp_len as u16,
        },
    );
    frame.extend_from_slice(header.as_slice());
    frame.extend_from_slice(&seg.payload.to_vec());
    frame
}

/// A segment from X:`from_port` to `to`.
pub fn from_x(
    from_port: u16,
    to: (Ipv4Addr, u16),
    seq: u32,
    ack: Option<u32>,
    flags: Flags,
) -> OutSegment {
    OutSegment {
        src: (IP_X, from_port),
        dst: to,
        seq: Seq(seq),
        ack: Seq(ack.unwrap_or(0)),
        flags: Flags {
            ack: ack.is_some(),
            ..flags
        },
        window: 65_535,
        ..OutSegment::default()
    }
}

pub const SYN: Flags = Flags {
    syn: true,
    ack: false,
    fin: false,
    rst: false,
    psh: false,
};
pub const RST: Flags = Flags {
    syn: false,
    ack: false,
    fin: false,
    rst: true,
    psh: false,
};
pub const NONE: Flags = Flags {
    syn: false,
    ack: false,
    fin: false,
    rst: false,
    psh: false,
};
pub const FIN: Flags = Flags {
    syn: false,
    ack: false,
    fin: true,
    rst: false,
    psh: false,
};

/// Runs the simulation for `ms` milliseconds.
pub fn run_ms(sim: &mut Sim, ms: u64) {
    sim.run_for(Duration::from_millis(ms));
}

/// A connects to the raw peer X:80; returns A's ISS and A's port.
pub fn connect_to_raw<D: Device + 'static>(
    sim: &mut Sim,
    a: &Stack<D>,
    raw: &Raw,
    log: &Log,
) -> (u32, u16) {
    a.connect(sock(IP_X, 80), Box::new(Recorder::new(log.clone())))
        .unwrap();
    run_ms(sim, 1);
    let syn = raw.take();
    assert_eq!(syn.len(), 1);
    assert!(syn[0].flags.syn && !syn[0].flags.ack);
    (syn[0].seq.0, syn[0].src_port)
}

/// Completes a handshake with the raw peer by hand; returns (A's port,
/// A's next sequence number, X's next sequence number).
pub fn establish_with_raw<D: Device + 'static>(
    sim: &mut Sim,
    a: &Stack<D>,
    raw: &Raw,
    log: &Log,
) -> (u16, u32, u32) {
    let (iss, port) = connect_to_raw(sim, a, raw, log);
    let x_iss = 1_000_000u32;
    let mut synack = from_x(
        80,
        (IP_A, port),
        x_iss,
        Some(iss.wrapping_add(1)),
        Flags { syn: true, ..NONE },
    );
    synack.mss = Some(1000);
    raw.send(MAC_A, &synack);
    run_ms(sim, 1);
    let ack = raw.take();
    assert_eq!(ack.len(), 1);
    assert!(ack[0].flags.ack && !ack[0].flags.syn);
    assert_eq!(ack[0].ack.0, x_iss + 1);
    assert_eq!(only_state(a), Some(State::Established));
    (port, iss.wrapping_add(1), x_iss + 1)
}

/// The result of [`transfer`].
pub struct Transfer {
    pub sim: Sim,
    pub a: Stack<SimPort>,
    pub b: Stack<SimPort>,
    pub client: Log,
    pub server: Log,
}

/// A connects to B:80; A sends `up`, B sends `down` (both buffered in
/// chunks, then closed); runs until both streams and both FINs arrived or
/// `max` simulated time passed.
pub fn transfer(
    link: LinkConfig,
    tcp_a: TcpConfig,
    tcp_b: TcpConfig,
    up: &[u8],
    down: &[u8],
    max: Duration,
) -> Transfer {
    let (mut sim, a, b) = two_stacks(link, tcp_a, tcp_b);
    let down_data = down.to_vec();
    listen_recording(&b, 80, move |log| Recorder {
        to_send: Some(chunks(&down_data, 16_384)),
        close_after_send: true,
        ..Recorder::new(log)
    });
    let client = Log::default();
    a.connect(
        sock(IP_B, 80),
        Box::new(Recorder {
            to_send: Some(chunks(up, 10_000)),
            close_after_send: true,
            ..Recorder::new(client.clone())
        }),
    )
    .unwrap();
    let step = Duration::from_millis(100);
    let mut elapsed = Duration::ZERO;
    let server = loop {
        sim.run_for(step);
        elapsed += step;
        let server = accepted(80).first().cloned();
        let done = server.as_ref().is_some_and(|s| {
            let s = s.borrow();
            let c = client.borrow();
            s.peer_closed && c.peer_closed && s.data.len() == up.len() && c.data.len() == down.len()
        });
        if done || elapsed >= max {
            break server.unwrap_or_default();
        }
    };
    Transfer {
        sim,
        a,
        b,
        client,
        server,
    }
}

/// Asserts both streams arrived intact and both sides closed.
pub fn assert_intact(t: &Transfer, up: &[u8], down: &[u8]) {
    let server = t.server.borrow();
    let client = t.client.borrow();
    assert_eq!(server.data.len(), up.len(), "A → B length");
    assert!(server.data == up, "A → B bytes");
    assert_eq!(client.data.len(), down.len(), "B → A length");
    assert!(client.data == down, "B → A bytes");
    assert!(
        server.peer_closed && client.peer_closed,
        "both FINs arrived"
    );
    assert!(server.aborted.is_none() && client.aborted.is_none());
}
