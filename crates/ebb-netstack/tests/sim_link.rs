//! The stack on the simulated link: ARP, ICMP echo, UDP echo over a lossy,
//! reordering wire, DHCP, zero copy, and robustness against bad input.

// Test data takes the low bits of counters on purpose.
#![allow(clippy::cast_possible_truncation)]

mod common;

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::rc::Rc;
use std::time::Duration;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetStack, UdpHandler, UdpSocket};
use ebb_netstack::device::{Device, Direction, FaultConfig, PcapWriter, Tracer};
use ebb_netstack::dhcp::DhcpState;
use ebb_netstack::rng::Rng;
use ebb_netstack::sim::{udp_frame, DhcpServer, LinkConfig, Sim, SimPort};
use ebb_netstack::{Config, EthernetAddress, IpConfig, Stack};

use common::Spy;

const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa]);
const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);
const MAC_X: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xee]);
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn static_config(mac: EthernetAddress, addr: Ipv4Addr) -> Config {
    Config::new_static(
        mac,
        IpConfig {
            addr,
            prefix_len: 24,
            gateway: None,
        },
    )
}

fn sock(ip: Ipv4Addr, port: u16) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(ip, port))
}

type Log = Rc<RefCell<Vec<(SocketAddr, Vec<u8>)>>>;

/// Records every datagram.
struct Recorder(Log);

impl UdpHandler for Recorder {
    fn on_datagram(&mut self, _socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        self.0.borrow_mut().push((from, data.to_vec()));
    }
}

/// Sends every datagram back, unchanged and uncopied.
struct Echo;

impl UdpHandler for Echo {
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        let _ = socket.send_to(from, IoChain::from(data));
    }
}

/// Two stacks A (10.0.0.1) and B (10.0.0.2) on one wire.
fn two_stacks(link: LinkConfig) -> (Sim, Stack<SimPort>, Stack<SimPort>) {
    let mut sim = Sim::new(link);
    let a = Stack::new(sim.wire().port(), static_config(MAC_A, IP_A), sim.now());
    let b = Stack::new(sim.wire().port(), static_config(MAC_B, IP_B), sim.now());
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b.clone()));
    (sim, a, b)
}

fn payload(i: usize) -> IoChain {
    let len = 1 + (i * 37) % 1000;
    IoChain::from(IoBuf::from_vec((0..len).map(|j| (i + j) as u8).collect()))
}

#[test]
fn arp_resolution_releases_queued_packets_in_order() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default());
    let log = Log::default();
    b.udp_bind(
        sock(Ipv4Addr::UNSPECIFIED, 7),
        Box::new(Recorder(log.clone())),
    )
    .unwrap();
    let socket = a
        .udp_bind(sock(IP_A, 5000), Box::new(Recorder(Log::default())))
        .unwrap();
    for i in 0..5u8 {
        socket
            .send_to(sock(IP_B, 7), IoChain::from(IoBuf::from_vec(vec![i; 10])))
            .unwrap();
    }
    assert_eq!(a.arp_sizes(), (0, 5), "all five wait for resolution");
    assert_eq!(sim.wire().sent(0), 1, "one ARP request, not five");
    sim.run_for(Duration::from_millis(10));
    let got: Vec<u8> = log.borrow().iter().map(|(_, d)| d[0]).collect();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    assert!(log
        .borrow()
        .iter()
        .all(|(from, _)| *from == sock(IP_A, 5000)));
    assert_eq!(a.arp_lookup(IP_B), Some(MAC_B));
    assert_eq!(
        b.arp_lookup(IP_A),
        Some(MAC_A),
        "B learned A from the request (RFC 826)"
    );
    assert_eq!(a.arp_sizes().1, 0);
}

#[test]
fn arp_entries_expire_and_are_resolved_again() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default());
    let log = Log::default();
    b.udp_bind(
        sock(Ipv4Addr::UNSPECIFIED, 7),
        Box::new(Recorder(log.clone())),
    )
    .unwrap();
    let socket = a
        .udp_bind(sock(IP_A, 0), Box::new(Recorder(Log::default())))
        .unwrap();
    socket.send_to(sock(IP_B, 7), payload(1)).unwrap();
    sim.run_for(Duration::from_millis(10));
    assert_eq!(a.arp_lookup(IP_B), Some(MAC_B));
    let sent = sim.wire().sent(0);
    sim.run_for(Duration::from_secs(61));
    assert_eq!(a.arp_lookup(IP_B), None, "expired after its 60 s lifetime");
    socket.send_to(sock(IP_B, 7), payload(2)).unwrap();
    assert_eq!(sim.wire().sent(0), sent + 1, "a new ARP request went out");
    sim.run_for(Duration::from_millis(10));
    assert_eq!(log.borrow().len(), 2);
    assert_eq!(a.arp_sizes().1, 0);
}

#[test]
fn unanswered_arp_is_retried_then_the_queue_times_out() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default());
    let socket = a
        .udp_bind(sock(IP_A, 0), Box::new(Recorder(Log::default())))
        .unwrap();
    socket
        .send_to(sock(Ipv4Addr::new(10, 0, 0, 99), 7), payload(1))
        .unwrap();
    sim.run_for(Duration::from_secs(5));
    assert_eq!(a.arp_sizes(), (0, 0));
    assert_eq!(a.arp_stats().queue_timed_out, 1);
    assert_eq!(sim.wire().sent(0), 3, "requests at 0, 1 and 2 s");
}

#[test]
fn icmp_echo() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default());
    let replies = Rc::new(RefCell::new(Vec::new()));
    let r = replies.clone();
    a.set_echo_reply_handler(Box::new(move |from, ident, seq, data: IoBuf| {
        r.borrow_mut().push((from, ident, seq, data.to_vec()));
    }));
    for seq in 0..3 {
        a.ping(
            IP_B,
            0x77,
            seq,
            IoChain::from(IoBuf::from_vec(vec![seq as u8; 56])),
        )
        .unwrap();
    }
    sim.run_for(Duration::from_millis(10));
    let replies = replies.borrow();
    assert_eq!(replies.len(), 3);
    for (seq, reply) in replies.iter().enumerate() {
        assert_eq!(*reply, (IP_B, 0x77, seq as u16, vec![seq as u8; 56]));
    }
    assert_eq!(b.stats().echo_replies_sent, 3);
}

/// Sends 300 datagrams of distinct contents through an echo server over a
/// wire with 10 % loss and 10 % reordering; returns what came back.
fn lossy_echo(seed: u64) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let link = LinkConfig {
        faults: FaultConfig {
            seed,
            loss_pct: 10,
            reorder_pct: 10,
            max_delay: Duration::from_micros(50),
            reorder_delay: Duration::from_millis(3),
            max_held: 1024,
            ..FaultConfig::default()
        },
        latency: Duration::from_micros(100),
        bandwidth_bps: 100_000_000,
    };
    let (mut sim, a, b) = two_stacks(link);
    b.udp_bind(sock(IP_B, 7), Box::new(Echo)).unwrap();
    let log = Log::default();
    let socket = a
        .udp_bind(sock(IP_A, 4000), Box::new(Recorder(log.clone())))
        .unwrap();
    let mut sent = Vec::new();
    for i in 0..300 {
        let data = payload(i);
        sent.push(data.to_vec());
        // Losses of ARP itself are covered by retries; a datagram sent
        // while the ARP queue is full is dropped, like on a real host.
        let _ = socket.send_to(sock(IP_B, 7), data);
        sim.run_for(Duration::from_millis(1));
    }
    sim.run_for(Duration::from_secs(5));
    let received = log.borrow().iter().map(|(_, d)| d.clone()).collect();
    (sent, received)
}

#[test]
fn udp_echo_with_loss_and_reordering() {
    let (sent, received) = lossy_echo(2024);
    // Intact or not at all: every datagram that arrived is one that was sent.
    for d in &received {
        assert!(sent.contains(d), "a datagram arrived altered");
    }
    let n = received.len();
    // Two passes over the wire at 10 % loss each: about 81 % come back.
    assert!((200..290).contains(&n), "{n} of 300 came back");
    let order: Vec<usize> = received
        .iter()
        .map(|d| sent.iter().position(|s| s == d).unwrap())
        .collect();
    assert!(
        order.windows(2).any(|w| w[0] > w[1]),
        "some arrived out of order"
    );
    assert_eq!(
        (sent, received),
        lossy_echo(2024),
        "deterministic for a seed"
    );
}

#[test]
fn dhcp_offer_request_ack_and_renew() {
    let mut sim = Sim::new(LinkConfig {
        latency: Duration::from_micros(50),
        ..LinkConfig::default()
    });
    let server = DhcpServer::new(
        sim.wire().port(),
        MAC_X,
        Ipv4Addr::new(192, 168, 7, 1),
        Ipv4Addr::new(192, 168, 7, 100),
        20,
    );
    let client = Stack::new(sim.wire().port(), Config::new_dhcp(MAC_A, 5), sim.now());
    sim.add(Box::new(server.clone()));
    sim.add(Box::new(client.clone()));
    assert_eq!(client.ip_config(), None);
    sim.run_for(Duration::from_secs(1));
    assert_eq!(
        client.ip_config(),
        Some(IpConfig {
            addr: Ipv4Addr::new(192, 168, 7, 100),
            prefix_len: 24,
            gateway: Some(Ipv4Addr::new(192, 168, 7, 1)),
        })
    );
    let (state, stats) = client.dhcp().unwrap();
    assert_eq!(state, DhcpState::Bound);
    assert_eq!(
        (stats.discovers, stats.offers, stats.requests, stats.acks),
        (1, 1, 1, 1)
    );
    assert_eq!((server.stats().offers, server.stats().acks), (1, 1));
    // T1 is at 10 s: the client renews by unicast and stays bound.
    sim.run_for(Duration::from_secs(11));
    let (state, stats) = client.dhcp().unwrap();
    assert_eq!(state, DhcpState::Bound);
    assert_eq!(stats.renews, 1);
    assert_eq!(stats.acks, 2);
    assert_eq!(server.stats().renewal_acks, 1);
    // The lease keeps being renewed for a long time.
    sim.run_for(Duration::from_secs(100));
    assert_eq!(client.dhcp().unwrap().0, DhcpState::Bound);
    assert!(server.stats().renewal_acks >= 10);
    assert_eq!(
        client.ip_config().unwrap().addr,
        Ipv4Addr::new(192, 168, 7, 100)
    );
}

#[test]
fn dhcp_lease_ends_without_a_server() {
    let mut sim = Sim::new(LinkConfig::default());
    let server_port = sim.wire().port();
    let server = DhcpServer::new(
        server_port,
        MAC_X,
        Ipv4Addr::new(192, 168, 7, 1),
        Ipv4Addr::new(192, 168, 7, 100),
        20,
    );
    let client = Stack::new(sim.wire().port(), Config::new_dhcp(MAC_A, 5), sim.now());
    sim.add(Box::new(client.clone()));
    let mut server_node = server.clone();
    // Poll the server by hand only at the start: then it "goes away".
    for _ in 0..10 {
        ebb_netstack::sim::Node::poll(&mut server_node, sim.now());
        sim.run_for(Duration::from_millis(1));
    }
    assert!(client.ip_config().is_some());
    sim.run_for(Duration::from_secs(25));
    assert_eq!(client.ip_config(), None, "the lease ended");
    let (state, stats) = client.dhcp().unwrap();
    assert_eq!(state, DhcpState::Selecting);
    assert!(stats.renews >= 1 && stats.rebinds >= 1);
}

/// Echoes and records where each datagram's bytes lived.
struct PointerEcho(Rc<RefCell<Vec<(usize, usize)>>>);

impl UdpHandler for PointerEcho {
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        self.0
            .borrow_mut()
            .push((data.as_ptr() as usize, data.len()));
        socket.send_to(from, IoChain::from(data)).unwrap();
    }
}

#[test]
fn udp_echo_never_copies_payloads() {
    let mut sim = Sim::new(LinkConfig::default());
    let a = Stack::new(sim.wire().port(), static_config(MAC_A, IP_A), sim.now());
    let rx = Rc::new(RefCell::new(Vec::new()));
    let tx = Rc::new(RefCell::new(Vec::new()));
    let spy = Spy {
        inner: sim.wire().port(),
        rx: rx.clone(),
        tx: tx.clone(),
    };
    let b = Stack::new(spy, static_config(MAC_B, IP_B), sim.now());
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b.clone()));
    let seen = Rc::new(RefCell::new(Vec::new()));
    b.udp_bind(sock(IP_B, 7), Box::new(PointerEcho(seen.clone())))
        .unwrap();
    let log = Log::default();
    let socket = a
        .udp_bind(sock(IP_A, 4000), Box::new(Recorder(log.clone())))
        .unwrap();
    // A sends a payload made of two buffers; both must go out unchanged.
    let first = IoBuf::from_vec(vec![1; 300]);
    let second = IoBuf::from_vec(vec![2; 200]);
    let mut data = IoChain::new();
    data.push_back(first.clone());
    data.push_back(second.clone());
    for _ in 0..3 {
        socket.send_to(sock(IP_B, 7), data.clone()).unwrap();
    }
    sim.run_for(Duration::from_millis(10));
    assert_eq!(log.borrow().len(), 3);
    let expect: Vec<u8> = [vec![1u8; 300], vec![2u8; 200]].concat();
    assert!(log.borrow().iter().all(|(_, d)| *d == expect));

    // Receive: the application's view points into the received frame, just
    // past the Ethernet, IPv4 and UDP headers.
    let seen = seen.borrow();
    assert_eq!(seen.len(), 3);
    let rx = rx.borrow();
    for (ptr, len) in seen.iter() {
        assert_eq!(*len, 500);
        assert!(
            rx.iter()
                .any(|(frame, flen)| *frame + 42 == *ptr && *flen == 542),
            "payload is a view of a receive buffer"
        );
    }
    // Send: each echo is [header buffer, the received view itself].
    let echoes: Vec<_> = tx
        .borrow()
        .iter()
        .filter(|f| f.len() > 1)
        .cloned()
        .collect();
    assert_eq!(echoes.len(), 3);
    for (frame, received) in echoes.iter().zip(seen.iter()) {
        assert_eq!(frame.len(), 2, "one header buffer, one payload buffer");
        assert_eq!(
            frame[0].1, 42,
            "Ethernet + IPv4 + UDP headers in one buffer"
        );
        assert_eq!(
            frame[1], *received,
            "the payload buffer is chained unchanged"
        );
    }
}

#[test]
fn sends_chain_the_callers_buffers() {
    let mut sim = Sim::new(LinkConfig::default());
    let tx = Rc::new(RefCell::new(Vec::new()));
    let spy = Spy {
        inner: sim.wire().port(),
        rx: Rc::default(),
        tx: tx.clone(),
    };
    let a = Stack::new(spy, static_config(MAC_A, IP_A), sim.now());
    let b = Stack::new(sim.wire().port(), static_config(MAC_B, IP_B), sim.now());
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b.clone()));
    b.udp_bind(sock(IP_B, 7), Box::new(Recorder(Log::default())))
        .unwrap();
    let socket = a
        .udp_bind(sock(IP_A, 4000), Box::new(Recorder(Log::default())))
        .unwrap();
    let first = IoBuf::from_vec(vec![1; 300]);
    let second = IoBuf::from_vec(vec![2; 200]);
    let mut data = IoChain::new();
    data.push_back(first.clone());
    data.push_back(second.clone());
    socket.send_to(sock(IP_B, 7), data).unwrap();
    sim.run_for(Duration::from_millis(10));
    let frames = tx.borrow();
    let frame = frames
        .iter()
        .find(|f| f.len() > 1)
        .expect("the datagram went out after ARP");
    assert_eq!(
        frame[1..],
        [
            (first.as_ptr() as usize, 300),
            (second.as_ptr() as usize, 200)
        ]
    );
}

fn fix_ip_checksum(frame: &mut [u8]) {
    smoltcp::wire::Ipv4Packet::new_unchecked(&mut frame[14..34]).fill_checksum();
}

/// A raw port on the wire to throw hand-made frames at B.
fn frame_to_b(payload: &[u8]) -> Vec<u8> {
    udp_frame((MAC_A, IP_A, 4000), (MAC_B, IP_B, 7), payload)
}

#[test]
fn bad_checksums_truncated_headers_and_bogus_lengths_are_dropped() {
    let (mut sim, _a, b) = two_stacks(LinkConfig::default());
    let mut raw = sim.wire().port();
    let log = Log::default();
    b.udp_bind(sock(IP_B, 7), Box::new(Recorder(log.clone())))
        .unwrap();
    let good = frame_to_b(b"hello");
    let mut send = |frame: Vec<u8>| {
        raw.transmit(sim.now(), IoChain::from(IoBuf::from_vec(frame)));
        sim.run_for(Duration::from_micros(10));
    };
    send(good.clone());
    assert_eq!(log.borrow().len(), 1);
    let base = b.stats();

    let mut ip_sum = good.clone();
    ip_sum[24] ^= 0x40; // IPv4 header checksum
    send(ip_sum);
    let mut udp_sum = good.clone();
    udp_sum[40] ^= 0x01; // UDP checksum
    send(udp_sum);
    let mut data = good.clone();
    data[44] ^= 0x10; // payload byte: the UDP checksum catches it
    send(data);
    assert_eq!(b.stats().bad_checksum - base.bad_checksum, 3);

    send(good[..10].to_vec()); // Ethernet header cut
    send(good[..14 + 15].to_vec()); // IPv4 header cut
    send(good[..14 + 20 + 4].to_vec()); // UDP header cut (IPv4 says more)
    let mut ip_long = good.clone();
    ip_long[16..18].copy_from_slice(&2000u16.to_be_bytes()); // total length
    send(ip_long);
    let mut ip_ihl = good.clone();
    ip_ihl[14] = 0x4f; // header length 60 > total
    send(ip_ihl);
    let mut udp_long = good.clone();
    udp_long[38..40].copy_from_slice(&200u16.to_be_bytes()); // UDP length
    send(udp_long);
    let mut udp_short = good.clone();
    udp_short[38..40].copy_from_slice(&3u16.to_be_bytes());
    send(udp_short);
    assert_eq!(b.stats().truncated - base.truncated, 7);

    let mut ip_ihl_small = good.clone();
    ip_ihl_small[14] = 0x44; // header length 16
    send(ip_ihl_small);
    let mut fragment = good.clone();
    fragment[20] = 0x20; // MF
    fix_ip_checksum(&mut fragment);
    send(fragment);
    let mut offset = good.clone();
    offset[21] = 0x10; // fragment offset 16 * 8
    fix_ip_checksum(&mut offset);
    send(offset);
    assert_eq!(b.stats().fragments - base.fragments, 2);
    assert_eq!(b.stats().malformed - base.malformed, 1);
    assert_eq!(log.borrow().len(), 1, "nothing bad reached the application");

    // Ethernet padding after a valid datagram is cut off, not delivered.
    let mut padded = frame_to_b(b"hi");
    padded.resize(60, 0);
    send(padded);
    assert_eq!(log.borrow().last().unwrap().1, b"hi");
}

#[test]
fn random_and_mutated_frames_never_panic() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default());
    let mut raw = sim.wire().port();
    b.udp_bind(sock(IP_B, 7), Box::new(Echo)).unwrap();
    let mut rng = Rng::new(77);
    let good = frame_to_b(&[7; 64]);
    for i in 0..5000 {
        let frame = if i % 2 == 0 {
            let len = usize::try_from(rng.below(120)).unwrap();
            (0..len).map(|_| rng.next_u32() as u8).collect()
        } else {
            let mut f = good.clone();
            for _ in 0..1 + rng.below(4) {
                let at = usize::try_from(rng.below(f.len() as u64)).unwrap();
                f[at] = rng.next_u32() as u8;
            }
            let keep = usize::try_from(rng.below(f.len() as u64 + 1)).unwrap();
            f.truncate(keep);
            f
        };
        raw.transmit(sim.now(), IoChain::from(IoBuf::from_vec(frame)));
        sim.run_for(Duration::from_micros(1));
    }
    assert!(b.stats().rx_frames >= 5000);
    assert!(b.arp_sizes().0 <= 64 && a.arp_sizes().0 <= 64);
}

#[test]
fn arp_flood_keeps_memory_bounded() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default());
    let mut raw = sim.wire().port();
    for i in 0..10_000u32 {
        let sender_ip = Ipv4Addr::from(0x0a01_0000 + i);
        let sender_mac = EthernetAddress([2, 1, (i >> 16) as u8, (i >> 8) as u8, i as u8, 1]);
        // Half target B (B learns the sender), half target someone else.
        let target = if i % 2 == 0 {
            IP_B
        } else {
            Ipv4Addr::new(10, 0, 0, 200)
        };
        let mut frame = vec![0u8; 42];
        ebb_netstack::ethernet::emit(
            &mut frame[..14],
            sender_mac,
            ebb_netstack::ethernet::BROADCAST,
            smoltcp_ethertype_arp(),
        );
        ebb_netstack::arp::emit(
            &mut frame[14..],
            &ebb_netstack::arp::request(sender_mac, sender_ip, target),
        );
        raw.transmit(sim.now(), IoChain::from(IoBuf::from_vec(frame)));
        if i % 50 == 0 {
            sim.run_for(Duration::from_micros(10));
        }
    }
    sim.run_for(Duration::from_millis(1));
    assert!(b.arp_sizes().0 <= 64, "B's cache stays within its capacity");
    assert!(b.arp_stats().evicted >= 4000);
    assert_eq!(
        a.arp_sizes().0,
        0,
        "A was not the target: it learned nothing"
    );
    // Sends to thousands of unresolvable addresses: the queue stays bounded.
    let socket = a
        .udp_bind(sock(IP_A, 0), Box::new(Recorder(Log::default())))
        .unwrap();
    for i in 0..1000u32 {
        let _ = socket.send_to(sock(Ipv4Addr::from(0x0a00_0003 + i % 250), 9), payload(1));
    }
    assert_eq!(a.arp_sizes().1, 32);
    assert_eq!(a.arp_stats().queue_dropped, 968);
}

fn smoltcp_ethertype_arp() -> smoltcp::wire::EthernetProtocol {
    smoltcp::wire::EthernetProtocol::Arp
}

#[test]
fn tracer_and_pcap_wrap_any_device() {
    let mut sim = Sim::new(LinkConfig::default());
    let lines = Rc::new(RefCell::new(Vec::new()));
    let l = lines.clone();
    let traced = Tracer::new(sim.wire().port(), move |_now, dir, frame: &IoChain| {
        l.borrow_mut()
            .push((dir, ebb_netstack::device::summarize(frame)));
    });
    let a = Stack::new(
        PcapWriter::new(traced, Vec::new()),
        static_config(MAC_A, IP_A),
        sim.now(),
    );
    let b = Stack::new(sim.wire().port(), static_config(MAC_B, IP_B), sim.now());
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b));
    a.ping(IP_B, 1, 1, IoChain::from(IoBuf::from_vec(vec![0; 8])))
        .unwrap();
    sim.run_for(Duration::from_millis(5));
    // ARP request, ARP reply, echo request, echo reply.
    let lines = lines.borrow();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(lines.iter().filter(|(d, _)| *d == Direction::Tx).count(), 2);
    assert!(lines[0].1.contains("ARP"), "{}", lines[0].1);
    assert!(lines[3].1.contains("ICMPv4"), "{}", lines[3].1);
    let capture = a.with_device(|d| d.sink().clone());
    assert_eq!(capture[0..4], 0xa1b2_c3d4u32.to_le_bytes());
    // Walk the records: 4 frames whose lengths add up.
    let mut at = 24;
    let mut records = 0;
    while at < capture.len() {
        let len = u32::from_le_bytes(capture[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + len;
        records += 1;
    }
    assert_eq!((records, at), (4, capture.len()));
}

#[test]
fn a_leased_address_is_announced_once() {
    let mut sim = Sim::new(LinkConfig::default());
    let server = DhcpServer::new(
        sim.wire().port(),
        MAC_X,
        Ipv4Addr::new(192, 168, 7, 1),
        Ipv4Addr::new(192, 168, 7, 100),
        20,
    );
    let sent = Rc::new(RefCell::new(Vec::new()));
    let log = sent.clone();
    let traced = Tracer::new(sim.wire().port(), move |_now, dir, frame: &IoChain| {
        if dir == Direction::Tx {
            log.borrow_mut().push(frame.to_vec());
        }
    });
    let client = Stack::new(traced, Config::new_dhcp(MAC_A, 5), sim.now());
    sim.add(Box::new(server));
    sim.add(Box::new(client.clone()));
    // Bound at once, then renewed at T1 (10 s) and again after.
    sim.run_for(Duration::from_secs(25));
    assert!(client.dhcp().unwrap().1.renews >= 1);
    let leased = Ipv4Addr::new(192, 168, 7, 100);
    let announcements = sent
        .borrow()
        .iter()
        .filter_map(|frame| {
            let eth = smoltcp::wire::EthernetFrame::new_checked(&frame[..]).ok()?;
            let arp = smoltcp::wire::ArpPacket::new_checked(eth.payload()).ok()?;
            let repr = smoltcp::wire::ArpRepr::parse(&arp).ok()?;
            let smoltcp::wire::ArpRepr::EthernetIpv4 {
                source_protocol_addr,
                target_protocol_addr,
                ..
            } = repr
            else {
                return None;
            };
            // RFC 5227 §2.3: sender and target address are both ours.
            (source_protocol_addr == leased && target_protocol_addr == leased)
                .then(|| eth.dst_addr())
        })
        .collect::<Vec<_>>();
    assert_eq!(
        announcements,
        vec![ebb_netstack::ethernet::BROADCAST],
        "one broadcast announcement, none at renewals"
    );
}

/// Stacks sharing one link (one per core over a multi-queue device): a
/// neighbour another stack learned releases the packets waiting here, and
/// the address can be given from outside (another stack's DHCP lease).
#[test]
fn a_neighbour_learned_elsewhere_releases_waiting_packets() {
    let mut sim = Sim::new(LinkConfig::default());
    let a = Stack::new(sim.wire().port(), static_config(MAC_A, IP_A), sim.now());
    sim.add(Box::new(a.clone()));
    let socket = a
        .udp_bind(
            sock(Ipv4Addr::UNSPECIFIED, 5000),
            Box::new(Recorder(Log::default())),
        )
        .unwrap();
    socket.send_to(sock(IP_B, 7), payload(1)).unwrap();
    assert_eq!(a.arp_sizes(), (0, 1));
    assert_eq!(sim.wire().sent(0), 1, "the ARP request");
    a.learn_neighbour(IP_B, MAC_B, sim.now());
    assert_eq!(a.arp_sizes(), (1, 0), "learned, and the datagram went out");
    assert_eq!(sim.wire().sent(0), 2);
    assert_eq!(a.arp_lookup(IP_B), Some(MAC_B));
    a.learn_neighbour(IP_B, EthernetAddress([0xff; 6]), sim.now());
    assert_eq!(a.arp_lookup(IP_B), Some(MAC_B), "broadcast is no neighbour");

    a.set_ip_config(None);
    assert_eq!(a.ip_config(), None);
    let refused = socket.send_to(sock(IP_B, 7), payload(2)).unwrap_err();
    assert_eq!(refused.error, ebb_net::NetError::AddrNotAvailable);
    let lease = IpConfig {
        addr: Ipv4Addr::new(10, 0, 0, 3),
        prefix_len: 24,
        gateway: None,
    };
    a.set_ip_config(Some(lease));
    assert_eq!(a.ip_config(), Some(lease));
    socket.send_to(sock(IP_B, 7), payload(3)).unwrap();
    assert_eq!(sim.wire().sent(0), 3);
}
