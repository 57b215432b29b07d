//! virtio-net checksum offload (virtio 1.2 §5.1.6.2, §5.1.6.4): the
//! `virtio_net_hdr` in front of each frame, built for transmit from what
//! the stack left partial, and read on receive into what the stack need
//! not verify.

use ebb_netstack::checksum::partial_offsets;
use ebb_netstack::RxChecksum;

/// `virtio_net_hdr` with VERSION_1 (§5.1.6): flags, gso_type, hdr_len,
/// gso_size, csum_start, csum_offset, num_buffers (little endian).
pub const HEADER: usize = 12;
/// `flags`: the checksum from `csum_start` on is partial (both ways).
const NEEDS_CSUM: u8 = 1;
/// `flags` on receive: the device verified the checksum.
const DATA_VALID: u8 = 2;

/// The transmit header for a frame starting with `headers` (its first
/// segment, which holds every header the stack wrote): with `csum` (the
/// device completes checksums, so the stack left TCP and UDP ones
/// partial), NEEDS_CSUM and where the checksum is; otherwise all zeros
/// (no offload, no GSO: §5.1.6.2.1).
pub fn tx_header(csum: bool, headers: &[u8]) -> [u8; HEADER] {
    let mut header = [0u8; HEADER];
    if let Some((start, offset)) = csum.then(|| partial_offsets(headers)).flatten() {
        header[0] = NEEDS_CSUM;
        header[6..8].copy_from_slice(&(start as u16).to_le_bytes());
        header[8..10].copy_from_slice(&(offset as u16).to_le_bytes());
    }
    header
}

/// What a received frame's header says of its transport checksum, if
/// GUEST_CSUM was negotiated (else the device sets no flags, §5.1.6.3).
pub fn rx_checksum(guest_csum: bool, header: &[u8]) -> RxChecksum {
    let flags = header.first().copied().unwrap_or(0);
    if !guest_csum {
        RxChecksum::Unverified
    } else if flags & NEEDS_CSUM != 0 {
        // §5.1.6.4: a packet from another guest or the host, its checksum
        // left for a NIC that never comes; the data did not cross a wire.
        RxChecksum::Partial
    } else if flags & DATA_VALID != 0 {
        RxChecksum::Verified
    } else {
        RxChecksum::Unverified
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use core::net::Ipv4Addr;
    use ebb_netstack::sim::udp_frame;
    use ebb_netstack::EthernetAddress;

    fn frame() -> std::vec::Vec<u8> {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let ip = Ipv4Addr::new(10, 0, 2, 15);
        udp_frame((mac, ip, 7), (mac, Ipv4Addr::new(10, 0, 2, 2), 9), b"x")
    }

    #[test]
    fn transmit_header_says_where_the_partial_checksum_is() {
        let frame = frame();
        // UDP after 14 + 20 bytes; its checksum 6 bytes in (§5.1.6.2).
        assert_eq!(
            tx_header(true, &frame),
            [NEEDS_CSUM, 0, 0, 0, 0, 0, 34, 0, 6, 0, 0, 0]
        );
        assert_eq!(tx_header(false, &frame), [0; HEADER], "not negotiated");
        let mut arp = frame.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(tx_header(true, &arp), [0; HEADER], "nothing to offload");
        assert_eq!(tx_header(true, &frame[..20]), [0; HEADER], "headers cut");
    }

    #[test]
    fn receive_flags_become_what_the_stack_may_skip() {
        let flags = |f: u8| [f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0];
        assert_eq!(rx_checksum(true, &flags(0)), RxChecksum::Unverified);
        assert_eq!(rx_checksum(true, &flags(DATA_VALID)), RxChecksum::Verified);
        assert_eq!(rx_checksum(true, &flags(NEEDS_CSUM)), RxChecksum::Partial);
        assert_eq!(
            rx_checksum(true, &flags(NEEDS_CSUM | DATA_VALID)),
            RxChecksum::Partial
        );
        // Without GUEST_CSUM the flags mean nothing (§5.1.6.3).
        assert_eq!(
            rx_checksum(false, &flags(DATA_VALID)),
            RxChecksum::Unverified
        );
        assert_eq!(rx_checksum(true, &[]), RxChecksum::Unverified);
    }
}
