//! Which received frames concern more than the core whose queue they
//! arrived on (multi-queue virtio-net, `net_cores.rs`): ARP packets (every
//! core's stack needs its neighbours) and DHCP messages from a server
//! (core 0 runs the only DHCP client). A look at fixed offsets only, no
//! allocation: every frame passes through it. Platform-neutral, so it is
//! tested on the host.

use core::net::Ipv4Addr;

const ETHERNET_HEADER: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const IP_PROTOCOL_UDP: u8 = 17;
/// RFC 2131 §4.1: servers send from port 67 to the client's port 68.
const DHCP_SERVER_PORT: u16 = 67;
const DHCP_CLIENT_PORT: u16 = 68;

/// What a received frame is, as far as sharing it between cores goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// An ARP packet for IPv4 over Ethernet (RFC 826) from this sender.
    Arp {
        /// The sender's protocol address.
        sender_ip: Ipv4Addr,
        /// The sender's hardware address.
        sender_mac: [u8; 6],
    },
    /// A UDP datagram from a DHCP server's port to a client's (RFC 2131),
    /// not a fragment.
    DhcpToClient,
    /// Anything else: only the core whose queue it reached cares.
    Other,
}

fn be16(frame: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
}

/// Classifies an Ethernet frame (without the virtio header).
pub fn classify(frame: &[u8]) -> FrameKind {
    match be16(frame, 12) {
        Some(ETHERTYPE_ARP) => arp(&frame[ETHERNET_HEADER..]),
        Some(ETHERTYPE_IPV4) => ipv4(&frame[ETHERNET_HEADER..]),
        _ => None,
    }
    .unwrap_or(FrameKind::Other)
}

fn arp(packet: &[u8]) -> Option<FrameKind> {
    // Hardware type 1 (Ethernet), protocol IPv4, lengths 6 and 4.
    if be16(packet, 0)? != 1 || be16(packet, 2)? != ETHERTYPE_IPV4 || packet.get(4..6)? != [6, 4] {
        return None;
    }
    let sender_mac: [u8; 6] = packet.get(8..14)?.try_into().ok()?;
    let ip: [u8; 4] = packet.get(14..18)?.try_into().ok()?;
    Some(FrameKind::Arp {
        sender_ip: Ipv4Addr::from(ip),
        sender_mac,
    })
}

fn ipv4(packet: &[u8]) -> Option<FrameKind> {
    let header_len = usize::from(packet.first()? & 0x0f) * 4;
    let fragment = be16(packet, 6)? & 0x3fff; // MF flag and offset
    if packet[0] >> 4 != 4 || header_len < 20 || fragment != 0 {
        return None;
    }
    if *packet.get(9)? != IP_PROTOCOL_UDP {
        return None;
    }
    let ports = (be16(packet, header_len)?, be16(packet, header_len + 2)?);
    (ports == (DHCP_SERVER_PORT, DHCP_CLIENT_PORT)).then_some(FrameKind::DhcpToClient)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut frame = Vec::from([0xffu8; 6]);
        frame.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(payload);
        frame
    }

    fn udp(fragment: u16, src: u16, dst: u16) -> Vec<u8> {
        let mut ip = Vec::from([0x45u8, 0, 0, 28, 0, 1]);
        ip.extend_from_slice(&fragment.to_be_bytes());
        ip.extend_from_slice(&[64, IP_PROTOCOL_UDP, 0, 0, 10, 0, 2, 2, 255, 255, 255, 255]);
        ip.extend_from_slice(&src.to_be_bytes());
        ip.extend_from_slice(&dst.to_be_bytes());
        ip.extend_from_slice(&[0, 8, 0, 0]);
        ethernet(ETHERTYPE_IPV4, &ip)
    }

    #[test]
    fn arp_packets_name_their_sender() {
        let mut arp = Vec::from([0u8, 1, 8, 0, 6, 4, 0, 2]);
        arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 10, 77, 9, 1]);
        arp.extend_from_slice(&[2, 0, 0, 0, 0, 1, 10, 77, 9, 2]);
        assert_eq!(
            classify(&ethernet(ETHERTYPE_ARP, &arp)),
            FrameKind::Arp {
                sender_ip: Ipv4Addr::new(10, 77, 9, 1),
                sender_mac: [2, 0, 0, 0, 0, 9]
            }
        );
        // Cut short, or not IPv4 over Ethernet.
        assert_eq!(
            classify(&ethernet(ETHERTYPE_ARP, &arp[..17])),
            FrameKind::Other
        );
        arp[1] = 6;
        assert_eq!(classify(&ethernet(ETHERTYPE_ARP, &arp)), FrameKind::Other);
    }

    #[test]
    fn dhcp_from_a_server_and_nothing_else() {
        assert_eq!(classify(&udp(0, 67, 68)), FrameKind::DhcpToClient);
        assert_eq!(
            classify(&udp(0x4000, 67, 68)),
            FrameKind::DhcpToClient,
            "DF"
        );
        assert_eq!(classify(&udp(0x2000, 67, 68)), FrameKind::Other, "MF");
        assert_eq!(classify(&udp(0, 68, 67)), FrameKind::Other);
        assert_eq!(classify(&udp(0, 53, 68)), FrameKind::Other);
        let short = udp(0, 67, 68);
        assert_eq!(classify(&short[..35]), FrameKind::Other);
        assert_eq!(classify(&[]), FrameKind::Other);
        assert_eq!(classify(&ethernet(0x86dd, &[0; 40])), FrameKind::Other);
    }
}
