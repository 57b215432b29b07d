//! One interface: its state and the dispatch of received frames, run to
//! completion from the device into the application's handler.
//!
//! The [`Stack`] is a cheap handle (`Rc`) on the interface's state. While a
//! handler runs, the state is not borrowed (the handler is taken out of its
//! socket for the call), so the handler can send through its
//! [`UdpSocket`] at once, in the same call chain that received the frame.

use alloc::boxed::Box;
use alloc::rc::{Rc, Weak};
use core::cell::RefCell;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoBufMut, IoChain};
use ebb_net::{
    AcceptFn, NetError, NetStack, SendError, TcpConnection, TcpHandler, UdpHandler, UdpOps,
    UdpSocket,
};
use smoltcp::wire::{ArpRepr, EthernetAddress, EthernetProtocol, IpProtocol};

use crate::arp::{self, ArpCache, ArpConfig, ArpStats, Enqueued};
use crate::device::{Device, DeviceCapabilities, RxChecksum};
use crate::dhcp::{self, DhcpClient, DhcpEvent, DhcpOutput, DhcpState, DhcpStats};
use crate::icmp::{self, Message};
pub use crate::ipv4::IpConfig;
use crate::ipv4::{self, Header};
use crate::steering::Steering;
use crate::tcp::ops::{self as tcp_ops, TcpHost};
use crate::tcp::{segment as tcp_segment, TcpConfig, TcpLayer};
use crate::udp::{self, UdpTable};
use crate::{ethernet, RxError};

/// Bytes of headroom for Ethernet and IPv4 headers in front of an
/// upper-layer header.
const LOWER_HEADROOM: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN;

/// How the interface gets its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpSetup {
    /// A fixed address.
    Static(IpConfig),
    /// From a DHCP server (RFC 2131).
    Dhcp,
}

/// An interface's configuration.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Our Ethernet address.
    pub hardware_addr: EthernetAddress,
    /// How we get an IPv4 address.
    pub ip: IpSetup,
    /// ARP cache limits and times.
    pub arp: ArpConfig,
    /// Seed for identifiers (DHCP transaction ids).
    pub seed: u64,
    /// TCP settings.
    pub tcp: TcpConfig,
}

impl Config {
    /// A configuration with a static address and default ARP settings.
    #[must_use]
    pub fn new_static(hardware_addr: EthernetAddress, ip: IpConfig) -> Self {
        Config {
            hardware_addr,
            ip: IpSetup::Static(ip),
            arp: ArpConfig::default(),
            seed: 0,
            tcp: TcpConfig::default(),
        }
    }

    /// A configuration that asks DHCP for an address.
    #[must_use]
    pub fn new_dhcp(hardware_addr: EthernetAddress, seed: u64) -> Self {
        Config {
            hardware_addr,
            ip: IpSetup::Dhcp,
            arp: ArpConfig::default(),
            seed,
            tcp: TcpConfig::default(),
        }
    }
}

/// Frames the interface handled, and why it dropped the ones it dropped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames received from the device.
    pub rx_frames: u64,
    /// Frames handed to the device.
    pub tx_frames: u64,
    /// Dropped: a header cut short or a length past the data.
    pub truncated: u64,
    /// Dropped: an impossible header field.
    pub malformed: u64,
    /// Dropped: a checksum failed.
    pub bad_checksum: u64,
    /// Dropped: an IPv4 fragment.
    pub fragments: u64,
    /// Dropped: addressed to someone else.
    pub not_for_us: u64,
    /// Dropped: a protocol or message type not handled.
    pub unsupported: u64,
    /// Dropped: no socket on the destination port.
    pub no_socket: u64,
    /// Datagrams handed to UDP handlers.
    pub udp_delivered: u64,
    /// Echo requests answered.
    pub echo_replies_sent: u64,
}

/// A packet on its way out: the IPv4 header (and any upper-layer header)
/// in a buffer with headroom for Ethernet, and the payload buffers.
struct OutPacket {
    header: IoBufMut,
    payload: IoChain,
}

/// Where a packet goes on the link.
enum Hop {
    Broadcast,
    Unicast(Ipv4Addr),
}

/// Something to hand to the application once the state is released.
enum Deliver {
    Udp {
        port: u16,
        from: SocketAddr,
        data: IoBuf,
    },
    EchoReply {
        from: Ipv4Addr,
        echo: icmp::Echo,
    },
}

/// Called with each echo reply received: (from, identifier, sequence
/// number, data as a view of the received frame).
pub type EchoReplyHandler = Box<dyn FnMut(Ipv4Addr, u16, u16, IoBuf)>;

struct Inner<D> {
    device: D,
    caps: DeviceCapabilities,
    hardware_addr: EthernetAddress,
    ip: Option<IpConfig>,
    arp: ArpCache<OutPacket>,
    udp: UdpTable,
    tcp: TcpLayer,
    dhcp: Option<DhcpClient>,
    echo_handler: Option<EchoReplyHandler>,
    /// Other cores' stacks on the same interface, if any.
    steering: Option<Rc<dyn Steering>>,
    /// The time of the last poll, or of the last application call if
    /// `clock` is set.
    now: Instant,
    /// The platform's clock, read when the application sends, connects or
    /// closes between polls (see [`Stack::set_clock`]).
    clock: Option<fn() -> Instant>,
    ident: u16,
    stats: Stats,
}

/// One interface of Ebbflow's own stack over device `D`.
pub struct Stack<D: Device + 'static> {
    inner: Rc<RefCell<Inner<D>>>,
}

impl<D: Device + 'static> Clone for Stack<D> {
    fn clone(&self) -> Self {
        Stack {
            inner: self.inner.clone(),
        }
    }
}

impl<D: Device + 'static> Stack<D> {
    /// An interface over `device`, configured by `config`, at time `now`.
    pub fn new(device: D, config: Config, now: Instant) -> Self {
        let caps = device.capabilities();
        let (ip, dhcp) = match config.ip {
            IpSetup::Static(ip) => (Some(ip), None),
            IpSetup::Dhcp => (
                None,
                Some(DhcpClient::new(config.hardware_addr, config.seed, now)),
            ),
        };
        Stack {
            inner: Rc::new(RefCell::new(Inner {
                device,
                caps,
                hardware_addr: config.hardware_addr,
                ip,
                arp: ArpCache::new(config.arp),
                udp: UdpTable::default(),
                tcp: TcpLayer::new(config.tcp, caps.mtu),
                dhcp,
                echo_handler: None,
                steering: None,
                now,
                clock: None,
                ident: 0,
                stats: Stats::default(),
            })),
        }
    }

    /// Reads `clock` for the time of calls the application makes between
    /// polls (sends, connects, closes). Without it they are stamped with
    /// the last poll's time, right for a simulation that sets the time
    /// itself, but on a real node the last poll may be seconds old after
    /// a halt: a segment sent from a timer event then had its
    /// retransmission deadline (RFC 6298 §5.1) already in the past and its
    /// RTT sample (§2) inflated by the halt, so it was retransmitted at
    /// the next poll and cwnd collapsed (RFC 5681 §3.1).
    pub fn set_clock(&self, clock: fn() -> Instant) {
        self.inner.borrow_mut().clock = Some(clock);
    }

    /// Processes every frame the device has at `now`, each run to
    /// completion into its handler, then runs the timers that are due.
    /// Returns whether any frame came in.
    ///
    /// Frames go first because after a stall (a descheduled process, a busy
    /// core) the ACK that answers an outstanding segment is often already
    /// waiting: taking it before the retransmission timer avoids a spurious
    /// retransmission, and for a FIN the RST our closed connection would
    /// then send to the peer's TIME-WAIT (the hazard of RFC 1337).
    pub fn poll(&self, now: Instant) -> bool {
        // Never backwards: a send since the caller read `now` may have
        // read the clock later (`set_clock`).
        {
            let mut inner = self.inner.borrow_mut();
            inner.now = inner.now.max(now);
        }
        tcp_ops::drain(&self.inner);
        let mut any = false;
        loop {
            let delivery = {
                let mut inner = self.inner.borrow_mut();
                let Some((frame, checksum)) = inner.device.receive_checked(now) else {
                    break;
                };
                any = true;
                inner.process(frame, checksum)
            };
            if let Some(delivery) = delivery {
                self.deliver(delivery);
            }
            tcp_ops::drain(&self.inner);
        }
        self.inner.borrow_mut().on_timers(now);
        tcp_ops::drain(&self.inner);
        any
    }

    /// When [`poll`](Self::poll) next has timer work (ARP, DHCP), if ever.
    #[must_use]
    pub fn poll_at(&self) -> Option<Instant> {
        let inner = self.inner.borrow();
        let dhcp = inner.dhcp.as_ref().map(DhcpClient::poll_at);
        [inner.arp.poll_at(), dhcp, inner.tcp.poll_at()]
            .into_iter()
            .flatten()
            .min()
    }

    fn deliver(&self, delivery: Deliver) {
        match delivery {
            Deliver::Udp { port, from, data } => {
                let taken = self.inner.borrow_mut().udp.take_handler(port);
                if let Some((id, mut handler, socket)) = taken {
                    self.inner.borrow_mut().stats.udp_delivered += 1;
                    handler.on_datagram(&socket, from, data);
                    self.inner.borrow_mut().udp.put_back(port, id, handler);
                }
            }
            Deliver::EchoReply { from, echo } => {
                let taken = self.inner.borrow_mut().echo_handler.take();
                if let Some(mut handler) = taken {
                    handler(from, echo.ident, echo.seq_no, echo.data);
                    let mut inner = self.inner.borrow_mut();
                    if inner.echo_handler.is_none() {
                        inner.echo_handler = Some(handler);
                    }
                }
            }
        }
    }

    /// Shares this stack's interface with other cores' stacks: TCP
    /// connections are registered in `steering`'s directory, and segments
    /// for another core's connection are forwarded there (see
    /// [`crate::steering`]). Set it before the first connection.
    pub fn set_steering(&self, steering: Rc<dyn Steering>) {
        let mut inner = self.inner.borrow_mut();
        inner.tcp.set_steering(Rc::clone(&steering));
        inner.steering = Some(steering);
    }

    /// Sets what is called with each echo reply.
    pub fn set_echo_reply_handler(&self, handler: EchoReplyHandler) {
        self.inner.borrow_mut().echo_handler = Some(handler);
    }

    /// Sends an ICMP echo request (RFC 792) to `dst` with `data`.
    ///
    /// # Errors
    ///
    /// As [`UdpSocket::send_to`]: no address yet, no route, or too large.
    pub fn ping(
        &self,
        dst: Ipv4Addr,
        ident: u16,
        seq_no: u16,
        data: IoChain,
    ) -> Result<(), SendError> {
        self.inner
            .borrow_mut()
            .send_echo(dst, false, ident, seq_no, data)
    }

    /// Our IPv4 configuration (static, or from the DHCP lease).
    #[must_use]
    pub fn ip_config(&self) -> Option<IpConfig> {
        self.inner.borrow().ip
    }

    /// Our Ethernet address.
    #[must_use]
    pub fn hardware_addr(&self) -> EthernetAddress {
        self.inner.borrow().hardware_addr
    }

    /// Frame counters.
    #[must_use]
    pub fn stats(&self) -> Stats {
        self.inner.borrow().stats
    }

    /// ARP cache counters.
    #[must_use]
    pub fn arp_stats(&self) -> ArpStats {
        self.inner.borrow().arp.stats()
    }

    /// (entries in the ARP cache, packets waiting for resolution).
    #[must_use]
    pub fn arp_sizes(&self) -> (usize, usize) {
        let inner = self.inner.borrow();
        (inner.arp.len(), inner.arp.pending_len())
    }

    /// The cached hardware address of `ip` at the last poll's time.
    #[must_use]
    pub fn arp_lookup(&self, ip: Ipv4Addr) -> Option<EthernetAddress> {
        let inner = self.inner.borrow();
        inner.arp.lookup(ip, inner.now)
    }

    /// The DHCP client's state and counters, if DHCP is in use.
    #[must_use]
    pub fn dhcp(&self) -> Option<(DhcpState, DhcpStats)> {
        self.inner
            .borrow()
            .dhcp
            .as_ref()
            .map(|d| (d.state(), d.stats()))
    }

    /// Sets (or removes) our IPv4 configuration from outside: for stacks
    /// that share one link and one address with a stack that owns it (one
    /// stack per core over a multi-queue device, where core 0's stack runs
    /// DHCP and the others take its lease).
    pub fn set_ip_config(&self, ip: Option<IpConfig>) {
        self.inner.borrow_mut().ip = ip;
    }

    /// Adds or refreshes the neighbour `ip` → `hardware_addr` as if an ARP
    /// packet from it had arrived for us (RFC 826), and sends the packets
    /// that waited for it. For stacks sharing one link: what one stack
    /// learned from an ARP packet that reached it, the others are told
    /// (the device may deliver the reply to another stack than the one
    /// that asked).
    pub fn learn_neighbour(&self, ip: Ipv4Addr, hardware_addr: EthernetAddress, now: Instant) {
        let mut inner = self.inner.borrow_mut();
        inner.now = inner.now.max(now);
        if hardware_addr.is_multicast() || ip.is_unspecified() {
            return;
        }
        inner.arp.fill(ip, hardware_addr, now);
        for packet in inner.arp.release(ip) {
            inner.transmit(packet, hardware_addr);
        }
    }

    /// Runs `f` on the device (to read a capture or fault counters).
    pub fn with_device<R>(&self, f: impl FnOnce(&mut D) -> R) -> R {
        f(&mut self.inner.borrow_mut().device)
    }

    /// Runs `f` on the TCP layer (connection states, counters, trace).
    pub fn tcp<R>(&self, f: impl FnOnce(&TcpLayer) -> R) -> R {
        f(&self.inner.borrow().tcp)
    }

    /// Number of bound UDP sockets.
    #[must_use]
    pub fn udp_socket_count(&self) -> usize {
        self.inner.borrow().udp.len()
    }
}

impl<D: Device + 'static> Inner<D> {
    fn on_timers(&mut self, now: Instant) {
        self.now = self.now.max(now);
        // The timers run at the stack's time, which a send may have moved
        // past the caller's `now`.
        let now = self.now;
        for ip in self.arp.poll(now) {
            self.send_arp_request(ip);
        }
        if let Some(dhcp) = &mut self.dhcp {
            let out = dhcp.poll(now);
            self.apply_dhcp(out);
        }
        self.tcp.poll(now);
        self.flush_tcp();
    }

    fn count(&mut self, error: RxError) {
        let s = &mut self.stats;
        match error {
            RxError::Truncated => s.truncated += 1,
            RxError::Malformed => s.malformed += 1,
            RxError::BadChecksum => s.bad_checksum += 1,
            RxError::Fragment => s.fragments += 1,
            RxError::NotForUs => s.not_for_us += 1,
            RxError::Unsupported => s.unsupported += 1,
            RxError::NoSocket => s.no_socket += 1,
        }
    }

    fn process(&mut self, frame: IoBuf, checksum: RxChecksum) -> Option<Deliver> {
        self.stats.rx_frames += 1;
        match self.process_frame(&frame, checksum) {
            Ok(delivery) => delivery,
            Err(error) => {
                self.count(error);
                None
            }
        }
    }

    fn process_frame(
        &mut self,
        frame: &IoBuf,
        checksum: RxChecksum,
    ) -> Result<Option<Deliver>, RxError> {
        let eth = ethernet::parse(frame, Some(self.hardware_addr))?;
        match eth.ethertype {
            EthernetProtocol::Arp => {
                let repr = arp::parse(&eth.payload)?;
                self.process_arp(&repr);
                Ok(None)
            }
            EthernetProtocol::Ipv4 => self.process_ipv4(frame, &eth.payload, checksum),
            _ => Err(RxError::Unsupported),
        }
    }

    fn process_arp(&mut self, repr: &ArpRepr) {
        let our_ip = self.ip.map(|c| c.addr);
        if let Some(reply) = self.arp.process(repr, self.hardware_addr, our_ip, self.now) {
            let ArpRepr::EthernetIpv4 {
                target_hardware_addr,
                ..
            } = reply
            else {
                return;
            };
            self.send_arp(&reply, target_hardware_addr);
        }
        let ArpRepr::EthernetIpv4 {
            source_protocol_addr,
            ..
        } = *repr
        else {
            return;
        };
        if let Some(hardware_addr) = self.arp.lookup(source_protocol_addr, self.now) {
            for packet in self.arp.release(source_protocol_addr) {
                self.transmit(packet, hardware_addr);
            }
        }
    }

    /// `frame` is the whole frame `payload` came in, for forwarding.
    /// `checksum` concerns the transport checksum only: the IPv4 header's
    /// is verified unless the device vouches for all of them (as Linux
    /// does with `CHECKSUM_UNNECESSARY`).
    fn process_ipv4(
        &mut self,
        frame: &IoBuf,
        payload: &IoBuf,
        checksum: RxChecksum,
    ) -> Result<Option<Deliver>, RxError> {
        let ip = ipv4::parse(payload, !self.caps.checksum.ipv4)?;
        let for_us = match self.ip {
            Some(config) => config.accepts(ip.dst),
            None => ip.dst == ipv4::BROADCAST,
        };
        if !for_us {
            return Err(RxError::NotForUs);
        }
        match ip.protocol {
            IpProtocol::Icmp => self.process_icmp(&ip),
            IpProtocol::Udp => self.process_udp(&ip, checksum),
            IpProtocol::Tcp => self.process_tcp(frame, &ip, checksum),
            _ => Err(RxError::Unsupported),
        }
    }

    fn process_icmp(&mut self, ip: &ipv4::Parsed) -> Result<Option<Deliver>, RxError> {
        match icmp::parse(&ip.payload, !self.caps.checksum.icmpv4)? {
            Message::EchoRequest(echo) => {
                // RFC 1122 §3.2.2.6: echo requests to a broadcast address
                // may be ignored; we do.
                if self.ip.is_some_and(|c| c.addr == ip.dst) {
                    let data = IoChain::from(echo.data);
                    if self
                        .send_echo(ip.src, true, echo.ident, echo.seq_no, data)
                        .is_ok()
                    {
                        self.stats.echo_replies_sent += 1;
                    }
                }
                Ok(None)
            }
            Message::EchoReply(echo) => Ok(Some(Deliver::EchoReply { from: ip.src, echo })),
        }
    }

    fn process_udp(
        &mut self,
        ip: &ipv4::Parsed,
        checksum: RxChecksum,
    ) -> Result<Option<Deliver>, RxError> {
        let verify = !self.caps.checksum.udp && checksum == RxChecksum::Unverified;
        let datagram = udp::parse(&ip.payload, ip.src, ip.dst, verify)?;
        if datagram.dst_port == dhcp::CLIENT_PORT && datagram.src_port == dhcp::SERVER_PORT {
            if let Some(client) = &mut self.dhcp {
                let out = client.process(self.now, &datagram.payload);
                self.apply_dhcp(out);
                return Ok(None);
            }
        }
        if self.ip.is_none() || !self.udp.accepts(ip.dst, datagram.dst_port) {
            return Err(RxError::NoSocket);
        }
        Ok(Some(Deliver::Udp {
            port: datagram.dst_port,
            from: SocketAddr::V4(SocketAddrV4::new(ip.src, datagram.src_port)),
            data: datagram.payload,
        }))
    }

    fn process_tcp(
        &mut self,
        frame: &IoBuf,
        ip: &ipv4::Parsed,
        checksum: RxChecksum,
    ) -> Result<Option<Deliver>, RxError> {
        if self.ip.is_none_or(|c| c.addr != ip.dst) {
            return Err(RxError::NotForUs); // RFC 1122 §4.2.3.10: no broadcast TCP
        }
        // RFC 1122 §3.2.1.3 and §4.2.3.10: a segment from an unspecified,
        // broadcast or multicast source is discarded (no connection, no
        // RST). The flow directory's slot markers rely on this too.
        if ip.src.is_unspecified() || ip.src.is_broadcast() || ip.src.is_multicast() {
            return Err(RxError::Malformed);
        }
        let verify = checksum == RxChecksum::Unverified;
        let segment = tcp_segment::parse(&ip.payload, ip.src, ip.dst, verify)?;
        if let Some(core) = self.tcp.input(self.now, ip.src, ip.dst, segment) {
            if let Some(steering) = &self.steering {
                steering.forward(core, frame);
            }
        }
        self.flush_tcp();
        Ok(None)
    }

    /// Sends what the TCP layer queued: each header in its own buffer with
    /// headroom, chained in front of the payload views.
    fn flush_tcp(&mut self) {
        let mut segments = core::mem::take(&mut self.tcp.out);
        self.tcp.count_out(segments.len());
        for segment in segments.drain(..) {
            let upper_len = segment.header_len() + segment.payload.len();
            // A segment that cannot be routed is lost like one dropped on
            // the wire; retransmission covers it.
            let Ok(hop) = self.route(segment.dst.0, upper_len) else {
                continue;
            };
            let header = segment.emit_header(LOWER_HEADROOM, self.caps.checksum.tx_partial);
            self.send_ip(
                hop,
                segment.src.0,
                segment.dst.0,
                IpProtocol::Tcp,
                header,
                segment.payload,
            );
        }
        self.tcp.out = segments;
    }

    fn apply_dhcp(&mut self, out: DhcpOutput) {
        match out.event {
            Some(DhcpEvent::Configured(lease)) => {
                let changed = self.ip.map(|c| c.addr) != Some(lease.addr);
                self.ip = Some(IpConfig {
                    addr: lease.addr,
                    prefix_len: lease.prefix_len,
                    gateway: lease.router,
                });
                if changed {
                    // RFC 2131 §4.4.1 and RFC 5227 §2.3: announce the new
                    // address, so neighbours that cached a failed lookup
                    // (a DHCP server's probe ping, say) learn it now.
                    let announcement = arp::request(self.hardware_addr, lease.addr, lease.addr);
                    self.send_arp(&announcement, ethernet::BROADCAST);
                }
            }
            Some(DhcpEvent::Deconfigured) => self.ip = None,
            None => {}
        }
        if let Some(send) = out.send {
            let payload = IoChain::from(IoBuf::from_vec(send.payload));
            // A DHCP message that cannot go out now is retransmitted later.
            let _ = self.send_udp(
                (send.src, dhcp::CLIENT_PORT),
                (send.dst, dhcp::SERVER_PORT),
                payload,
            );
        }
    }

    fn next_ident(&mut self) -> u16 {
        self.ident = self.ident.wrapping_add(1);
        self.ident
    }

    fn hop(&self, dst: Ipv4Addr) -> Result<Hop, NetError> {
        if dst == ipv4::BROADCAST {
            return Ok(Hop::Broadcast);
        }
        let config = self.ip.ok_or(NetError::AddrNotAvailable)?;
        if config.prefix_len < 31 && dst == config.subnet_broadcast() {
            Ok(Hop::Broadcast)
        } else if config.on_link(dst) {
            Ok(Hop::Unicast(dst))
        } else if let Some(gateway) = config.gateway {
            Ok(Hop::Unicast(gateway))
        } else {
            Err(NetError::Unsupported(
                "no route to the destination: it is off-link and there is no gateway",
            ))
        }
    }

    /// Checks that a packet with `upper_len` bytes of IP payload can go to
    /// `dst` and returns its next hop.
    fn route(&self, dst: Ipv4Addr, upper_len: usize) -> Result<Hop, NetError> {
        if upper_len > self.caps.mtu.saturating_sub(ipv4::HEADER_LEN) {
            return Err(NetError::Unsupported(
                "the datagram exceeds the MTU: the stack does not fragment",
            ));
        }
        self.hop(dst)
    }

    /// Sends a datagram: header buffer (Ethernet + IPv4 + UDP) chained in
    /// front of `payload`, which is not copied.
    fn send_udp(
        &mut self,
        src: (Ipv4Addr, u16),
        dst: (Ipv4Addr, u16),
        payload: IoChain,
    ) -> Result<(), SendError> {
        let upper_len = udp::HEADER_LEN + payload.len();
        let hop = match self.route(dst.0, upper_len) {
            Ok(hop) => hop,
            Err(error) => {
                return Err(SendError {
                    error,
                    data: payload,
                })
            }
        };
        let mut header = IoBufMut::with_headroom(LOWER_HEADROOM, udp::HEADER_LEN);
        udp::emit(
            header.extend_zeroed(udp::HEADER_LEN),
            src,
            dst,
            &payload,
            self.caps.checksum.tx_partial,
        );
        self.send_ip(hop, src.0, dst.0, IpProtocol::Udp, header, payload);
        Ok(())
    }

    fn send_echo(
        &mut self,
        dst: Ipv4Addr,
        reply: bool,
        ident: u16,
        seq_no: u16,
        data: IoChain,
    ) -> Result<(), SendError> {
        let Some(src) = self.ip.map(|c| c.addr) else {
            return Err(SendError {
                error: NetError::AddrNotAvailable,
                data,
            });
        };
        let hop = match self.route(dst, icmp::HEADER_LEN + data.len()) {
            Ok(hop) => hop,
            Err(error) => return Err(SendError { error, data }),
        };
        let mut header = IoBufMut::with_headroom(LOWER_HEADROOM, icmp::HEADER_LEN);
        icmp::emit_echo(
            header.extend_zeroed(icmp::HEADER_LEN),
            reply,
            ident,
            seq_no,
            &data,
        );
        self.send_ip(hop, src, dst, IpProtocol::Icmp, header, data);
        Ok(())
    }

    /// Prepends the IPv4 header to `header` and sends the packet, or queues
    /// it until ARP resolves the next hop.
    fn send_ip(
        &mut self,
        hop: Hop,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        protocol: IpProtocol,
        mut header: IoBufMut,
        payload: IoChain,
    ) {
        let upper_len = header.len() + payload.len();
        let ip_header = Header {
            src,
            dst,
            protocol,
            ident: self.next_ident(),
            payload_len: u16::try_from(upper_len).unwrap_or(u16::MAX),
        };
        match header.prepend_zeroed(ipv4::HEADER_LEN) {
            Ok(buf) => ipv4::emit(buf, &ip_header),
            Err(_) => return, // the headroom was reserved above: unreachable
        }
        let packet = OutPacket { header, payload };
        match hop {
            Hop::Broadcast => self.transmit(packet, ethernet::BROADCAST),
            Hop::Unicast(next_hop) => match self.arp.lookup(next_hop, self.now) {
                Some(hardware_addr) => self.transmit(packet, hardware_addr),
                None => match self.arp.enqueue(next_hop, packet, self.now) {
                    Enqueued::SendRequest => self.send_arp_request(next_hop),
                    // Dropped as a full NIC queue drops; counted in ArpStats.
                    Enqueued::Queued | Enqueued::Full(_) => {}
                },
            },
        }
    }

    /// Prepends the Ethernet header and hands the chain to the device.
    fn transmit(&mut self, mut packet: OutPacket, dst: EthernetAddress) {
        match packet.header.prepend_zeroed(ethernet::HEADER_LEN) {
            Ok(buf) => ethernet::emit(buf, self.hardware_addr, dst, EthernetProtocol::Ipv4),
            Err(_) => return,
        }
        let mut frame = packet.payload;
        frame.push_front(packet.header.freeze());
        self.stats.tx_frames += 1;
        self.device.transmit(self.now, frame);
    }

    fn send_arp_request(&mut self, target: Ipv4Addr) {
        let our_ip = self.ip.map_or(Ipv4Addr::UNSPECIFIED, |c| c.addr);
        let request = arp::request(self.hardware_addr, our_ip, target);
        self.send_arp(&request, ethernet::BROADCAST);
    }

    fn send_arp(&mut self, repr: &ArpRepr, dst: EthernetAddress) {
        let mut frame = IoBufMut::with_capacity(ethernet::HEADER_LEN + arp::PACKET_LEN);
        let buf = frame.extend_zeroed(ethernet::HEADER_LEN + arp::PACKET_LEN);
        let (eth, body) = buf.split_at_mut(ethernet::HEADER_LEN);
        ethernet::emit(eth, self.hardware_addr, dst, EthernetProtocol::Arp);
        arp::emit(body, repr);
        self.stats.tx_frames += 1;
        self.device
            .transmit(self.now, IoChain::from(frame.freeze()));
    }

    fn udp_send(
        &mut self,
        port: u16,
        id: u64,
        to: SocketAddr,
        data: IoChain,
    ) -> Result<(), SendError> {
        if !self.udp.is_bound(port, id) {
            return Err(SendError {
                error: NetError::Closed,
                data,
            });
        }
        let SocketAddr::V4(to) = to else {
            return Err(SendError {
                error: NetError::Unsupported("IPv6"),
                data,
            });
        };
        let Some(src) = self.ip.map(|c| c.addr) else {
            return Err(SendError {
                error: NetError::AddrNotAvailable,
                data,
            });
        };
        self.send_udp((src, port), (*to.ip(), to.port()), data)
    }
}

/// The stack's side of one bound UDP socket.
struct SocketOps<D: Device + 'static> {
    inner: Weak<RefCell<Inner<D>>>,
    port: u16,
    id: u64,
    local: SocketAddr,
}

impl<D: Device + 'static> UdpOps for SocketOps<D> {
    fn send_to(&self, to: SocketAddr, data: IoChain) -> Result<(), SendError> {
        let Some(inner) = self.inner.upgrade() else {
            return Err(SendError {
                error: NetError::Closed,
                data,
            });
        };
        let Ok(mut inner) = inner.try_borrow_mut() else {
            // Only reachable from inside a device callback.
            return Err(SendError {
                error: NetError::Unsupported("sending from inside the stack's own processing"),
                data,
            });
        };
        inner.udp_send(self.port, self.id, to, data)
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn close(&self) {
        if let Some(inner) = self.inner.upgrade() {
            if let Ok(mut inner) = inner.try_borrow_mut() {
                inner.udp.unbind(self.port, self.id);
            }
        }
    }
}

impl<D: Device + 'static> TcpHost for Inner<D> {
    fn tcp(&mut self) -> &mut TcpLayer {
        &mut self.tcp
    }

    fn tcp_now(&mut self) -> Instant {
        if let Some(clock) = self.clock {
            self.now = self.now.max(clock());
        }
        self.now
    }

    fn tcp_local_ip(&self) -> Option<Ipv4Addr> {
        self.ip.map(|c| c.addr)
    }

    fn flush_tcp(&mut self) {
        Inner::flush_tcp(self);
    }
}

impl<D: Device + 'static> NetStack for Stack<D> {
    fn listen(&self, addr: SocketAddr, accept: AcceptFn) -> Result<SocketAddr, NetError> {
        tcp_ops::listen(&self.inner, addr, accept)
    }

    fn unlisten(&self, addr: SocketAddr) -> Result<(), NetError> {
        tcp_ops::unlisten(&self.inner, addr)
    }

    fn connect(
        &self,
        addr: SocketAddr,
        handler: Box<dyn TcpHandler>,
    ) -> Result<TcpConnection, NetError> {
        tcp_ops::connect(&self.inner, addr, handler)
    }

    fn udp_bind(
        &self,
        addr: SocketAddr,
        handler: Box<dyn UdpHandler>,
    ) -> Result<UdpSocket, NetError> {
        let SocketAddr::V4(addr) = addr else {
            return Err(NetError::Unsupported("IPv6"));
        };
        let mut inner = self.inner.borrow_mut();
        let ip = *addr.ip();
        if !ip.is_unspecified() && inner.ip.map(|c| c.addr) != Some(ip) {
            return Err(NetError::AddrNotAvailable);
        }
        let weak = Rc::downgrade(&self.inner);
        let mut socket = None;
        inner
            .udp
            .bind(ip, addr.port(), handler, |port, id| {
                let s = UdpSocket::new(Rc::new(SocketOps {
                    inner: weak,
                    port,
                    id,
                    local: SocketAddr::V4(SocketAddrV4::new(ip, port)),
                }));
                socket = Some(s.clone());
                s
            })
            .ok_or(NetError::AddrInUse)?;
        socket.ok_or(NetError::AddrInUse)
    }
}
