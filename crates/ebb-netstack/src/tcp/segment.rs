//! TCP segment parsing and emission (RFC 9293 §3.1) through smoltcp's
//! `TcpPacket` view; options MSS (RFC 9293 §3.7.1) and window scale
//! (RFC 7323 §2).
//!
//! Parsing never fails on options: an option with a bogus length ends
//! option processing and the segment is handled without the rest
//! (RFC 9293 §3.1: "a TCP implementation MUST be prepared to handle an
//! illegal option length ... without crashing"; we keep the segment and
//! ignore the options, as RFC 1122 §4.2.2.5 prefers to resetting).

use core::net::Ipv4Addr;

use ebb_iobuf::{IoBuf, IoBufMut, IoChain};
use smoltcp::wire::{TcpOption, TcpPacket, TcpSeqNumber};

use super::seq::Seq;
use crate::checksum::{pseudo_header_sum, Checksum};
use crate::RxError;

/// IP protocol number of TCP.
pub const PROTOCOL: u8 = 6;

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;

/// The MSS assumed when the peer sends no MSS option (RFC 9293 §3.7.1,
/// RFC 1122 §4.2.2.6: 536 for IPv4).
pub const DEFAULT_MSS: u16 = 536;

/// The largest window scale shift (RFC 7323 §2.3).
pub const MAX_WINDOW_SCALE: u8 = 14;

/// The control bits we act on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// Synchronize sequence numbers.
    pub syn: bool,
    /// The acknowledgment field is significant.
    pub ack: bool,
    /// No more data from the sender.
    pub fin: bool,
    /// Reset the connection.
    pub rst: bool,
    /// Push function.
    pub psh: bool,
}

/// A parsed segment.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// SEG.SEQ.
    pub seq: Seq,
    /// SEG.ACK (meaningful only with `flags.ack`).
    pub ack: Seq,
    /// Control bits.
    pub flags: Flags,
    /// SEG.WND as sent (not yet scaled).
    pub window: u16,
    /// The MSS option, if present.
    pub mss: Option<u16>,
    /// The window scale option, if present (clamped to 14, RFC 7323 §2.3).
    pub window_scale: Option<u8>,
    /// The data: a view of the received frame.
    pub payload: IoBuf,
}

impl Segment {
    /// SEG.LEN: data plus one for each of SYN and FIN (RFC 9293 §3.4).
    #[must_use]
    pub fn len(&self) -> usize {
        self.payload.len() + usize::from(self.flags.syn) + usize::from(self.flags.fin)
    }

    /// Whether SEG.LEN is zero.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Parses a segment (an IPv4 payload from `src` to `dst`).
///
/// # Errors
///
/// [`RxError::Truncated`] if the header is cut short or the data offset
/// points past the data; [`RxError::BadChecksum`] if `verify_checksum` and
/// the checksum (over the pseudo-header too) fails.
pub fn parse(
    datagram: &IoBuf,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    verify_checksum: bool,
) -> Result<Segment, RxError> {
    let view = TcpPacket::new_checked(datagram.as_slice()).map_err(|_| RxError::Truncated)?;
    if verify_checksum {
        let len = u16::try_from(datagram.len()).map_err(|_| RxError::Malformed)?;
        let mut sum = Checksum::new();
        sum.add_pseudo_header(src, dst, PROTOCOL, len);
        sum.add(datagram);
        if !sum.verifies() {
            return Err(RxError::BadChecksum);
        }
    }
    let mut mss = None;
    let mut window_scale = None;
    let mut options = view.options();
    while !options.is_empty() {
        let Ok((rest, option)) = TcpOption::parse(options) else {
            break;
        };
        match option {
            TcpOption::EndOfList => break,
            TcpOption::MaxSegmentSize(value) => mss = Some(value),
            TcpOption::WindowScale(shift) => window_scale = Some(shift.min(MAX_WINDOW_SCALE)),
            _ => {}
        }
        options = rest;
    }
    let seq = Seq(u32::from_ne_bytes(view.seq_number().0.to_ne_bytes()));
    let ack = Seq(u32::from_ne_bytes(view.ack_number().0.to_ne_bytes()));
    let payload = datagram
        .slice(usize::from(view.header_len())..)
        .map_err(|_| RxError::Truncated)?;
    Ok(Segment {
        src_port: view.src_port(),
        dst_port: view.dst_port(),
        seq,
        ack,
        flags: Flags {
            syn: view.syn(),
            ack: view.ack(),
            fin: view.fin(),
            rst: view.rst(),
            psh: view.psh(),
        },
        window: view.window_len(),
        mss,
        window_scale,
        payload,
    })
}

/// A segment to send: everything but the addresses' lower layers.
#[derive(Clone, Debug)]
pub struct OutSegment {
    /// Our address and port.
    pub src: (Ipv4Addr, u16),
    /// The peer's address and port.
    pub dst: (Ipv4Addr, u16),
    /// SEG.SEQ.
    pub seq: Seq,
    /// SEG.ACK (sent with the ACK bit when `flags.ack`).
    pub ack: Seq,
    /// Control bits.
    pub flags: Flags,
    /// SEG.WND, already scaled down.
    pub window: u16,
    /// MSS option (SYN segments only).
    pub mss: Option<u16>,
    /// Window scale option (SYN segments only).
    pub window_scale: Option<u8>,
    /// The data: the application's buffers, not copied.
    pub payload: IoChain,
}

impl Default for OutSegment {
    fn default() -> Self {
        OutSegment {
            src: (Ipv4Addr::UNSPECIFIED, 0),
            dst: (Ipv4Addr::UNSPECIFIED, 0),
            seq: Seq(0),
            ack: Seq(0),
            flags: Flags::default(),
            window: 0,
            mss: None,
            window_scale: None,
            payload: IoChain::new(),
        }
    }
}

impl OutSegment {
    /// Length of the TCP header with its options (padded to 4 bytes).
    #[must_use]
    pub fn header_len(&self) -> usize {
        let mss = if self.mss.is_some() { 4 } else { 0 };
        // NOP + window scale (3 bytes) keeps the header 4-byte aligned.
        let window_scale = if self.window_scale.is_some() { 4 } else { 0 };
        HEADER_LEN + mss + window_scale
    }

    /// SEG.LEN.
    #[must_use]
    pub fn len(&self) -> usize {
        self.payload.len() + usize::from(self.flags.syn) + usize::from(self.flags.fin)
    }

    /// Whether SEG.LEN is zero (a bare ACK or RST).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the header into a new buffer with `headroom` bytes in front
    /// for the lower layers, the checksum computed across the
    /// pseudo-header, the header and every payload segment (no copy) —
    /// or, if `partial`, only the pseudo-header sum, for a device that
    /// completes it ([`crate::device::ChecksumCapabilities::tx_partial`]).
    #[must_use]
    pub fn emit_header(&self, headroom: usize, partial: bool) -> IoBufMut {
        let header_len = self.header_len();
        let mut header = IoBufMut::with_headroom(headroom, header_len);
        let buf = header.extend_zeroed(header_len);
        let mut view = TcpPacket::new_unchecked(&mut *buf);
        view.set_src_port(self.src.1);
        view.set_dst_port(self.dst.1);
        view.set_seq_number(TcpSeqNumber(i32::from_ne_bytes(self.seq.0.to_ne_bytes())));
        let ack = if self.flags.ack { self.ack.0 } else { 0 };
        view.set_ack_number(TcpSeqNumber(i32::from_ne_bytes(ack.to_ne_bytes())));
        view.set_header_len(u8::try_from(header_len).unwrap_or(60));
        view.clear_flags();
        view.set_syn(self.flags.syn);
        view.set_ack(self.flags.ack);
        view.set_fin(self.flags.fin);
        view.set_rst(self.flags.rst);
        view.set_psh(self.flags.psh);
        view.set_window_len(self.window);
        view.set_urgent_at(0);
        view.set_checksum(0);
        let mut options = view.options_mut();
        if let Some(mss) = self.mss {
            options = TcpOption::MaxSegmentSize(mss).emit(options);
        }
        if let Some(shift) = self.window_scale {
            options = TcpOption::NoOperation.emit(options);
            TcpOption::WindowScale(shift).emit(options);
        }
        let len = u16::try_from(header_len + self.payload.len()).unwrap_or(u16::MAX);
        if partial {
            let sum = pseudo_header_sum(self.src.0, self.dst.0, PROTOCOL, len);
            TcpPacket::new_unchecked(&mut *buf).set_checksum(sum);
            return header;
        }
        let mut sum = Checksum::new();
        sum.add_pseudo_header(self.src.0, self.dst.0, PROTOCOL, len);
        sum.add(buf);
        sum.add_chain(&self.payload);
        let checksum = sum.finish();
        TcpPacket::new_unchecked(&mut *buf).set_checksum(checksum);
        header
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn gathered(segment: &OutSegment) -> IoBuf {
        let mut bytes: Vec<u8> = segment.emit_header(0, false).as_slice().to_vec();
        bytes.extend_from_slice(&segment.payload.to_vec());
        IoBuf::from_vec(bytes)
    }

    #[test]
    fn emitted_syn_parses_back_with_options() {
        let out = OutSegment {
            src: (A, 40_000),
            dst: (B, 80),
            seq: Seq(0xffff_fff0),
            ack: Seq(7),
            flags: Flags {
                syn: true,
                ack: true,
                ..Flags::default()
            },
            window: 1234,
            mss: Some(1460),
            window_scale: Some(7),
            payload: IoChain::from(IoBuf::from_vec(alloc::vec![1, 2, 3])),
        };
        let parsed = parse(&gathered(&out), A, B, true).unwrap();
        assert_eq!((parsed.src_port, parsed.dst_port), (40_000, 80));
        assert_eq!((parsed.seq, parsed.ack), (Seq(0xffff_fff0), Seq(7)));
        assert!(parsed.flags.syn && parsed.flags.ack && !parsed.flags.fin);
        assert_eq!(parsed.window, 1234);
        assert_eq!((parsed.mss, parsed.window_scale), (Some(1460), Some(7)));
        assert_eq!(parsed.payload.as_slice(), &[1, 2, 3]);
        assert_eq!(parsed.len(), 4);
        assert_eq!(
            parse(&gathered(&out), A, Ipv4Addr::new(10, 0, 0, 3), true).unwrap_err(),
            RxError::BadChecksum,
            "the pseudo-header is part of the checksum"
        );
    }

    #[test]
    fn bogus_options_are_ignored_not_fatal() {
        let out = OutSegment {
            src: (A, 1),
            dst: (B, 2),
            flags: Flags {
                syn: true,
                ..Flags::default()
            },
            mss: Some(1000),
            window_scale: Some(3),
            ..OutSegment::default()
        };
        let mut bytes = out.emit_header(0, false).as_slice().to_vec();
        // Options: [2 4 hi lo] [1 3 3 s]; make the MSS option's length 0,
        // 1, 255 and 3 in turn, and a window scale of 200.
        for bogus_len in [0u8, 1, 255, 3] {
            bytes[21] = bogus_len;
            let parsed = parse(&IoBuf::from_vec(bytes.clone()), A, B, false).unwrap();
            assert_eq!(parsed.mss, None);
            assert!(parsed.flags.syn);
        }
        bytes[21] = 4;
        bytes[27] = 200;
        let parsed = parse(&IoBuf::from_vec(bytes.clone()), A, B, false).unwrap();
        assert_eq!(parsed.window_scale, Some(MAX_WINDOW_SCALE));
        // A data offset past the end is refused.
        bytes[12] = 0xf0;
        assert_eq!(
            parse(&IoBuf::from_vec(bytes), A, B, false).unwrap_err(),
            RxError::Truncated
        );
    }
}
