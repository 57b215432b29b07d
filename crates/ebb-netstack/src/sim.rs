//! A simulated link: stacks (and a DHCP server) in one process on a
//! simulated clock, joined by a wire with programmable loss, duplication,
//! reordering, delay and bandwidth — deterministic for a given seed.
//!
//! The wire is a broadcast medium (a hub): a frame sent by one port is
//! offered to every other port, each with its own fault stream; stacks
//! filter by Ethernet address. Serialization at the configured bandwidth
//! makes frames from one port leave one after another; latency and the
//! faults' delays come on top. [`Sim`] owns the nodes and steps time from
//! event to event (the next frame due, the next timer), so long simulated
//! times cost nothing while idle.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::net::Ipv4Addr;
use core::time::Duration;

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use smoltcp::wire::{
    ArpOperation, ArpRepr, DhcpMessageType, DhcpPacket, DhcpRepr, EthernetAddress,
    EthernetProtocol, IpProtocol,
};

use crate::device::fault::Faults;
use crate::device::{Device, DeviceCapabilities, FaultConfig, FaultStats};
use crate::{arp, dhcp, ethernet, ipv4, udp, Stack};

/// The wire's behaviour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkConfig {
    /// Faults applied to each frame on its way to each receiving port (the
    /// seed is mixed with the port number).
    pub faults: FaultConfig,
    /// Propagation delay.
    pub latency: Duration,
    /// Bits per second each port can send; 0 means unlimited.
    pub bandwidth_bps: u64,
}

struct PortState {
    rx: Faults,
    busy_until: Instant,
    sent: u64,
}

struct WireInner {
    config: LinkConfig,
    ports: Vec<PortState>,
    /// Multi-segment frames gathered into one receive buffer by the wire
    /// (the simulated DMA; the stack itself never copies payloads).
    gathered: u64,
}

/// The wire; cheap to clone (a handle).
#[derive(Clone)]
pub struct SimWire {
    inner: Rc<RefCell<WireInner>>,
}

impl SimWire {
    /// A wire with no ports yet.
    #[must_use]
    pub fn new(config: LinkConfig) -> Self {
        SimWire {
            inner: Rc::new(RefCell::new(WireInner {
                config,
                ports: Vec::new(),
                gathered: 0,
            })),
        }
    }

    /// Plugs in a new port.
    #[must_use]
    pub fn port(&self) -> SimPort {
        let mut inner = self.inner.borrow_mut();
        let index = inner.ports.len();
        let mut faults = inner.config.faults;
        faults.seed = faults.seed.wrapping_add(
            0x1000_0000_0000_0001u64.wrapping_mul(u64::try_from(index).unwrap_or(0) + 1),
        );
        inner.ports.push(PortState {
            rx: Faults::new(faults),
            busy_until: Instant(0),
            sent: 0,
        });
        SimPort {
            wire: self.inner.clone(),
            index,
        }
    }

    /// When the next frame is due at some port.
    #[must_use]
    pub fn next_delivery(&self) -> Option<Instant> {
        self.inner
            .borrow()
            .ports
            .iter()
            .filter_map(|p| p.rx.next_release())
            .min()
    }

    /// What the faults did to frames towards port `index`.
    #[must_use]
    pub fn fault_stats(&self, index: usize) -> FaultStats {
        self.inner
            .borrow()
            .ports
            .get(index)
            .map(|p| p.rx.stats)
            .unwrap_or_default()
    }

    /// Frames sent by port `index`.
    #[must_use]
    pub fn sent(&self, index: usize) -> u64 {
        self.inner.borrow().ports.get(index).map_or(0, |p| p.sent)
    }
}

/// One port of the wire: a [`Device`].
pub struct SimPort {
    wire: Rc<RefCell<WireInner>>,
    index: usize,
}

impl SimPort {
    /// This port's number on its wire.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }
}

impl Device for SimPort {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        let mut wire = self.wire.borrow_mut();
        let frame = wire.ports[self.index].rx.release(now)?;
        if frame.segment_count() > 1 {
            wire.gathered += 1;
        }
        Some(frame.into_iobuf())
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        let mut wire = self.wire.borrow_mut();
        let config = wire.config;
        let port = &mut wire.ports[self.index];
        port.sent += 1;
        let start = core::cmp::max(now, port.busy_until);
        let bits = u64::try_from(frame.len())
            .unwrap_or(u64::MAX)
            .saturating_mul(8);
        let serialization = bits
            .saturating_mul(1_000_000_000)
            .checked_div(config.bandwidth_bps)
            .map_or(Duration::ZERO, Duration::from_nanos);
        port.busy_until = start + serialization;
        let extra = port.busy_until.saturating_since(now) + config.latency;
        for (i, other) in wire.ports.iter_mut().enumerate() {
            if i != self.index {
                other.rx.admit(now, frame.clone(), extra);
            }
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities::default()
    }
}

/// Something the simulation drives.
pub trait Node {
    /// Does the node's work at `now`; returns whether it received anything.
    fn poll(&mut self, now: Instant) -> bool;
    /// When the node next has timer work.
    fn poll_at(&self) -> Option<Instant>;
}

impl<D: Device + 'static> Node for Stack<D> {
    fn poll(&mut self, now: Instant) -> bool {
        Stack::poll(self, now)
    }

    fn poll_at(&self) -> Option<Instant> {
        Stack::poll_at(self)
    }
}

/// The simulation: a wire, its nodes and the clock.
pub struct Sim {
    wire: SimWire,
    now: Instant,
    nodes: Vec<Box<dyn Node>>,
}

impl Sim {
    /// A simulation at time 0 with a wire configured by `link`.
    #[must_use]
    pub fn new(link: LinkConfig) -> Self {
        Sim {
            wire: SimWire::new(link),
            now: Instant(0),
            nodes: Vec::new(),
        }
    }

    /// The wire.
    #[must_use]
    pub fn wire(&self) -> &SimWire {
        &self.wire
    }

    /// The simulated time.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Adds a node (keep a clone of a [`Stack`] to talk to it).
    pub fn add(&mut self, node: Box<dyn Node>) {
        self.nodes.push(node);
    }

    /// Polls every node at the current time until nothing more happens now.
    pub fn settle(&mut self) {
        for _ in 0..10_000 {
            let mut any = false;
            for node in &mut self.nodes {
                any |= node.poll(self.now);
            }
            let due = self.wire.next_delivery().is_some_and(|t| t <= self.now);
            if !any && !due {
                return;
            }
        }
    }

    /// Runs until `duration` of simulated time has passed, jumping from
    /// event to event.
    pub fn run_for(&mut self, duration: Duration) {
        let end = self.now + duration;
        loop {
            self.settle();
            let timers = self.nodes.iter().filter_map(|n| n.poll_at());
            let next = timers
                .chain(self.wire.next_delivery())
                .filter(|t| *t > self.now)
                .min();
            match next {
                Some(t) if t <= end => self.now = t,
                _ => {
                    self.now = end;
                    self.settle();
                    return;
                }
            }
        }
    }
}

/// Messages a [`DhcpServer`] answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DhcpServerStats {
    /// DHCPOFFERs sent.
    pub offers: u64,
    /// DHCPACKs sent for new leases (REQUESTING).
    pub acks: u64,
    /// DHCPACKs sent to renewals or rebinds (the request had `ciaddr`).
    pub renewal_acks: u64,
    /// DHCPNAKs sent.
    pub naks: u64,
}

struct ServerInner {
    port: SimPort,
    hardware_addr: EthernetAddress,
    addr: Ipv4Addr,
    next_addr: Ipv4Addr,
    lease_secs: u32,
    leases: BTreeMap<[u8; 6], Ipv4Addr>,
    stats: DhcpServerStats,
}

/// A minimal DHCP server (RFC 2131 §4.3) on the simulated wire, for testing
/// the client: offers addresses from a pool in 255.255.255.0, acknowledges
/// requests for the address it offered, NAKs others. Cheap to clone.
#[derive(Clone)]
pub struct DhcpServer {
    inner: Rc<RefCell<ServerInner>>,
}

impl DhcpServer {
    /// A server at `addr` on `port`, handing out addresses from `pool_start`
    /// on, with leases of `lease_secs` seconds.
    #[must_use]
    pub fn new(
        port: SimPort,
        hardware_addr: EthernetAddress,
        addr: Ipv4Addr,
        pool_start: Ipv4Addr,
        lease_secs: u32,
    ) -> Self {
        DhcpServer {
            inner: Rc::new(RefCell::new(ServerInner {
                port,
                hardware_addr,
                addr,
                next_addr: pool_start,
                lease_secs,
                leases: BTreeMap::new(),
                stats: DhcpServerStats::default(),
            })),
        }
    }

    /// What the server answered so far.
    #[must_use]
    pub fn stats(&self) -> DhcpServerStats {
        self.inner.borrow().stats
    }
}

impl ServerInner {
    fn handle(&mut self, now: Instant, frame: &IoBuf) -> Option<()> {
        let eth = ethernet::parse(frame, Some(self.hardware_addr)).ok()?;
        if eth.ethertype == EthernetProtocol::Arp {
            // Answer requests for our address (RFC 826), so that clients
            // can renew by unicast.
            let ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Request,
                source_hardware_addr,
                source_protocol_addr,
                target_protocol_addr,
                ..
            } = arp::parse(&eth.payload).ok()?
            else {
                return None;
            };
            if target_protocol_addr != self.addr {
                return None;
            }
            let reply = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Reply,
                source_hardware_addr: self.hardware_addr,
                source_protocol_addr: self.addr,
                target_hardware_addr: source_hardware_addr,
                target_protocol_addr: source_protocol_addr,
            };
            let mut frame = alloc::vec![0u8; ethernet::HEADER_LEN + arp::PACKET_LEN];
            ethernet::emit(
                &mut frame[..ethernet::HEADER_LEN],
                self.hardware_addr,
                source_hardware_addr,
                EthernetProtocol::Arp,
            );
            arp::emit(&mut frame[ethernet::HEADER_LEN..], &reply);
            self.port
                .transmit(now, IoChain::from(IoBuf::from_vec(frame)));
            return Some(());
        }
        if eth.ethertype != EthernetProtocol::Ipv4 {
            return None;
        }
        let ip = ipv4::parse(&eth.payload, true).ok()?;
        if ip.protocol != IpProtocol::Udp || !(ip.dst == self.addr || ip.dst == Ipv4Addr::BROADCAST)
        {
            return None;
        }
        let datagram = udp::parse(&ip.payload, ip.src, ip.dst, true).ok()?;
        if datagram.dst_port != dhcp::SERVER_PORT {
            return None;
        }
        let packet = DhcpPacket::new_checked(datagram.payload.as_slice()).ok()?;
        let request = DhcpRepr::parse(&packet).ok()?;
        let chaddr = request.client_hardware_address;
        let (message_type, yiaddr) = match request.message_type {
            DhcpMessageType::Discover => {
                let addr = match self.leases.get(&chaddr.0) {
                    Some(addr) => *addr,
                    None => {
                        let addr = self.next_addr;
                        self.next_addr = Ipv4Addr::from(u32::from(addr).wrapping_add(1));
                        self.leases.insert(chaddr.0, addr);
                        addr
                    }
                };
                self.stats.offers += 1;
                (DhcpMessageType::Offer, addr)
            }
            DhcpMessageType::Request => {
                let wanted = request.requested_ip.unwrap_or(request.client_ip);
                let selected_other = request.server_identifier.is_some_and(|s| s != self.addr);
                match self.leases.get(&chaddr.0) {
                    _ if selected_other => return None,
                    Some(addr) if *addr == wanted => {
                        if request.client_ip.is_unspecified() {
                            self.stats.acks += 1;
                        } else {
                            self.stats.renewal_acks += 1;
                        }
                        (DhcpMessageType::Ack, *addr)
                    }
                    _ => {
                        self.stats.naks += 1;
                        (DhcpMessageType::Nak, Ipv4Addr::UNSPECIFIED)
                    }
                }
            }
            _ => return None,
        };
        let ack_or_offer = message_type != DhcpMessageType::Nak;
        let reply = DhcpRepr {
            message_type,
            transaction_id: request.transaction_id,
            secs: 0,
            client_hardware_address: chaddr,
            client_ip: request.client_ip,
            your_ip: yiaddr,
            server_ip: self.addr,
            router: ack_or_offer.then_some(self.addr),
            subnet_mask: ack_or_offer.then_some(Ipv4Addr::new(255, 255, 255, 0)),
            relay_agent_ip: Ipv4Addr::UNSPECIFIED,
            broadcast: request.broadcast,
            requested_ip: None,
            client_identifier: None,
            server_identifier: Some(self.addr),
            parameter_request_list: None,
            dns_servers: None,
            max_size: None,
            lease_duration: ack_or_offer.then_some(self.lease_secs),
            renew_duration: None,
            rebind_duration: None,
            additional_options: &[],
        };
        let mut payload = alloc::vec![0u8; reply.buffer_len()];
        reply
            .emit(&mut DhcpPacket::new_unchecked(&mut payload))
            .ok()?;
        // RFC 2131 §4.1: unicast to ciaddr when the client has one,
        // otherwise broadcast (we always honour the broadcast bit).
        let (dst_ip, dst_mac) = if request.client_ip.is_unspecified() || request.broadcast {
            (Ipv4Addr::BROADCAST, ethernet::BROADCAST)
        } else {
            (request.client_ip, chaddr)
        };
        let frame = udp_frame(
            (self.hardware_addr, self.addr, dhcp::SERVER_PORT),
            (dst_mac, dst_ip, dhcp::CLIENT_PORT),
            &payload,
        );
        self.port
            .transmit(now, IoChain::from(IoBuf::from_vec(frame)));
        Some(())
    }
}

impl Node for DhcpServer {
    fn poll(&mut self, now: Instant) -> bool {
        let mut inner = self.inner.borrow_mut();
        let mut any = false;
        while let Some(frame) = inner.port.receive(now) {
            any = true;
            let _ = inner.handle(now, &frame);
        }
        any
    }

    fn poll_at(&self) -> Option<Instant> {
        None
    }
}

/// Builds a complete Ethernet/IPv4/UDP frame around `payload` in one
/// buffer (for test peers and the simulated server; the stack itself
/// chains its headers in front of the payload instead).
#[must_use]
pub fn udp_frame(
    src: (EthernetAddress, Ipv4Addr, u16),
    dst: (EthernetAddress, Ipv4Addr, u16),
    payload: &[u8],
) -> Vec<u8> {
    let chain = IoChain::from(IoBuf::copy_from_slice(payload));
    let mut frame = alloc::vec![0u8; ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN];
    let (eth, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
    let (ip, udp_header) = rest.split_at_mut(ipv4::HEADER_LEN);
    ethernet::emit(eth, src.0, dst.0, EthernetProtocol::Ipv4);
    ipv4::emit(
        ip,
        &ipv4::Header {
            src: src.1,
            dst: dst.1,
            protocol: IpProtocol::Udp,
            ident: 0,
            payload_len: u16::try_from(udp::HEADER_LEN + payload.len()).unwrap_or(u16::MAX),
        },
    );
    udp::emit(udp_header, (src.1, src.2), (dst.1, dst.2), &chain, false);
    frame.extend_from_slice(payload);
    frame
}
