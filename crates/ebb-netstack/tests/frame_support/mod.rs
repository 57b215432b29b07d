//! What the `frame` fuzz target (`fuzz/fuzz_targets/frame.rs`) and its
//! corpus replay on stable (`tests/frame_fuzz_corpus.rs`) share: an input
//! is a sequence of Ethernet frames, each with a 2-byte big-endian length
//! in front (a final frame whose length runs past the input gets what is
//! left). Every frame goes to two stacks — one with a static address and a
//! UDP echo socket, one a DHCP client — with simulated time moving 1 ms
//! per frame, so timers (ARP retries, DHCP retransmissions) run too.
//!
//! Checks: nothing panics; the ARP cache and the queue of packets waiting
//! for resolution stay within their limits; every frame the stacks send is
//! well-formed (lengths and checksums right), whatever they received.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetStack, UdpHandler, UdpSocket};
use ebb_netstack::device::{Device, DeviceCapabilities};
use ebb_netstack::{Config, EthernetAddress, Instant, IpConfig, Stack};
use smoltcp::wire::{
    ArpPacket, ArpRepr, EthernetFrame, EthernetProtocol, Icmpv4Packet, IpAddress, IpProtocol,
    Ipv4Packet, UdpPacket,
};

/// The static stack's Ethernet and IPv4 addresses, and its echo port.
pub const US_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);
/// See [`US_MAC`].
pub const US_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// See [`US_MAC`].
pub const ECHO_PORT: u16 = 7;
/// The DHCP client's Ethernet address.
pub const DHCP_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xd]);

/// Splits an input into frames (see the module's documentation).
pub fn split_frames(mut data: &[u8]) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    while let [high, low, rest @ ..] = data {
        let len = usize::from(u16::from_be_bytes([*high, *low]));
        let (frame, next) = rest.split_at(len.min(rest.len()));
        frames.push(frame);
        data = next;
    }
    frames
}

/// Joins frames into an input (the inverse of [`split_frames`]).
pub fn join_frames(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut data = Vec::new();
    for frame in frames {
        let len = u16::try_from(frame.len()).expect("a frame under 64 KiB");
        data.extend_from_slice(&len.to_be_bytes());
        data.extend_from_slice(frame);
    }
    data
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

struct Echo;

impl UdpHandler for Echo {
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        let _ = socket.send_to(from, IoChain::from(data));
    }
}

/// What one input did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Frames delivered to each stack.
    pub frames: usize,
    /// Frames the stacks sent (all checked well-formed).
    pub sent: Vec<Vec<u8>>,
    /// Datagrams the echo socket received.
    pub udp_delivered: u64,
    /// Echo requests the static stack answered.
    pub echo_replies_sent: u64,
}

/// Runs `data` through both stacks and checks the invariants (panics if
/// one fails, as a fuzz target must).
pub fn run(data: &[u8]) -> Outcome {
    let sent = Rc::new(RefCell::new(Vec::new()));
    let inbox_static = Frames::default();
    let inbox_dhcp = Frames::default();
    let mut now = Instant(1_000_000_000);
    let device = |inbox: &Frames| Replay {
        inbox: Rc::clone(inbox),
        sent: Rc::clone(&sent),
    };
    let ip = IpConfig {
        addr: US_IP,
        prefix_len: 24,
        gateway: Some(Ipv4Addr::new(10, 0, 0, 1)),
    };
    let fixed = Stack::new(device(&inbox_static), Config::new_static(US_MAC, ip), now);
    fixed
        .udp_bind(SocketAddr::from((US_IP, ECHO_PORT)), Box::new(Echo))
        .expect("bind the echo port");
    let dhcp = Stack::new(device(&inbox_dhcp), Config::new_dhcp(DHCP_MAC, 7), now);
    let frames = split_frames(data);
    for frame in &frames {
        let frame = IoBuf::copy_from_slice(frame);
        inbox_static.borrow_mut().push_back(frame.clone());
        inbox_dhcp.borrow_mut().push_back(frame);
        fixed.poll(now);
        dhcp.poll(now);
        for stack in [&fixed, &dhcp] {
            let (entries, pending) = stack.arp_sizes();
            assert!(entries <= 64, "ARP cache grew to {entries}");
            assert!(pending <= 32, "ARP queue grew to {pending}");
        }
        now = now + Duration::from_millis(1);
    }
    let sent = sent.take();
    for frame in &sent {
        if let Err(why) = check_sent(frame) {
            panic!("the stack sent a bad frame ({why}): {frame:02x?}");
        }
    }
    Outcome {
        frames: frames.len(),
        sent,
        udp_delivered: fixed.stats().udp_delivered,
        echo_replies_sent: fixed.stats().echo_replies_sent,
    }
}

/// Whether a frame the stack sent is well-formed: Ethernet II carrying a
/// valid ARP packet, or IPv4 whose lengths and checksums (header, UDP,
/// ICMP) are right.
pub fn check_sent(frame: &[u8]) -> Result<(), String> {
    if frame.len() > 1514 {
        return Err(format!(
            "{} bytes: longer than MTU 1500 allows",
            frame.len()
        ));
    }
    let eth = EthernetFrame::new_checked(frame).map_err(|_| "short Ethernet header")?;
    match eth.ethertype() {
        EthernetProtocol::Arp => {
            let arp = ArpPacket::new_checked(eth.payload()).map_err(|_| "short ARP")?;
            ArpRepr::parse(&arp).map_err(|_| "bad ARP")?;
            Ok(())
        }
        EthernetProtocol::Ipv4 => check_ipv4(eth.payload()),
        other => Err(format!("ethertype {other}")),
    }
}

fn check_ipv4(packet: &[u8]) -> Result<(), String> {
    let ip = Ipv4Packet::new_checked(packet).map_err(|_| "short or inconsistent IPv4")?;
    if usize::from(ip.total_len()) != packet.len() {
        return Err("IPv4 total length differs from the frame".into());
    }
    if !ip.verify_checksum() {
        return Err("IPv4 header checksum".into());
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        return Err("a fragment".into());
    }
    let (src, dst) = (
        IpAddress::Ipv4(ip.src_addr()),
        IpAddress::Ipv4(ip.dst_addr()),
    );
    match ip.next_header() {
        IpProtocol::Udp => {
            let udp = UdpPacket::new_checked(ip.payload()).map_err(|_| "short UDP")?;
            if usize::from(udp.len()) != ip.payload().len() {
                return Err("UDP length differs from IPv4's".into());
            }
            if udp.checksum() != 0 && !udp.verify_checksum(&src, &dst) {
                return Err("UDP checksum".into());
            }
            Ok(())
        }
        IpProtocol::Icmp => {
            let icmp = Icmpv4Packet::new_checked(ip.payload()).map_err(|_| "short ICMP")?;
            if !icmp.verify_checksum() {
                return Err("ICMP checksum".into());
            }
            Ok(())
        }
        other => Err(format!("IP protocol {other}")),
    }
}
