//! Checksum offload as a device capability (virtio 1.2 §5.1.6.2 and
//! §5.1.6.4): over a device that says it completes transmit checksums, the
//! stack leaves TCP and UDP checksums partial (the pseudo-header sum in the
//! field) and the device's completion makes them right for a peer that
//! verifies; a received frame the device flags as verified (or partial) is
//! accepted with a wrong checksum, and the same frame unflagged is dropped.

mod common;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;

use common::{
    accepted, config, listen_recording, only_state, run_ms, sock, test_tcp, Recorder, IP_A, IP_B,
    MAC_A, MAC_B,
};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetStack, UdpHandler, UdpSocket};
use ebb_netstack::checksum::{complete_partial, partial_offsets, pseudo_header_sum, Checksum};
use ebb_netstack::device::{ChecksumCapabilities, Device, DeviceCapabilities, RxChecksum};
use ebb_netstack::sim::{udp_frame, LinkConfig, Sim, SimPort};
use ebb_netstack::tcp::State;
use ebb_netstack::{Instant, Stack};

type Frames = Rc<RefCell<Vec<Vec<u8>>>>;

/// A NIC with transmit checksum offload, in software: keeps what the stack
/// handed it and completes the partial checksum before the wire.
struct Offloading {
    port: SimPort,
    handed: Frames,
}

impl Device for Offloading {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        self.port.receive(now)
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        let mut bytes = frame.to_vec();
        self.handed.borrow_mut().push(bytes.clone());
        complete_partial(&mut bytes);
        self.port
            .transmit(now, IoChain::from(IoBuf::from_vec(bytes)));
    }

    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities {
            checksum: ChecksumCapabilities {
                tx_partial: true,
                ..ChecksumCapabilities::default()
            },
            ..DeviceCapabilities::default()
        }
    }
}

#[derive(Clone, Default)]
struct Datagrams(Rc<RefCell<Vec<Vec<u8>>>>);

impl UdpHandler for Datagrams {
    fn on_datagram(&mut self, _socket: &UdpSocket, _from: SocketAddr, data: IoBuf) {
        self.0.borrow_mut().push(data.to_vec());
    }
}

/// The transport checksum of an IPv4 TCP/UDP frame, whether it verifies as
/// is, and the pseudo-header sum it would hold if partial.
fn inspect(frame: &[u8]) -> Option<(u16, bool, u16)> {
    let (start, offset) = partial_offsets(frame)?;
    let ip = &frame[14..];
    let field = u16::from_be_bytes([frame[start + offset], frame[start + offset + 1]]);
    let len = u16::try_from(frame.len() - start).unwrap();
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let mut sum = Checksum::new();
    sum.add_pseudo_header(src, dst, ip[9], len);
    sum.add(&frame[start..]);
    Some((
        field,
        sum.verifies(),
        pseudo_header_sum(src, dst, ip[9], len),
    ))
}

#[test]
fn an_offloading_device_gets_partial_checksums_and_its_completion_verifies() {
    let mut sim = Sim::new(LinkConfig::default());
    let handed = Frames::default();
    let device = Offloading {
        port: sim.wire().port(),
        handed: handed.clone(),
    };
    let a = Stack::new(device, config(MAC_A, IP_A, test_tcp()), sim.now());
    let b = Stack::new(
        sim.wire().port(),
        config(MAC_B, IP_B, test_tcp()),
        sim.now(),
    );
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b.clone()));

    // UDP: B (verifying every checksum) gets the datagrams intact.
    let heard = Datagrams::default();
    b.udp_bind(sock(IP_B, 7), Box::new(heard.clone())).unwrap();
    let socket = a
        .udp_bind(sock(IP_A, 4000), Box::new(Datagrams::default()))
        .unwrap();
    for len in [0usize, 1, 2, 333, 1400] {
        let data: Vec<u8> = (0..len)
            .map(|i| u8::try_from((i * 7 + len) % 256).unwrap())
            .collect();
        socket
            .send_to(sock(IP_B, 7), IoChain::from(IoBuf::from_vec(data)))
            .unwrap();
    }
    run_ms(&mut sim, 10);
    let lens: Vec<usize> = heard.0.borrow().iter().map(Vec::len).collect();
    assert_eq!(lens, [0, 1, 2, 333, 1400]);

    // TCP: a connection and its data, both ways through B's verification.
    listen_recording(&b, 80, Recorder::new);
    a.connect(sock(IP_B, 80), Box::new(Recorder::new(Default::default())))
        .unwrap();
    run_ms(&mut sim, 50);
    assert_eq!(only_state(&a), Some(State::Established));
    assert_eq!(accepted(80).len(), 1);
    assert_eq!(b.stats().bad_checksum, 0);

    // What A handed its device: every TCP/UDP checksum partial.
    let frames = handed.borrow();
    let mut partial = 0;
    for frame in frames.iter() {
        if let Some((field, verifies, pseudo)) = inspect(frame) {
            assert_eq!(field, pseudo, "the field holds the pseudo-header sum");
            assert!(!verifies, "left to the device");
            partial += 1;
        }
    }
    assert!(partial >= 7, "{partial} partial frames");
}

/// A device handing out prepared frames with what it says of them.
#[derive(Default)]
struct Prepared {
    rx: VecDeque<(IoBuf, RxChecksum)>,
    tx: Vec<IoChain>,
}

impl Device for Prepared {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        self.receive_checked(now).map(|(frame, _)| frame)
    }

    fn receive_checked(&mut self, _now: Instant) -> Option<(IoBuf, RxChecksum)> {
        self.rx.pop_front()
    }

    fn transmit(&mut self, _now: Instant, frame: IoChain) {
        self.tx.push(frame);
    }

    fn capabilities(&self) -> DeviceCapabilities {
        DeviceCapabilities::default()
    }
}

#[test]
fn a_wrong_checksum_is_accepted_only_when_the_device_vouches_for_the_frame() {
    let stack = Stack::new(
        Prepared::default(),
        config(MAC_B, IP_B, test_tcp()),
        Instant(0),
    );
    let heard = Datagrams::default();
    stack
        .udp_bind(sock(IP_B, 7), Box::new(heard.clone()))
        .unwrap();
    let mut frame = udp_frame((MAC_A, IP_A, 5000), (MAC_B, IP_B, 7), b"checked?");
    let (start, offset) = partial_offsets(&frame).unwrap();
    frame[start + offset] ^= 0x5a;
    let flags = [
        (RxChecksum::Unverified, false),
        (RxChecksum::Verified, true),
        (RxChecksum::Partial, true),
    ];
    for (checksum, accepted) in flags {
        stack.with_device(|device| {
            device
                .rx
                .push_back((IoBuf::copy_from_slice(&frame), checksum));
        });
        let before = heard.0.borrow().len();
        let bad = stack.stats().bad_checksum;
        stack.poll(Instant(0));
        assert_eq!(
            heard.0.borrow().len() - before,
            usize::from(accepted),
            "{checksum:?}"
        );
        assert_eq!(
            stack.stats().bad_checksum - bad,
            u64::from(!accepted),
            "{checksum:?}"
        );
    }
    assert_eq!(heard.0.borrow()[0], b"checked?");

    // The IPv4 header checksum is still verified: the flags speak for the
    // transport checksum only.
    let mut frame = udp_frame((MAC_A, IP_A, 5000), (MAC_B, IP_B, 7), b"x");
    frame[14 + 10] ^= 1;
    stack.with_device(|device| {
        device
            .rx
            .push_back((IoBuf::copy_from_slice(&frame), RxChecksum::Verified));
    });
    let bad = stack.stats().bad_checksum;
    stack.poll(Instant(0));
    assert_eq!(stack.stats().bad_checksum, bad + 1);
}

#[test]
fn partial_offsets_find_the_transport_checksum_and_completion_matches_software() {
    let frame = udp_frame((MAC_A, IP_A, 5000), (MAC_B, IP_B, 7), b"hello, offload");
    assert_eq!(partial_offsets(&frame), Some((34, 6)));
    assert_eq!(partial_offsets(&frame[..39]), None, "cut before the field");
    let mut arp = frame.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(partial_offsets(&arp), None);
    // Make the checksum partial by hand, complete it, compare.
    let mut partial = frame.clone();
    let len = u16::try_from(frame.len() - 34).unwrap();
    let pseudo = pseudo_header_sum(IP_A, IP_B, 17, len);
    partial[40..42].copy_from_slice(&pseudo.to_be_bytes());
    assert!(complete_partial(&mut partial));
    assert_eq!(partial, frame);
}
