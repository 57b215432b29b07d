//! The announcement's control structures, in the hand-written fixed
//! little-endian layout of the Messenger's others ([`crate::Hello`],
//! [`crate::ErrorReply`]); why not postcard: `docs/messenger.md`.
//!
//! A node that starts announces itself to the frontend (node
//! [`FRONTEND_NODE`]) with a call of message [`ANNOUNCE`] to Ebb
//! [`FRONTEND_EBB`] whose control is an [`Announce`]; the reply's control
//! is an [`AnnounceReply`]: accepted, with the node's global Ebb ids and
//! the nodes that announced before it, or refused with a reason.

use alloc::vec::Vec;
use core::fmt;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use ebb_core::{EbbId, NodeId};
use ebb_iobuf::IoChain;

use crate::control::{u16_at, u32_at};
use crate::{MessageNumber, WireError};

/// The frontend's node id: a node knows the frontend's address from its
/// boot contract, and the frontend is always node 0.
pub const FRONTEND_NODE: NodeId = NodeId(0);

/// The frontend's registry of nodes (a reserved id, the same in every
/// build).
pub const FRONTEND_EBB: EbbId = EbbId::reserved(16);

/// The registry's message: a node announces itself.
pub const ANNOUNCE: MessageNumber = MessageNumber(1);

/// The registry's other message: where is node N? The control is N's id
/// (4 bytes, little-endian); the reply's control is N's entry, laid out
/// as an [`Announce`], or an error reply refusing with
/// [`LOOKUP_UNKNOWN`] when N has not announced itself. A node calls it
/// when its directory lacks a node that announced after it.
pub const LOOKUP: MessageNumber = MessageNumber(2);

/// The refusal code of a [`LOOKUP`] for a node the frontend does not know.
pub const LOOKUP_UNKNOWN: u16 = 1;

/// A node, as the directory lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// Its id.
    pub node: NodeId,
    /// Where its Messenger listens.
    pub addr: SocketAddrV4,
    /// How many cores it runs.
    pub cores: u16,
}

impl NodeEntry {
    /// Bytes on the wire.
    pub const LEN: usize = 12;

    /// | offset | size | field |
    /// | --- | --- | --- |
    /// | 0 | 4 | node id |
    /// | 4 | 4 | IPv4 address, in network order (as written: `a.b.c.d` is bytes a, b, c, d) |
    /// | 8 | 2 | port |
    /// | 10 | 2 | cores |
    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.node.0.to_le_bytes());
        out.extend_from_slice(&self.addr.ip().octets());
        out.extend_from_slice(&self.addr.port().to_le_bytes());
        out.extend_from_slice(&self.cores.to_le_bytes());
    }

    fn decode(bytes: &[u8]) -> NodeEntry {
        NodeEntry {
            node: NodeId(u32_at(bytes, 0)),
            addr: SocketAddrV4::new(
                Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]),
                u16_at(bytes, 8),
            ),
            cores: u16_at(bytes, 10),
        }
    }

    /// Its address as a [`SocketAddr`].
    #[must_use]
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::V4(self.addr)
    }
}

/// A node's announcement: a [`NodeEntry`] for itself (12 bytes, layout
/// there). The node id must be the sending node's (the header's source).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announce(pub NodeEntry);

impl Announce {
    /// Bytes on the wire.
    pub const LEN: usize = NodeEntry::LEN;

    /// Encodes the structure.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::LEN);
        self.0.encode_into(&mut out);
        out
    }

    /// Decodes the structure from a control chain.
    ///
    /// # Errors
    ///
    /// [`WireError::ControlLength`] unless the chain holds exactly
    /// [`Announce::LEN`] bytes.
    pub fn decode(control: &IoChain) -> Result<Announce, WireError> {
        let bytes = control_bytes(control, Self::LEN, Self::LEN)?;
        Ok(Announce(NodeEntry::decode(&bytes)))
    }
}

/// Why the frontend refused an announcement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Code 1: the frontend expects no node of this id (it hands out the
    /// ids: a node it did not start, or a wrong `node=`).
    UnknownNode,
    /// Code 2: a node of this id has already announced itself.
    Duplicate,
    /// Code 3: the announcement names another node than its sender.
    WrongId,
    /// Code 4: the node announced 0.0.0.0 ("where you see me") and the
    /// frontend cannot see an IPv4 address for it.
    NoAddress,
    /// Code 5: the announcement's control did not decode (it is not the
    /// [`Announce::LEN`] bytes of an [`Announce`]: a node built with
    /// another layout, or a bug). Before this code existed the frontend
    /// answered with a bare error reply the node could not tell from any
    /// other refused call.
    Malformed,
}

impl Refusal {
    fn code(self) -> u16 {
        match self {
            Refusal::UnknownNode => 1,
            Refusal::Duplicate => 2,
            Refusal::WrongId => 3,
            Refusal::NoAddress => 4,
            Refusal::Malformed => 5,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::UnknownNode => "the frontend expects no node of this id",
            Refusal::Duplicate => "a node of this id has already announced itself",
            Refusal::WrongId => "the announcement names another node than its sender",
            Refusal::NoAddress => {
                "the node announced 0.0.0.0 and the frontend sees no IPv4 address for it"
            }
            Refusal::Malformed => {
                "the announcement did not decode: its control is not the 12 bytes of an Announce"
            }
        })
    }
}

/// The frontend's answer to an [`Announce`].
///
/// | offset | size | field |
/// | --- | --- | --- |
/// | 0 | 2 | status: 0 accepted, else the [`Refusal`] code |
/// | 2 | 2 | N, the directory's entries (0 when refused) |
/// | 4 | 4 | first of the node's global Ebb ids (0 when refused) |
/// | 8 | 4 | end (excluded) of them (0 when refused) |
/// | 12 | 12 × N | the directory: a [`NodeEntry`] for each node that announced before, in id order |
///
/// The directory is bounded by the control-length limit (4 KiB by
/// default: 340 nodes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnnounceReply {
    /// The node is in; here are its ids and the other nodes.
    Accepted {
        /// The node's global Ebb ids, start included, end excluded.
        ebb_ids: (u32, u32),
        /// The nodes that announced before it.
        directory: Vec<NodeEntry>,
    },
    /// The node is not in.
    Refused(Refusal),
}

impl AnnounceReply {
    /// Bytes before the directory.
    pub const FIXED_LEN: usize = 12;

    /// Encodes the structure.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let (status, count, (start, end), entries): (u16, usize, (u32, u32), &[NodeEntry]) =
            match self {
                AnnounceReply::Accepted { ebb_ids, directory } => {
                    (0, directory.len(), *ebb_ids, directory)
                }
                AnnounceReply::Refused(refusal) => (refusal.code(), 0, (0, 0), &[]),
            };
        let count = u16::try_from(count).unwrap_or(u16::MAX);
        let mut out = Vec::with_capacity(Self::FIXED_LEN + NodeEntry::LEN * usize::from(count));
        out.extend_from_slice(&status.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&end.to_le_bytes());
        for entry in entries.iter().take(usize::from(count)) {
            entry.encode_into(&mut out);
        }
        out
    }

    /// Decodes the structure from a control chain.
    ///
    /// # Errors
    ///
    /// [`WireError::ControlLength`] when the length is not 12 + 12 × N,
    /// [`WireError::UnknownErrorCode`] for an unknown status,
    /// [`WireError::EmptyIdRange`] when an acceptance's id range is empty
    /// or inverted, and [`WireError::Reserved`] when a refusal carries ids
    /// or entries.
    pub fn decode(control: &IoChain) -> Result<AnnounceReply, WireError> {
        let bytes = control_bytes(control, Self::FIXED_LEN, usize::MAX)?;
        let status = u16_at(&bytes, 0);
        let count = usize::from(u16_at(&bytes, 2));
        let expected = Self::FIXED_LEN + NodeEntry::LEN * count;
        if bytes.len() != expected {
            return Err(WireError::ControlLength {
                expected,
                found: bytes.len(),
            });
        }
        let ebb_ids = (u32_at(&bytes, 4), u32_at(&bytes, 8));
        let refusal = match status {
            0 => {
                if ebb_ids.0 >= ebb_ids.1 {
                    return Err(WireError::EmptyIdRange {
                        start: ebb_ids.0,
                        end: ebb_ids.1,
                    });
                }
                let directory = bytes[Self::FIXED_LEN..]
                    .chunks_exact(NodeEntry::LEN)
                    .map(NodeEntry::decode)
                    .collect();
                return Ok(AnnounceReply::Accepted { ebb_ids, directory });
            }
            1 => Refusal::UnknownNode,
            2 => Refusal::Duplicate,
            3 => Refusal::WrongId,
            4 => Refusal::NoAddress,
            5 => Refusal::Malformed,
            code => return Err(WireError::UnknownErrorCode { code }),
        };
        if count != 0 || ebb_ids != (0, 0) {
            return Err(WireError::Reserved {
                value: ebb_ids.0 | ebb_ids.1 | u32::try_from(count).unwrap_or(u32::MAX),
            });
        }
        Ok(AnnounceReply::Refused(refusal))
    }
}

/// The chain's bytes, if it holds `min..=max` of them.
fn control_bytes(control: &IoChain, min: usize, max: usize) -> Result<Vec<u8>, WireError> {
    if control.len() < min || control.len() > max {
        return Err(WireError::ControlLength {
            expected: min,
            found: control.len(),
        });
    }
    Ok(control.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use ebb_iobuf::IoBuf;

    fn chain(bytes: &[u8]) -> IoChain {
        IoChain::from(IoBuf::copy_from_slice(bytes))
    }

    fn entry(node: u32, last: u8) -> NodeEntry {
        NodeEntry {
            node: NodeId(node),
            addr: SocketAddrV4::new(Ipv4Addr::new(10, 99, 0, last), 7100),
            cores: 2,
        }
    }

    #[test]
    fn the_announcement_has_the_documented_layout() {
        let announce = Announce(entry(3, 4));
        assert_eq!(
            announce.encode(),
            [3, 0, 0, 0, 10, 99, 0, 4, 0xbc, 0x1b, 2, 0]
        );
        assert_eq!(Announce::decode(&chain(&announce.encode())), Ok(announce));
        assert_eq!(
            Announce::decode(&chain(&[0; 11])),
            Err(WireError::ControlLength {
                expected: 12,
                found: 11
            })
        );
    }

    #[test]
    fn replies_round_trip_and_check_their_length_and_status() {
        let accepted = AnnounceReply::Accepted {
            ebb_ids: (32_832, 32_896),
            directory: vec![entry(1, 2), entry(2, 3)],
        };
        let bytes = accepted.encode();
        assert_eq!(bytes.len(), 12 + 24);
        assert_eq!(bytes[..4], [0, 0, 2, 0]);
        assert_eq!(AnnounceReply::decode(&chain(&bytes)), Ok(accepted));
        for refusal in [
            Refusal::UnknownNode,
            Refusal::Duplicate,
            Refusal::WrongId,
            Refusal::NoAddress,
            Refusal::Malformed,
        ] {
            let reply = AnnounceReply::Refused(refusal);
            assert_eq!(AnnounceReply::decode(&chain(&reply.encode())), Ok(reply));
        }
        assert_eq!(
            AnnounceReply::decode(&chain(&bytes[..30])),
            Err(WireError::ControlLength {
                expected: 36,
                found: 30
            })
        );
        let mut unknown = AnnounceReply::Refused(Refusal::Duplicate).encode();
        unknown[0] = 9;
        assert_eq!(
            AnnounceReply::decode(&chain(&unknown)),
            Err(WireError::UnknownErrorCode { code: 9 })
        );
        let mut inverted = bytes.clone();
        inverted[4..8].copy_from_slice(&32_896u32.to_le_bytes());
        inverted[8..12].copy_from_slice(&32_832u32.to_le_bytes());
        assert_eq!(
            AnnounceReply::decode(&chain(&inverted)),
            Err(WireError::EmptyIdRange {
                start: 32_896,
                end: 32_832
            })
        );
        let mut refused_with_ids = AnnounceReply::Refused(Refusal::Duplicate).encode();
        refused_with_ids[4] = 1;
        assert_eq!(
            AnnounceReply::decode(&chain(&refused_with_ids)),
            Err(WireError::Reserved { value: 1 })
        );
    }
}
