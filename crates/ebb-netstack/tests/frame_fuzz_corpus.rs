//! Replays the seed corpus of the `frame` fuzz target
//! (`fuzz/corpus/frame/`) through the stacks on stable, with the fuzz
//! target's checks (no panic, bounded ARP state, every frame sent
//! well-formed; see `frame_support`), and checks the seeds do what they
//! are named for. `EBB_WRITE_FRAME_CORPUS=1 cargo test -p ebb-netstack
//! --test frame_fuzz_corpus` rewrites the corpus from [`seeds`].

// Test data takes the low bits of counters on purpose.
#![allow(clippy::cast_possible_truncation)]

mod frame_support;

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use ebb_iobuf::{IoBuf, IoChain};
use ebb_netstack::sim::udp_frame;
use ebb_netstack::{arp, ethernet, icmp, ipv4, EthernetAddress};
use frame_support::{join_frames, run, split_frames, ECHO_PORT, US_IP, US_MAC};
use smoltcp::wire::{ArpOperation, ArpRepr, EthernetProtocol, IpProtocol};

const PEER_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa]);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/frame")
}

fn udp_to_us(payload: &[u8]) -> Vec<u8> {
    udp_frame(
        (PEER_MAC, PEER_IP, 4000),
        (US_MAC, US_IP, ECHO_PORT),
        payload,
    )
}

fn arp_frame(repr: &ArpRepr, dst: EthernetAddress) -> Vec<u8> {
    let mut frame = vec![0u8; ethernet::HEADER_LEN + arp::PACKET_LEN];
    let (eth, body) = frame.split_at_mut(ethernet::HEADER_LEN);
    ethernet::emit(eth, PEER_MAC, dst, EthernetProtocol::Arp);
    arp::emit(body, repr);
    frame
}

/// The peer tells us its address (an ARP reply), so our replies go out.
fn peer_arp_reply() -> Vec<u8> {
    arp_frame(
        &ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: PEER_MAC,
            source_protocol_addr: PEER_IP,
            target_hardware_addr: US_MAC,
            target_protocol_addr: US_IP,
        },
        US_MAC,
    )
}

fn echo_request(data: &[u8], dst_ip: Ipv4Addr) -> Vec<u8> {
    let chain = IoChain::from(IoBuf::copy_from_slice(data));
    let headers = ethernet::HEADER_LEN + ipv4::HEADER_LEN + icmp::HEADER_LEN;
    let mut frame = vec![0u8; headers];
    let (eth, rest) = frame.split_at_mut(ethernet::HEADER_LEN);
    let (ip, message) = rest.split_at_mut(ipv4::HEADER_LEN);
    ethernet::emit(eth, PEER_MAC, US_MAC, EthernetProtocol::Ipv4);
    ipv4::emit(
        ip,
        &ipv4::Header {
            src: PEER_IP,
            dst: dst_ip,
            protocol: IpProtocol::Icmp,
            ident: 1,
            payload_len: (icmp::HEADER_LEN + data.len()) as u16,
        },
    );
    icmp::emit_echo(message, false, 0x4242, 1, &chain);
    frame.extend_from_slice(data);
    frame
}

fn fix_ip_checksum(frame: &mut [u8]) {
    smoltcp::wire::Ipv4Packet::new_unchecked(&mut frame[14..34]).fill_checksum();
}

/// The seeds: named inputs covering each protocol's paths, good and bad.
fn seeds() -> Vec<(&'static str, Vec<Vec<u8>>)> {
    let good = udp_to_us(b"hello");
    let mut ip_sum = good.clone();
    ip_sum[24] ^= 0x40;
    let mut udp_sum = good.clone();
    udp_sum[40] ^= 1;
    let mut ip_long = good.clone();
    ip_long[16..18].copy_from_slice(&2000u16.to_be_bytes());
    let mut udp_long = good.clone();
    udp_long[38..40].copy_from_slice(&200u16.to_be_bytes());
    let mut udp_short = good.clone();
    udp_short[38..40].copy_from_slice(&3u16.to_be_bytes());
    let mut ihl_big = good.clone();
    ihl_big[14] = 0x4f;
    let mut fragment = good.clone();
    fragment[20] = 0x20;
    fix_ip_checksum(&mut fragment);
    let mut padded = udp_to_us(b"hi");
    padded.resize(60, 0);
    let mut other_mac = good.clone();
    other_mac[..6].copy_from_slice(&[2, 9, 9, 9, 9, 9]);
    let mut ipv6 = good.clone();
    ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
    let broadcast = udp_frame(
        (PEER_MAC, PEER_IP, 4000),
        (ethernet::BROADCAST, Ipv4Addr::new(10, 0, 0, 255), ECHO_PORT),
        b"to all",
    );
    let mut bootp = vec![0u8; 240];
    bootp[0] = 2; // BOOTREPLY
    bootp[1] = 1; // Ethernet
    bootp[2] = 6;
    bootp[236..240].copy_from_slice(&[99, 130, 83, 99]); // magic cookie
    bootp.extend_from_slice(&[53, 1, 2, 54, 4, 10, 0, 0, 1, 255]); // OFFER
    let dhcp_offer = udp_frame(
        (PEER_MAC, PEER_IP, 67),
        (ethernet::BROADCAST, Ipv4Addr::BROADCAST, 68),
        &bootp,
    );
    let who_has_us = arp_frame(&arp::request(PEER_MAC, PEER_IP, US_IP), ethernet::BROADCAST);
    let arp_flood: Vec<Vec<u8>> = (0..100u32)
        .map(|i| {
            let mac = EthernetAddress([2, 1, 0, 0, i as u8, 1]);
            let mut frame = arp_frame(
                &arp::request(mac, Ipv4Addr::from(0x0a01_0000 + i), US_IP),
                ethernet::BROADCAST,
            );
            frame[6..12].copy_from_slice(&mac.0);
            frame
        })
        .collect();
    let sizes: Vec<Vec<u8>> = [0usize, 1, 18, 512, 1472]
        .iter()
        .map(|&len| udp_to_us(&vec![len as u8; len]))
        .collect();
    let mut with_reply = vec![peer_arp_reply()];
    with_reply.extend(sizes);
    vec![
        ("udp_echo_unresolved", vec![good.clone()]),
        ("udp_echo", vec![peer_arp_reply(), good.clone()]),
        ("udp_sizes", with_reply),
        (
            "icmp_echo",
            vec![peer_arp_reply(), echo_request(b"ping data", US_IP)],
        ),
        (
            "icmp_to_broadcast",
            vec![echo_request(b"x", Ipv4Addr::new(10, 0, 0, 255))],
        ),
        ("arp_who_has_us", vec![who_has_us]),
        ("arp_flood", arp_flood),
        ("bad_ip_checksum", vec![ip_sum]),
        ("bad_udp_checksum", vec![udp_sum]),
        (
            "truncated_headers",
            vec![
                good[..10].to_vec(),
                good[..14 + 15].to_vec(),
                good[..14 + 20 + 4].to_vec(),
            ],
        ),
        ("bogus_lengths", vec![ip_long, udp_long, udp_short, ihl_big]),
        ("fragment", vec![fragment]),
        ("padded", vec![peer_arp_reply(), padded]),
        ("not_for_us", vec![other_mac]),
        ("ipv6", vec![ipv6]),
        ("udp_broadcast", vec![broadcast]),
        ("dhcp_offer_unknown_xid", vec![dhcp_offer]),
        ("empty_frames", vec![vec![], vec![0xff; 3]]),
    ]
}

#[test]
fn the_frame_fuzz_corpus_replays_cleanly() {
    let dir = corpus_dir();
    if std::env::var_os("EBB_WRITE_FRAME_CORPUS").is_some() {
        fs::create_dir_all(&dir).unwrap();
        for (name, frames) in seeds() {
            fs::write(dir.join(name), join_frames(&frames)).unwrap();
        }
    }
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= seeds().len(),
        "only {} corpus files in {}",
        files.len(),
        dir.display()
    );
    for path in &files {
        let outcome = run(&fs::read(path).unwrap());
        assert!(outcome.frames > 0, "{}: no frame in it", path.display());
    }
}

#[test]
fn the_seeds_do_what_they_are_named_for() {
    let outcome = |name: &str| {
        let (_, frames) = seeds().into_iter().find(|(n, _)| *n == name).unwrap();
        run(&join_frames(&frames))
    };
    // UDP from the static stack (the DHCP client sends its own).
    let udp_frames = |sent: &[Vec<u8>]| {
        sent.iter()
            .filter(|frame| frame.len() > 34 && frame[6..12] == US_MAC.0)
            .filter(|frame| frame[12..14] == [8, 0] && frame[23] == 17)
            .count()
    };
    // Replies go out once the peer's address is known.
    let echo = outcome("udp_echo");
    assert_eq!(echo.udp_delivered, 1);
    assert_eq!(udp_frames(&echo.sent), 1);
    let sizes = outcome("udp_sizes");
    assert_eq!(sizes.udp_delivered, 5);
    assert_eq!(udp_frames(&sizes.sent), 5);
    // Without it the reply waits for ARP: a request goes out instead.
    let unresolved = outcome("udp_echo_unresolved");
    assert_eq!(unresolved.udp_delivered, 1);
    assert_eq!(udp_frames(&unresolved.sent), 0);
    assert_eq!(outcome("icmp_echo").echo_replies_sent, 1);
    assert_eq!(outcome("icmp_to_broadcast").echo_replies_sent, 0);
    for bad in [
        "bad_ip_checksum",
        "bad_udp_checksum",
        "truncated_headers",
        "bogus_lengths",
        "fragment",
        "not_for_us",
        "ipv6",
    ] {
        assert_eq!(
            outcome(bad).udp_delivered,
            0,
            "{bad} reached the application"
        );
    }
    assert_eq!(outcome("padded").udp_delivered, 1);
    // The echo socket is bound to our address, not the wildcard: as on
    // Linux, a datagram to the subnet broadcast does not reach it.
    assert_eq!(outcome("udp_broadcast").udp_delivered, 0);
}

#[test]
fn frames_split_and_join() {
    let frames = vec![vec![1, 2, 3], vec![], vec![9; 300]];
    let data = join_frames(&frames);
    let split: Vec<Vec<u8>> = split_frames(&data).iter().map(|f| f.to_vec()).collect();
    assert_eq!(split, frames);
    // A length past the end takes what is left; a lone byte is no frame.
    assert_eq!(split_frames(&[0, 9, 1, 2]), vec![&[1u8, 2][..]]);
    assert!(split_frames(&[7]).is_empty());
}
