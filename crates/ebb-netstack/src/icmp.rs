//! ICMP for IPv4 (RFC 792): echo request and echo reply, through smoltcp's
//! `Icmpv4Packet` view. Other message types are counted and dropped.

use ebb_iobuf::{IoBuf, IoChain};
use smoltcp::wire::{Icmpv4Message, Icmpv4Packet};

use crate::checksum::Checksum;
use crate::RxError;

/// Length of an echo message's header: type, code, checksum, identifier,
/// sequence number.
pub const HEADER_LEN: usize = 8;

/// An echo request or reply (RFC 792, "Echo or Echo Reply Message").
#[derive(Debug, Clone)]
pub struct Echo {
    /// The identifier, matching replies to requests.
    pub ident: u16,
    /// The sequence number.
    pub seq_no: u16,
    /// The data, a view of the received packet.
    pub data: IoBuf,
}

/// A parsed ICMP message this stack handles.
#[derive(Debug, Clone)]
pub enum Message {
    /// Echo (type 8).
    EchoRequest(Echo),
    /// Echo Reply (type 0).
    EchoReply(Echo),
}

/// Parses an ICMP message (an IPv4 payload).
///
/// # Errors
///
/// [`RxError::Truncated`] if shorter than a header, [`RxError::BadChecksum`]
/// if `verify_checksum` and the checksum (over the whole message) fails,
/// [`RxError::Unsupported`] for types other than echo and echo reply.
pub fn parse(message: &IoBuf, verify_checksum: bool) -> Result<Message, RxError> {
    let view = Icmpv4Packet::new_checked(message.as_slice()).map_err(|_| RxError::Truncated)?;
    if verify_checksum {
        let mut sum = Checksum::new();
        sum.add(message);
        if !sum.verifies() {
            return Err(RxError::BadChecksum);
        }
    }
    let echo = || -> Result<Echo, RxError> {
        Ok(Echo {
            ident: view.echo_ident(),
            seq_no: view.echo_seq_no(),
            data: message
                .slice(HEADER_LEN..)
                .map_err(|_| RxError::Truncated)?,
        })
    };
    match (view.msg_type(), view.msg_code()) {
        (Icmpv4Message::EchoRequest, 0) => Ok(Message::EchoRequest(echo()?)),
        (Icmpv4Message::EchoReply, 0) => Ok(Message::EchoReply(echo()?)),
        _ => Err(RxError::Unsupported),
    }
}

/// Writes an echo header into `header` ([`HEADER_LEN`] bytes) for `data`,
/// which follows it in a chain, and computes the checksum across both.
pub fn emit_echo(header: &mut [u8], reply: bool, ident: u16, seq_no: u16, data: &IoChain) {
    let mut view = Icmpv4Packet::new_unchecked(&mut *header);
    view.set_msg_type(if reply {
        Icmpv4Message::EchoReply
    } else {
        Icmpv4Message::EchoRequest
    });
    view.set_msg_code(0);
    view.set_echo_ident(ident);
    view.set_echo_seq_no(seq_no);
    view.set_checksum(0);
    let mut sum = Checksum::new();
    sum.add(view.into_inner());
    sum.add_chain(data);
    Icmpv4Packet::new_unchecked(header).set_checksum(sum.finish());
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn echo_round_trip_and_bad_checksum() {
        let data = IoChain::from(IoBuf::from_vec(vec![1, 2, 3]));
        let mut header = [0u8; HEADER_LEN];
        emit_echo(&mut header, false, 0x1234, 7, &data);
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&[1, 2, 3]);
        match parse(&IoBuf::from_vec(bytes.clone()), true).unwrap() {
            Message::EchoRequest(e) => {
                assert_eq!(
                    (e.ident, e.seq_no, e.data.as_slice()),
                    (0x1234, 7, &[1u8, 2, 3][..])
                );
            }
            other => panic!("{other:?}"),
        }
        bytes[9] ^= 0xff;
        assert_eq!(
            parse(&IoBuf::from_vec(bytes), true).unwrap_err(),
            RxError::BadChecksum
        );
        assert_eq!(
            parse(&IoBuf::from_vec(vec![8, 0, 0]), true).unwrap_err(),
            RxError::Truncated
        );
    }
}
