//! IPv4 (RFC 791), through smoltcp's `Ipv4Packet` view.
//!
//! Received packets: the header length, total length and version are
//! checked before anything is read; the header checksum is verified unless
//! the device vouches for it; options are accepted and skipped; Ethernet
//! padding past the total length is cut off. **Fragments are dropped, not
//! reassembled** (a packet with MF set or a non-zero fragment offset): the
//! stack never sends datagrams larger than the MTU itself, and reassembly
//! buffers are a memory-exhaustion target; reassembly can come later if an
//! application needs it. Sent packets never carry options and have DF set.

use core::net::Ipv4Addr;

use ebb_iobuf::IoBuf;
use smoltcp::wire::{IpProtocol, Ipv4Packet};

use crate::RxError;

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// The time-to-live of packets we send (RFC 1700's recommended default).
pub const DEFAULT_TTL: u8 = 64;

/// The limited broadcast address (RFC 919).
pub const BROADCAST: Ipv4Addr = Ipv4Addr::BROADCAST;

/// A parsed IPv4 header with its payload.
#[derive(Debug)]
pub struct Parsed {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// The upper-layer protocol.
    pub protocol: IpProtocol,
    /// Time to live.
    pub ttl: u8,
    /// The payload, exactly `total length - header length` bytes (a view).
    pub payload: IoBuf,
}

/// Parses an IPv4 packet in `packet` (an Ethernet payload, possibly padded).
///
/// # Errors
///
/// [`RxError::Truncated`] if the header or the total length reaches past
/// the data, [`RxError::Malformed`] for a version other than 4 or a header
/// length below 20, [`RxError::BadChecksum`] if `verify_checksum` and the
/// header checksum fails, [`RxError::Fragment`] for fragments.
pub fn parse(packet: &IoBuf, verify_checksum: bool) -> Result<Parsed, RxError> {
    let view = Ipv4Packet::new_checked(packet.as_slice()).map_err(|_| RxError::Truncated)?;
    if view.version() != 4 || usize::from(view.header_len()) < HEADER_LEN {
        return Err(RxError::Malformed);
    }
    if verify_checksum && !view.verify_checksum() {
        return Err(RxError::BadChecksum);
    }
    if view.more_frags() || view.frag_offset() != 0 {
        return Err(RxError::Fragment);
    }
    let payload = packet
        .slice(usize::from(view.header_len())..usize::from(view.total_len()))
        .map_err(|_| RxError::Truncated)?;
    Ok(Parsed {
        src: view.src_addr(),
        dst: view.dst_addr(),
        protocol: view.next_header(),
        ttl: view.hop_limit(),
        payload,
    })
}

/// What goes into the header of a packet to send.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Upper-layer protocol.
    pub protocol: IpProtocol,
    /// Identification (RFC 791; unused with DF set, but kept distinct).
    pub ident: u16,
    /// Bytes after the header.
    pub payload_len: u16,
}

/// Writes a 20-byte header into `buf` through the view's setters and fills
/// in its checksum.
pub fn emit(buf: &mut [u8], header: &Header) {
    let mut view = Ipv4Packet::new_unchecked(buf);
    view.set_version(4);
    view.set_header_len(20);
    view.set_dscp(0);
    view.set_ecn(0);
    view.set_total_len(header.payload_len.saturating_add(20));
    view.set_ident(header.ident);
    view.clear_flags();
    view.set_dont_frag(true);
    view.set_frag_offset(0);
    view.set_hop_limit(DEFAULT_TTL);
    view.set_next_header(header.protocol);
    view.set_src_addr(header.src);
    view.set_dst_addr(header.dst);
    view.fill_checksum();
}

/// An address with its subnet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpConfig {
    /// Our address.
    pub addr: Ipv4Addr,
    /// The subnet's prefix length (0..=32).
    pub prefix_len: u8,
    /// The default gateway, if any.
    pub gateway: Option<Ipv4Addr>,
}

impl IpConfig {
    fn mask(&self) -> u32 {
        match self.prefix_len {
            0 => 0,
            n if n >= 32 => u32::MAX,
            n => u32::MAX << (32 - u32::from(n)),
        }
    }

    /// Whether `ip` is on our subnet.
    #[must_use]
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        (u32::from(ip) ^ u32::from(self.addr)) & self.mask() == 0
    }

    /// The subnet's directed broadcast address.
    #[must_use]
    pub fn subnet_broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !self.mask())
    }

    /// Whether a packet to `dst` is for us: our address, the limited
    /// broadcast or our subnet's broadcast.
    #[must_use]
    pub fn accepts(&self, dst: Ipv4Addr) -> bool {
        dst == self.addr
            || dst == BROADCAST
            || (self.prefix_len < 31 && dst == self.subnet_broadcast())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn packet(payload_len: u16) -> alloc::vec::Vec<u8> {
        let mut buf = vec![0u8; 20 + usize::from(payload_len)];
        emit(
            &mut buf,
            &Header {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 0, 2),
                protocol: IpProtocol::Udp,
                ident: 7,
                payload_len,
            },
        );
        buf
    }

    #[test]
    fn round_trip_and_padding_is_cut() {
        let mut buf = packet(4);
        buf.extend_from_slice(&[0xee; 10]); // Ethernet padding
        let parsed = parse(&IoBuf::from_vec(buf), true).unwrap();
        assert_eq!(parsed.payload.len(), 4);
        assert_eq!(parsed.protocol, IpProtocol::Udp);
        assert_eq!(parsed.dst, Ipv4Addr::new(10, 0, 0, 2));
    }

    #[test]
    fn bad_packets_are_rejected() {
        let good = packet(8);
        let mut bad_sum = good.clone();
        bad_sum[10] ^= 1;
        assert_eq!(
            parse(&IoBuf::from_vec(bad_sum.clone()), true).unwrap_err(),
            RxError::BadChecksum
        );
        assert!(
            parse(&IoBuf::from_vec(bad_sum), false).is_ok(),
            "the device vouched"
        );
        assert_eq!(
            parse(&IoBuf::from_vec(good[..19].to_vec()), true).unwrap_err(),
            RxError::Truncated
        );
        let mut long = good.clone();
        long[2..4].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(
            parse(&IoBuf::from_vec(long), false).unwrap_err(),
            RxError::Truncated
        );
        let mut short_total = good.clone();
        short_total[2..4].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(
            parse(&IoBuf::from_vec(short_total), false).unwrap_err(),
            RxError::Truncated,
            "a total length below the header's"
        );
        let mut v6 = good.clone();
        v6[0] = 0x65;
        assert_eq!(
            parse(&IoBuf::from_vec(v6), false).unwrap_err(),
            RxError::Malformed
        );
        let mut frag = good;
        frag[6] |= 0x20; // MF
        assert_eq!(
            parse(&IoBuf::from_vec(frag), false).unwrap_err(),
            RxError::Fragment
        );
    }

    #[test]
    fn subnets() {
        let c = IpConfig {
            addr: Ipv4Addr::new(192, 168, 1, 10),
            prefix_len: 24,
            gateway: None,
        };
        assert!(c.on_link(Ipv4Addr::new(192, 168, 1, 200)));
        assert!(!c.on_link(Ipv4Addr::new(192, 168, 2, 1)));
        assert_eq!(c.subnet_broadcast(), Ipv4Addr::new(192, 168, 1, 255));
        assert!(c.accepts(Ipv4Addr::new(192, 168, 1, 255)));
        assert!(!c.accepts(Ipv4Addr::new(192, 168, 1, 11)));
    }
}
