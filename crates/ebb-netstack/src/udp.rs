//! UDP (RFC 768) through smoltcp's `UdpPacket` view, and the table of bound
//! sockets with their application handlers.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use core::net::Ipv4Addr;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{UdpHandler, UdpSocket};
use smoltcp::wire::UdpPacket;

use crate::checksum::{pseudo_header_sum, Checksum};
use crate::RxError;

/// Length of a UDP header.
pub const HEADER_LEN: usize = 8;

/// IP protocol number of UDP.
const PROTOCOL: u8 = 17;

/// The first port handed out for binds to port 0 (the IANA dynamic range).
pub const EPHEMERAL_FIRST: u16 = 49_152;

/// A parsed datagram.
#[derive(Debug)]
pub struct Parsed {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// The data: exactly `length - 8` bytes, a view of the received frame.
    pub payload: IoBuf,
}

/// Parses a datagram (an IPv4 payload from `src` to `dst`).
///
/// # Errors
///
/// [`RxError::Truncated`] if the header is cut short or the length field is
/// below 8 or past the IP payload; [`RxError::BadChecksum`] if
/// `verify_checksum` and a non-zero checksum fails (zero means "none",
/// RFC 768).
pub fn parse(
    datagram: &IoBuf,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    verify_checksum: bool,
) -> Result<Parsed, RxError> {
    let view = UdpPacket::new_checked(datagram.as_slice()).map_err(|_| RxError::Truncated)?;
    let len = usize::from(view.len());
    let datagram = datagram.slice(..len).map_err(|_| RxError::Truncated)?;
    if verify_checksum && view.checksum() != 0 {
        let mut sum = Checksum::new();
        sum.add_pseudo_header(src, dst, PROTOCOL, view.len());
        sum.add(&datagram);
        if !sum.verifies() {
            return Err(RxError::BadChecksum);
        }
    }
    Ok(Parsed {
        src_port: view.src_port(),
        dst_port: view.dst_port(),
        payload: datagram
            .slice(HEADER_LEN..)
            .map_err(|_| RxError::Truncated)?,
    })
}

/// Writes a UDP header into `header` ([`HEADER_LEN`] bytes) for `payload`,
/// which follows it in a chain, with the checksum computed across the
/// pseudo-header, the header and every payload segment (no copy) — or,
/// if `partial`, only the pseudo-header sum, for a device that completes
/// it ([`crate::device::ChecksumCapabilities::tx_partial`]).
/// `payload.len() + 8` must fit in 16 bits.
pub fn emit(
    header: &mut [u8],
    src: (Ipv4Addr, u16),
    dst: (Ipv4Addr, u16),
    payload: &IoChain,
    partial: bool,
) {
    let len = u16::try_from(HEADER_LEN + payload.len()).unwrap_or(u16::MAX);
    let mut view = UdpPacket::new_unchecked(&mut *header);
    view.set_src_port(src.1);
    view.set_dst_port(dst.1);
    view.set_len(len);
    if partial {
        view.set_checksum(pseudo_header_sum(src.0, dst.0, PROTOCOL, len));
        return;
    }
    view.set_checksum(0);
    let mut sum = Checksum::new();
    sum.add_pseudo_header(src.0, dst.0, PROTOCOL, len);
    sum.add(view.into_inner());
    sum.add_chain(payload);
    // RFC 768: a computed checksum of zero is sent as all ones.
    let checksum = match sum.finish() {
        0 => 0xffff,
        c => c,
    };
    UdpPacket::new_unchecked(header).set_checksum(checksum);
}

struct Bound {
    id: u64,
    addr: Ipv4Addr,
    /// `None` while the handler runs (it is taken out so that it can send
    /// through the stack).
    handler: Option<Box<dyn UdpHandler>>,
    socket: UdpSocket,
}

/// The bound sockets, by local port.
#[derive(Default)]
pub struct UdpTable {
    sockets: BTreeMap<u16, Bound>,
    next_id: u64,
    next_ephemeral: u16,
}

impl UdpTable {
    /// Binds `addr:port` (port 0: a free ephemeral port); `make` builds the
    /// application's socket handle from the port and the binding's id.
    /// Returns the port, or `None` if it is taken (or no ephemeral port is
    /// free).
    pub fn bind(
        &mut self,
        addr: Ipv4Addr,
        port: u16,
        handler: Box<dyn UdpHandler>,
        make: impl FnOnce(u16, u64) -> UdpSocket,
    ) -> Option<u16> {
        let port = if port == 0 { self.free_port()? } else { port };
        if self.sockets.contains_key(&port) {
            return None;
        }
        self.next_id += 1;
        let id = self.next_id;
        let socket = make(port, id);
        self.sockets.insert(
            port,
            Bound {
                id,
                addr,
                handler: Some(handler),
                socket,
            },
        );
        Some(port)
    }

    fn free_port(&mut self) -> Option<u16> {
        let span = u16::MAX - EPHEMERAL_FIRST + 1;
        for _ in 0..span {
            let port = EPHEMERAL_FIRST + self.next_ephemeral % span;
            self.next_ephemeral = self.next_ephemeral.wrapping_add(1);
            if !self.sockets.contains_key(&port) {
                return Some(port);
            }
        }
        None
    }

    /// Whether binding `id` still holds `port`.
    #[must_use]
    pub fn is_bound(&self, port: u16, id: u64) -> bool {
        self.sockets.get(&port).is_some_and(|b| b.id == id)
    }

    /// Releases `port` if binding `id` holds it.
    pub fn unbind(&mut self, port: u16, id: u64) {
        if self.is_bound(port, id) {
            self.sockets.remove(&port);
        }
    }

    /// Whether a datagram to `dst:port` has a socket.
    #[must_use]
    pub fn accepts(&self, dst: Ipv4Addr, port: u16) -> bool {
        self.sockets
            .get(&port)
            .is_some_and(|b| b.addr.is_unspecified() || b.addr == dst)
    }

    /// Takes the handler of `port` out to run it: (binding id, handler,
    /// socket). `None` if nothing is bound or the handler is already running.
    pub fn take_handler(&mut self, port: u16) -> Option<(u64, Box<dyn UdpHandler>, UdpSocket)> {
        let bound = self.sockets.get_mut(&port)?;
        let handler = bound.handler.take()?;
        Some((bound.id, handler, bound.socket.clone()))
    }

    /// Puts a handler back after it ran, unless its socket was closed (or
    /// rebound) meanwhile; then it is dropped.
    pub fn put_back(&mut self, port: u16, id: u64, handler: Box<dyn UdpHandler>) {
        if let Some(bound) = self.sockets.get_mut(&port) {
            if bound.id == id {
                bound.handler = Some(handler);
            }
        }
    }

    /// Number of bound sockets.
    #[must_use]
    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    /// Whether no socket is bound.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn datagram(payload: &[u8]) -> alloc::vec::Vec<u8> {
        let chain = IoChain::from(IoBuf::copy_from_slice(payload));
        let mut header = [0u8; HEADER_LEN];
        emit(&mut header, (A, 1000), (B, 2000), &chain, false);
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn round_trip_across_segments() {
        let bytes = datagram(b"hello world");
        let parsed = parse(&IoBuf::from_vec(bytes), A, B, true).unwrap();
        assert_eq!((parsed.src_port, parsed.dst_port), (1000, 2000));
        assert_eq!(parsed.payload.as_slice(), b"hello world");
    }

    #[test]
    fn bad_datagrams() {
        let good = datagram(b"abcd");
        let mut bad = good.clone();
        bad[9] ^= 4;
        assert_eq!(
            parse(&IoBuf::from_vec(bad.clone()), A, B, true).unwrap_err(),
            RxError::BadChecksum
        );
        assert!(parse(&IoBuf::from_vec(bad), A, B, false).is_ok());
        // Wrong pseudo-header (a different destination) fails too.
        assert_eq!(
            parse(&IoBuf::from_vec(good.clone()), A, A, true).unwrap_err(),
            RxError::BadChecksum
        );
        let mut long = good.clone();
        long[4..6].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(
            parse(&IoBuf::from_vec(long), A, B, true).unwrap_err(),
            RxError::Truncated
        );
        let mut short = good.clone();
        short[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            parse(&IoBuf::from_vec(short), A, B, true).unwrap_err(),
            RxError::Truncated
        );
        assert_eq!(
            parse(&IoBuf::from_vec(vec![0; 7]), A, B, true).unwrap_err(),
            RxError::Truncated
        );
        // Zero checksum: none was computed (RFC 768).
        let mut none = good;
        none[6] = 0;
        none[7] = 0;
        assert!(parse(&IoBuf::from_vec(none), A, B, true).is_ok());
    }
}
