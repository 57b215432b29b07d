//! The fixed message header (wire version 1), read in place.
//!
//! Every message starts with these 40 bytes, all integers little-endian
//! (both our platforms are x86_64, so the fields need no byte swap there);
//! the control bytes and then the payload follow, with the lengths the
//! header gives (layout and reasons in `docs/messenger.md`):
//!
//! | offset | size | field | meaning |
//! | --- | --- | --- | --- |
//! | 0 | 4 | magic | `b"EBBM"`: a stream that is not the Messenger's is refused at once |
//! | 4 | 2 | version | the sender's wire version ([`VERSION`]) |
//! | 6 | 2 | flags | the message's [`Kind`] (bits below); other bits are refused |
//! | 8 | 4 | destination | the [`ebb_core::EbbId`] of the Ebb the message is for |
//! | 12 | 4 | message | a [`MessageNumber`] the destination's Ebb type chose |
//! | 16 | 4 | source | the sending node's [`NodeId`] |
//! | 20 | 4 | control length | bytes of control structure after the header |
//! | 24 | 8 | correlation | pairs a reply with its call (0 for others) |
//! | 32 | 4 | payload length | bytes of payload after the control bytes |
//! | 36 | 2 | core | 0: the connection's core handles the message; c + 1: core c does (a named core) |
//! | 38 | 2 | reserved | zero; a later version may use it |
//!
//! **Invariant across versions:** magic and version stay at offsets 0 and 4
//! in every version, so that two nodes of different versions can always
//! read each other's version and refuse with a message naming both. That
//! is why [`Header::decode`] checks them first, before any field whose
//! meaning a version may change.

use core::fmt;

use ebb_core::NodeId;

use crate::WireError;

/// The first four bytes of every message.
pub const MAGIC: [u8; 4] = *b"EBBM";

/// The wire version this crate speaks.
pub const VERSION: u16 = 1;

/// Bytes in the fixed header.
pub const HEADER_LEN: usize = 40;

/// Flag bit: the first message on a connection (the handshake).
pub const FLAG_HELLO: u16 = 1 << 0;
/// Flag bit: a call; the receiver answers with a reply of the same
/// correlation id.
pub const FLAG_CALL: u16 = 1 << 1;
/// Flag bit: the answer to the call with the same correlation id.
pub const FLAG_REPLY: u16 = 1 << 2;
/// Flag bit (with [`FLAG_REPLY`]): the call failed; the control bytes are
/// an [`crate::ErrorReply`].
pub const FLAG_ERROR: u16 = 1 << 3;

/// A message number, chosen explicitly by each Ebb type for each of its
/// messages (never derived from a compiler type hash, which changes between
/// builds and would make two builds of one application incompatible).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageNumber(pub u32);

impl fmt::Display for MessageNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a message is, as its flags say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The handshake: the sender's node id and version, and its limits.
    Hello,
    /// A message that expects no answer (flags 0).
    OneWay,
    /// A call: expects a reply with the same correlation id.
    Call,
    /// The answer to a call.
    Reply,
    /// A call that failed: the control bytes say why.
    ErrorReply,
}

impl Kind {
    /// The flag bits of this kind.
    #[must_use]
    pub const fn flags(self) -> u16 {
        match self {
            Kind::Hello => FLAG_HELLO,
            Kind::OneWay => 0,
            Kind::Call => FLAG_CALL,
            Kind::Reply => FLAG_REPLY,
            Kind::ErrorReply => FLAG_REPLY | FLAG_ERROR,
        }
    }

    /// The kind the flag bits name, if they name one.
    #[must_use]
    pub const fn from_flags(flags: u16) -> Option<Kind> {
        match flags {
            FLAG_HELLO => Some(Kind::Hello),
            0 => Some(Kind::OneWay),
            FLAG_CALL => Some(Kind::Call),
            FLAG_REPLY => Some(Kind::Reply),
            x if x == FLAG_REPLY | FLAG_ERROR => Some(Kind::ErrorReply),
            _ => None,
        }
    }
}

/// The largest control and payload lengths a node accepts. Lengths are
/// checked as soon as the header is read, before any byte of the body is
/// buffered, so a peer cannot make us hold more than this per message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest control structure, in bytes.
    pub max_control_len: u32,
    /// Largest payload, in bytes.
    pub max_payload_len: u32,
}

impl Limits {
    /// 4 KiB of control and 64 MiB of payload.
    pub const DEFAULT: Limits = Limits {
        max_control_len: 4096,
        max_payload_len: 64 << 20,
    };

    /// The smaller of each limit: what two nodes both accept.
    #[must_use]
    pub fn min(self, other: Limits) -> Limits {
        Limits {
            max_control_len: self.max_control_len.min(other.max_control_len),
            max_payload_len: self.max_payload_len.min(other.max_payload_len),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// A decoded, validated header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What the message is.
    pub kind: Kind,
    /// The destination Ebb's id, as sent (checked against the node's Ebbs
    /// by the receiver, which answers an unknown one with an error reply).
    pub destination: u32,
    /// The message number within the destination's Ebb type.
    pub message: MessageNumber,
    /// The sending node.
    pub source: NodeId,
    /// Pairs a reply with its call; 0 for hellos and one-way messages.
    pub correlation: u64,
    /// Bytes of control structure after the header.
    pub control_len: u32,
    /// Bytes of payload after the control structure.
    pub payload_len: u32,
    /// The receiving node's core that handles the message: `None` for the
    /// core the connection is on, `Some(c)` for core `c` (a named core, at
    /// most [`MAX_NAMED_CORE`]). Replies, hellos and error replies carry
    /// `None`.
    pub core: Option<u16>,
}

/// The highest core a header can name (the wire stores `c + 1` in 16 bits,
/// 0 meaning "the connection's core").
pub const MAX_NAMED_CORE: u16 = u16::MAX - 1;

/// The core field's wire value: 0 for the connection's core, `c + 1` for
/// core `c` (a core above [`MAX_NAMED_CORE`] is written as that one).
fn encode_core(core: Option<u16>) -> u16 {
    core.map_or(0, |core| core.min(MAX_NAMED_CORE) + 1)
}

fn decode_core(raw: u16) -> Option<u16> {
    raw.checked_sub(1)
}

/// Reads one little-endian field at a fixed offset of the header.
macro_rules! field {
    ($bytes:expr, $ty:ty, $at:expr) => {{
        let mut raw = [0u8; core::mem::size_of::<$ty>()];
        raw.copy_from_slice(&$bytes[$at..$at + core::mem::size_of::<$ty>()]);
        <$ty>::from_le_bytes(raw)
    }};
}

impl Header {
    /// Encodes the header (version [`VERSION`]).
    #[must_use]
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        self.encode_as(VERSION)
    }

    /// Encodes the header claiming `version` (tests of other versions).
    #[must_use]
    pub fn encode_as(&self, version: u16) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&MAGIC);
        out[4..6].copy_from_slice(&version.to_le_bytes());
        out[6..8].copy_from_slice(&self.kind.flags().to_le_bytes());
        out[8..12].copy_from_slice(&self.destination.to_le_bytes());
        out[12..16].copy_from_slice(&self.message.0.to_le_bytes());
        out[16..20].copy_from_slice(&self.source.0.to_le_bytes());
        out[20..24].copy_from_slice(&self.control_len.to_le_bytes());
        out[24..32].copy_from_slice(&self.correlation.to_le_bytes());
        out[32..36].copy_from_slice(&self.payload_len.to_le_bytes());
        out[36..38].copy_from_slice(&encode_core(self.core).to_le_bytes());
        out
    }

    /// Decodes and checks a header, in this order: length, magic, version
    /// (so that any two versions can name each other), flags, the reserved
    /// field, then the lengths against `limits`.
    ///
    /// # Errors
    ///
    /// The first check that fails, as a [`WireError`].
    pub fn decode(bytes: &[u8], limits: &Limits) -> Result<Header, WireError> {
        let Some(bytes) = bytes.get(..HEADER_LEN) else {
            return Err(WireError::Truncated {
                needed: HEADER_LEN,
                available: bytes.len(),
            });
        };
        let magic = field!(bytes, u32, 0).to_le_bytes();
        if magic != MAGIC {
            return Err(WireError::BadMagic { found: magic });
        }
        let version = field!(bytes, u16, 4);
        if version != VERSION {
            return Err(WireError::Version {
                theirs: version,
                ours: VERSION,
            });
        }
        let flags = field!(bytes, u16, 6);
        let kind = Kind::from_flags(flags).ok_or(WireError::BadFlags { flags })?;
        let reserved = field!(bytes, u16, 38);
        if reserved != 0 {
            return Err(WireError::Reserved {
                value: u32::from(reserved),
            });
        }
        let header = Header {
            kind,
            destination: field!(bytes, u32, 8),
            message: MessageNumber(field!(bytes, u32, 12)),
            source: NodeId(field!(bytes, u32, 16)),
            control_len: field!(bytes, u32, 20),
            correlation: field!(bytes, u64, 24),
            payload_len: field!(bytes, u32, 32),
            core: decode_core(field!(bytes, u16, 36)),
        };
        if header.control_len > limits.max_control_len {
            return Err(WireError::ControlTooLong {
                len: header.control_len,
                limit: limits.max_control_len,
            });
        }
        if header.payload_len > limits.max_payload_len {
            return Err(WireError::PayloadTooLong {
                len: header.payload_len,
                limit: limits.max_payload_len,
            });
        }
        Ok(header)
    }
}

/// The header's raw bytes, for [`ebb_iobuf::Cursor::peek_header`]: passed
/// in place when they lie in one segment, assembled on the stack when a
/// segment boundary splits them.
#[derive(Clone, Copy, Debug)]
pub struct RawHeader(pub [u8; HEADER_LEN]);

impl ebb_iobuf::Header for RawHeader {
    const LEN: usize = HEADER_LEN;

    fn from_bytes(bytes: &[u8]) -> Self {
        let mut raw = [0u8; HEADER_LEN];
        raw.copy_from_slice(&bytes[..HEADER_LEN]);
        RawHeader(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            kind: Kind::Call,
            destination: 0x8001,
            message: MessageNumber(7),
            source: NodeId(3),
            correlation: 0x0102_0304_0506_0708,
            control_len: 8,
            payload_len: 1 << 20,
            core: Some(2),
        }
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let bytes = sample().encode();
        assert_eq!(&bytes[0..4], b"EBBM");
        assert_eq!(bytes[4..6], [1, 0]);
        assert_eq!(bytes[6..8], FLAG_CALL.to_le_bytes());
        assert_eq!(bytes[8..12], [0x01, 0x80, 0, 0]);
        assert_eq!(bytes[12..16], [7, 0, 0, 0]);
        assert_eq!(bytes[16..20], [3, 0, 0, 0]);
        assert_eq!(bytes[20..24], [8, 0, 0, 0]);
        assert_eq!(bytes[24..32], [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(bytes[32..36], [0, 0, 0x10, 0]);
        assert_eq!(bytes[36..38], [3, 0]);
        assert_eq!(bytes[38..40], [0; 2]);
        let connection_core = Header {
            core: None,
            ..sample()
        }
        .encode();
        assert_eq!(connection_core[36..38], [0, 0]);
    }

    #[test]
    fn a_header_round_trips() {
        let header = sample();
        assert_eq!(
            Header::decode(&header.encode(), &Limits::DEFAULT),
            Ok(header)
        );
    }

    #[test]
    fn each_check_names_its_error() {
        let good = sample().encode();
        assert_eq!(
            Header::decode(&good[..39], &Limits::DEFAULT),
            Err(WireError::Truncated {
                needed: 40,
                available: 39
            })
        );
        let mut magic = good;
        magic[0] = b'X';
        assert_eq!(
            Header::decode(&magic, &Limits::DEFAULT),
            Err(WireError::BadMagic { found: *b"XBBM" })
        );
        assert_eq!(
            Header::decode(&sample().encode_as(9), &Limits::DEFAULT),
            Err(WireError::Version { theirs: 9, ours: 1 })
        );
        let mut flags = good;
        flags[6..8].copy_from_slice(&(FLAG_CALL | FLAG_REPLY).to_le_bytes());
        assert_eq!(
            Header::decode(&flags, &Limits::DEFAULT),
            Err(WireError::BadFlags { flags: 6 })
        );
        let mut reserved = good;
        reserved[39] = 1;
        assert_eq!(
            Header::decode(&reserved, &Limits::DEFAULT),
            Err(WireError::Reserved { value: 1 << 8 })
        );
        let small = Limits {
            max_control_len: 4,
            max_payload_len: 1 << 20,
        };
        assert_eq!(
            Header::decode(&good, &small),
            Err(WireError::ControlTooLong { len: 8, limit: 4 })
        );
        let small = Limits {
            max_control_len: 8,
            max_payload_len: 1000,
        };
        assert_eq!(
            Header::decode(&good, &small),
            Err(WireError::PayloadTooLong {
                len: 1 << 20,
                limit: 1000
            })
        );
    }

    #[test]
    fn every_kind_round_trips_through_its_flags() {
        for kind in [
            Kind::Hello,
            Kind::OneWay,
            Kind::Call,
            Kind::Reply,
            Kind::ErrorReply,
        ] {
            assert_eq!(Kind::from_flags(kind.flags()), Some(kind));
        }
        assert_eq!(Kind::from_flags(FLAG_ERROR), None);
        assert_eq!(Kind::from_flags(FLAG_HELLO | FLAG_CALL), None);
    }
}
