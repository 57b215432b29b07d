//! What the `segment` fuzz target (`fuzz/fuzz_targets/segment.rs`) and its
//! corpus replay on stable (`tests/segment_fuzz_corpus.rs`) share. An
//! input is a sequence of records, each `[control][advance][len: u16 BE]`
//! followed by `len` bytes of TCP header and payload (a final record whose
//! length runs past the input gets what is left). Each record becomes a
//! frame from peer 10.0.0.1 to our stack at 10.0.0.2 with the IPv4 header
//! and — unless `control` has [`BAD_CHECKSUM`] — the TCP checksum filled
//! in, so the fuzzer reaches TCP's logic instead of the checksum check.
//! With [`ACK_RELATIVE`], the acknowledgment field is an offset from our
//! ISS + 1 for that port pair (learned from the last SYN we sent on it), so
//! inputs can complete handshakes; with [`TO_ACTIVE`] the destination port
//! becomes that of our active connection. After each frame simulated time moves
//! by `advance` milliseconds (×64 with [`LONG_ADVANCE`]), so
//! retransmission, delayed-ACK, TIME-WAIT and persist timers run too.
//!
//! Our stack listens on port 80 with an echo handler (it closes when the
//! peer does), on port 81 with a handler that never reads (its window
//! stays shut), and has one connection open to the peer's port 90.
//!
//! Checks: nothing panics; the connection table stays within its limit
//! (a SYN flood cannot grow it); every frame our stack sends is well-formed
//! (lengths, IPv4 and TCP checksums right, never SYN with RST).

use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetStack, TcpConnection, TcpHandler};
use ebb_netstack::device::{Device, DeviceCapabilities};
use ebb_netstack::tcp::{TcpConfig, TcpStats};
use ebb_netstack::{arp, ethernet, ipv4, Config, EthernetAddress, Instant, IpConfig, Stack};
use smoltcp::wire::{
    ArpOperation, ArpRepr, EthernetFrame, EthernetProtocol, IpAddress, IpProtocol, Ipv4Packet,
    TcpPacket,
};

/// Our stack's addresses.
pub const US_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);
/// See [`US_MAC`].
pub const US_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The peer's addresses.
pub const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa]);
/// See [`PEER_MAC`].
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The echo listener's port.
pub const ECHO_PORT: u16 = 80;
/// The port of the listener whose connections never read.
pub const DEAF_PORT: u16 = 81;
/// The peer's port our active connection goes to.
pub const PEER_PORT: u16 = 90;
/// The connection table's limit in the fuzzed stack.
pub const MAX_CONNECTIONS: usize = 16;
/// `control` bit: the ACK field is relative to our ISS + 1.
pub const ACK_RELATIVE: u8 = 1;
/// `control` bit: leave the TCP checksum as the input has it.
pub const BAD_CHECKSUM: u8 = 2;
/// `control` bit: `advance` counts units of 64 ms.
pub const LONG_ADVANCE: u8 = 4;
/// `control` bit: the destination port becomes our active connection's
/// (ephemeral) port, so inputs can answer its SYN.
pub const TO_ACTIVE: u8 = 8;

/// One record of an input.
#[derive(Clone, Debug)]
pub struct Record {
    /// Bits [`ACK_RELATIVE`], [`BAD_CHECKSUM`], [`LONG_ADVANCE`],
    /// [`TO_ACTIVE`].
    pub control: u8,
    /// Milliseconds to move time by after the frame.
    pub advance: u8,
    /// TCP header and payload.
    pub tcp: Vec<u8>,
}

/// Splits an input into records (see the module's documentation).
pub fn split_records(mut data: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    while let [control, advance, high, low, rest @ ..] = data {
        let len = usize::from(u16::from_be_bytes([*high, *low]));
        let (tcp, next) = rest.split_at(len.min(rest.len()));
        records.push(Record {
            control: *control,
            advance: *advance,
            tcp: tcp.to_vec(),
        });
        data = next;
    }
    records
}

/// Joins records into an input (the inverse of [`split_records`]).
pub fn join_records(records: &[Record]) -> Vec<u8> {
    let mut data = Vec::new();
    for record in records {
        let len = u16::try_from(record.tcp.len()).expect("a segment under 64 KiB");
        data.extend_from_slice(&[record.control, record.advance]);
        data.extend_from_slice(&len.to_be_bytes());
        data.extend_from_slice(&record.tcp);
    }
    data
}

/// TCP flag bits (RFC 9293 §3.1).
pub mod flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
}

/// A TCP segment as the peer sends it: header fields, options (padded to
/// 4 bytes) and payload; the checksum is left zero for the harness.
#[derive(Clone, Debug, Default)]
pub struct Seg<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flag bits ([`flags`]).
    pub flags: u8,
    /// Window.
    pub window: u16,
    /// Raw option bytes.
    pub options: &'a [u8],
    /// Payload.
    pub payload: &'a [u8],
}

impl Seg<'_> {
    /// The segment's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let header_len = 20 + self.options.len().div_ceil(4) * 4;
        let mut segment = vec![0u8; header_len];
        segment[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        segment[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        segment[4..8].copy_from_slice(&self.seq.to_be_bytes());
        segment[8..12].copy_from_slice(&self.ack.to_be_bytes());
        segment[12] = u8::try_from(header_len / 4).expect("a short header") << 4;
        segment[13] = self.flags;
        segment[14..16].copy_from_slice(&self.window.to_be_bytes());
        segment[20..20 + self.options.len()].copy_from_slice(self.options);
        segment.extend_from_slice(self.payload);
        segment
    }
}

type Frames = Rc<RefCell<VecDeque<IoBuf>>>;

/// A device fed from a queue, recording what is sent.
struct Replay {
    inbox: Frames,
    sent: Rc<RefCell<Vec<Vec<u8>>>>,
}

impl Device for Replay {
    fn receive(&mut self, _now: Instant) -> Option<IoBuf> {
        self.inbox.borrow_mut().pop_front()
    }

    fn transmit(&mut self, _now: Instant, frame: IoChain) {
        self.sent.borrow_mut().push(frame.iter_bytes().collect());
    }

    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities::default()
    }
}

/// Echoes what arrives; closes when the peer does (the default).
struct Echo;

impl TcpHandler for Echo {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        if conn.send_or_buffer(data).is_err() {
            conn.abort();
        }
    }
}

/// Never reads: shuts its window at once and keeps what arrived.
struct Deaf(Vec<IoChain>);

impl TcpHandler for Deaf {
    fn on_connected(&mut self, conn: &TcpConnection) {
        conn.pause_receive();
    }

    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        conn.pause_receive();
        self.0.push(data);
    }
}

/// What one input did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Frames our stack sent (all checked well-formed).
    pub sent: Vec<Vec<u8>>,
    /// The most connections the table held.
    pub most_connections: usize,
    /// TCP counters at the end.
    pub stats: TcpStats,
}

fn peer_arp_reply() -> Vec<u8> {
    let mut frame = vec![0u8; ethernet::HEADER_LEN + arp::PACKET_LEN];
    let (eth, body) = frame.split_at_mut(ethernet::HEADER_LEN);
    ethernet::emit(eth, PEER_MAC, US_MAC, EthernetProtocol::Arp);
    arp::emit(
        body,
        &ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: PEER_MAC,
            source_protocol_addr: PEER_IP,
            target_hardware_addr: US_MAC,
            target_protocol_addr: US_IP,
        },
    );
    frame
}

/// The frame carrying `record` (see the module's documentation).
fn frame_of(record: &Record, our_iss: &BTreeMap<(u16, u16), u32>, active_port: u16) -> Vec<u8> {
    let mut tcp = record.tcp.clone();
    if record.control & TO_ACTIVE != 0 && tcp.len() >= 4 {
        tcp[2..4].copy_from_slice(&active_port.to_be_bytes());
    }
    if record.control & ACK_RELATIVE != 0 && tcp.len() >= 12 {
        let src_port = u16::from_be_bytes([tcp[0], tcp[1]]);
        let dst_port = u16::from_be_bytes([tcp[2], tcp[3]]);
        if let Some(iss) = our_iss.get(&(dst_port, src_port)) {
            let offset = u32::from_be_bytes([tcp[8], tcp[9], tcp[10], tcp[11]]);
            let ack = iss.wrapping_add(1).wrapping_add(offset);
            tcp[8..12].copy_from_slice(&ack.to_be_bytes());
        }
    }
    if record.control & BAD_CHECKSUM == 0 && tcp.len() >= 20 {
        let mut packet = TcpPacket::new_unchecked(&mut tcp[..]);
        packet.fill_checksum(&IpAddress::Ipv4(PEER_IP), &IpAddress::Ipv4(US_IP));
    }
    let mut frame = vec![0u8; ethernet::HEADER_LEN + ipv4::HEADER_LEN];
    let (eth, ip) = frame.split_at_mut(ethernet::HEADER_LEN);
    ethernet::emit(eth, PEER_MAC, US_MAC, EthernetProtocol::Ipv4);
    ipv4::emit(
        ip,
        &ipv4::Header {
            src: PEER_IP,
            dst: US_IP,
            protocol: IpProtocol::Tcp,
            ident: 1,
            payload_len: u16::try_from(tcp.len()).unwrap_or(u16::MAX),
        },
    );
    frame.extend_from_slice(&tcp);
    frame
}

/// Runs `data` through the stack and checks the invariants (panics if one
/// fails, as a fuzz target must).
pub fn run(data: &[u8]) -> Outcome {
    let sent = Rc::new(RefCell::new(Vec::new()));
    let inbox = Frames::default();
    let mut now = Instant(1_000_000_000);
    let mut config = Config::new_static(
        US_MAC,
        IpConfig {
            addr: US_IP,
            prefix_len: 24,
            gateway: None,
        },
    );
    config.tcp = TcpConfig {
        max_connections: MAX_CONNECTIONS,
        syn_backlog: 4,
        recv_buffer: 64 << 10,
        max_out_of_order: 8,
        ..TcpConfig::default()
    };
    let device = Replay {
        inbox: Rc::clone(&inbox),
        sent: Rc::clone(&sent),
    };
    let stack = Stack::new(device, config, now);
    inbox
        .borrow_mut()
        .push_back(IoBuf::copy_from_slice(&peer_arp_reply()));
    stack.poll(now);
    let ours = |port| SocketAddr::from((US_IP, port));
    stack
        .listen(
            ours(ECHO_PORT),
            Arc::new(|_: &TcpConnection| Box::new(Echo) as Box<dyn TcpHandler>),
        )
        .expect("listen on the echo port");
    stack
        .listen(
            ours(DEAF_PORT),
            Arc::new(|_: &TcpConnection| Box::new(Deaf(Vec::new())) as Box<dyn TcpHandler>),
        )
        .expect("listen on the deaf port");
    let active = stack
        .connect(SocketAddr::from((PEER_IP, PEER_PORT)), Box::new(Echo))
        .expect("connect to the peer");
    stack.poll(now);
    let active_port = active.local_addr().port();
    let mut our_iss = BTreeMap::new();
    let mut most_connections = 0;
    let records = split_records(data);
    for record in &records {
        learn_iss(&sent.borrow(), &mut our_iss);
        inbox
            .borrow_mut()
            .push_back(IoBuf::copy_from_slice(&frame_of(
                record,
                &our_iss,
                active_port,
            )));
        stack.poll(now);
        let unit = if record.control & LONG_ADVANCE != 0 {
            64
        } else {
            1
        };
        now = now + Duration::from_millis(u64::from(record.advance) * unit);
        stack.poll(now);
        let connections = stack.tcp(|tcp| tcp.len());
        assert!(
            connections <= MAX_CONNECTIONS,
            "the table grew to {connections} connections"
        );
        most_connections = most_connections.max(connections);
    }
    // A send and a close on the active connection, whatever its state.
    let _ = active.send_or_buffer(IoChain::from(IoBuf::from_static(b"late")));
    active.close();
    now = now + Duration::from_secs(5);
    stack.poll(now);
    let sent = sent.take();
    for frame in &sent {
        if let Err(why) = check_sent(frame) {
            panic!("the stack sent a bad frame ({why}): {frame:02x?}");
        }
    }
    Outcome {
        sent,
        most_connections,
        stats: stack.tcp(|tcp| tcp.stats()),
    }
}

/// Notes the ISS of every SYN our stack sent (SYN or SYN,ACK), by port
/// pair (ours, the peer's); a later SYN on a pair replaces an earlier one.
fn learn_iss(frames: &[Vec<u8>], our_iss: &mut BTreeMap<(u16, u16), u32>) {
    for tcp in frames.iter().filter_map(|frame| tcp_of(frame)) {
        if tcp.syn() {
            let ports = (tcp.src_port(), tcp.dst_port());
            let iss = u32::from_be_bytes(tcp.into_inner()[4..8].try_into().expect("4 bytes"));
            our_iss.insert(ports, iss);
        }
    }
}

/// The TCP segment in one of our frames, if it carries one.
pub fn tcp_of(frame: &[u8]) -> Option<TcpPacket<&[u8]>> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let payload = eth.payload();
    let ip = Ipv4Packet::new_checked(payload).ok()?;
    if ip.next_header() != IpProtocol::Tcp {
        return None;
    }
    let start = usize::from(ip.header_len());
    let end = usize::from(ip.total_len()).min(payload.len());
    TcpPacket::new_checked(payload.get(start..end)?).ok()
}

/// Whether a frame our stack sent is well-formed: Ethernet II with an ARP
/// packet, or IPv4 carrying TCP whose lengths and checksums are right.
pub fn check_sent(frame: &[u8]) -> Result<(), String> {
    if frame.len() > 1514 {
        return Err(format!(
            "{} bytes: longer than MTU 1500 allows",
            frame.len()
        ));
    }
    let eth = EthernetFrame::new_checked(frame).map_err(|_| "short Ethernet header")?;
    match eth.ethertype() {
        EthernetProtocol::Arp => Ok(()),
        EthernetProtocol::Ipv4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).map_err(|_| "short IPv4")?;
            if usize::from(ip.total_len()) != eth.payload().len() {
                return Err("IPv4 total length differs from the frame".into());
            }
            if !ip.verify_checksum() {
                return Err("IPv4 header checksum".into());
            }
            if ip.next_header() != IpProtocol::Tcp {
                return Err(format!("IP protocol {}", ip.next_header()));
            }
            let tcp = TcpPacket::new_checked(ip.payload()).map_err(|_| "short TCP")?;
            let (src, dst) = (
                IpAddress::Ipv4(ip.src_addr()),
                IpAddress::Ipv4(ip.dst_addr()),
            );
            if !tcp.verify_checksum(&src, &dst) {
                return Err("TCP checksum".into());
            }
            if tcp.rst() && tcp.syn() {
                return Err("SYN and RST together".into());
            }
            Ok(())
        }
        other => Err(format!("ethertype {other}")),
    }
}
