//! The Messenger's own control structures, in a hand-written fixed
//! little-endian layout (why not postcard: `docs/messenger.md`).
//!
//! * [`Hello`] (8 bytes), the control of a [`crate::Kind::Hello`]: the
//!   limits its sender accepts, so that the other side refuses an oversized
//!   message before sending it. The sender's node id and version are in the
//!   header.
//! * [`ErrorReply`] (8 bytes), the control of a
//!   [`crate::Kind::ErrorReply`]: why a call failed.
//!
//! A structure of another length, or an error code this version does not
//! know, is a [`WireError`].

use ebb_iobuf::IoChain;

use crate::{Limits, WireError};

/// The handshake's control structure.
///
/// | offset | size | field |
/// | --- | --- | --- |
/// | 0 | 4 | largest control length the sender accepts |
/// | 4 | 4 | largest payload length the sender accepts |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// What the sender accepts.
    pub limits: Limits,
}

impl Hello {
    /// Bytes on the wire.
    pub const LEN: usize = 8;

    /// Encodes the structure.
    #[must_use]
    pub fn encode(&self) -> [u8; Self::LEN] {
        let mut out = [0u8; Self::LEN];
        out[0..4].copy_from_slice(&self.limits.max_control_len.to_le_bytes());
        out[4..8].copy_from_slice(&self.limits.max_payload_len.to_le_bytes());
        out
    }

    /// Decodes the structure from a control chain.
    ///
    /// # Errors
    ///
    /// [`WireError::ControlLength`] unless the chain holds exactly
    /// [`Hello::LEN`] bytes.
    pub fn decode(control: &IoChain) -> Result<Hello, WireError> {
        let bytes = exactly::<{ Self::LEN }>(control)?;
        Ok(Hello {
            limits: Limits {
                max_control_len: u32_at(&bytes, 0),
                max_payload_len: u32_at(&bytes, 4),
            },
        })
    }
}

/// Why a call failed, as the callee says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorReply {
    /// Code 1: the node has no Ebb with the destination id (detail: the id).
    UnknownEbb(u32),
    /// Code 2: the Ebb does not know the message number (detail: the number).
    UnknownMessage(u32),
    /// Code 3: the Ebb refused the call (detail: the Ebb's own code).
    Refused(u32),
    /// Code 4: the reply was over the size limit (detail: its payload
    /// length, saturated at `u32::MAX`).
    ReplyTooLarge(u32),
    /// Code 5: the Ebb has no representative on the receiving core and its
    /// fault handler could not build one (detail: the Ebb's id).
    NoRepresentative(u32),
    /// Code 6: the message named a core the node does not have (detail:
    /// the core named).
    NoSuchCore(u32),
}

impl ErrorReply {
    /// Bytes on the wire.
    pub const LEN: usize = 8;

    /// Encodes the structure.
    ///
    /// | offset | size | field |
    /// | --- | --- | --- |
    /// | 0 | 2 | code (1 to 6, see the variants) |
    /// | 2 | 2 | reserved, zero |
    /// | 4 | 4 | detail |
    #[must_use]
    pub fn encode(&self) -> [u8; Self::LEN] {
        let (code, detail): (u16, u32) = match *self {
            ErrorReply::UnknownEbb(id) => (1, id),
            ErrorReply::UnknownMessage(number) => (2, number),
            ErrorReply::Refused(code) => (3, code),
            ErrorReply::ReplyTooLarge(len) => (4, len),
            ErrorReply::NoRepresentative(id) => (5, id),
            ErrorReply::NoSuchCore(core) => (6, core),
        };
        let mut out = [0u8; Self::LEN];
        out[0..2].copy_from_slice(&code.to_le_bytes());
        out[4..8].copy_from_slice(&detail.to_le_bytes());
        out
    }

    /// Decodes the structure from a control chain.
    ///
    /// # Errors
    ///
    /// [`WireError::ControlLength`] unless the chain holds exactly
    /// [`ErrorReply::LEN`] bytes, [`WireError::Reserved`] if the reserved
    /// field is not zero, [`WireError::UnknownErrorCode`] for a code this
    /// version does not know.
    pub fn decode(control: &IoChain) -> Result<ErrorReply, WireError> {
        let bytes = exactly::<{ Self::LEN }>(control)?;
        let code = u16_at(&bytes, 0);
        let reserved = u16_at(&bytes, 2);
        if reserved != 0 {
            return Err(WireError::Reserved {
                value: u32::from(reserved),
            });
        }
        let detail = u32_at(&bytes, 4);
        match code {
            1 => Ok(ErrorReply::UnknownEbb(detail)),
            2 => Ok(ErrorReply::UnknownMessage(detail)),
            3 => Ok(ErrorReply::Refused(detail)),
            4 => Ok(ErrorReply::ReplyTooLarge(detail)),
            5 => Ok(ErrorReply::NoRepresentative(detail)),
            6 => Ok(ErrorReply::NoSuchCore(detail)),
            _ => Err(WireError::UnknownErrorCode { code }),
        }
    }
}

/// The chain's bytes, if it holds exactly `N` of them.
fn exactly<const N: usize>(control: &IoChain) -> Result<[u8; N], WireError> {
    if control.len() != N {
        return Err(WireError::ControlLength {
            expected: N,
            found: control.len(),
        });
    }
    control
        .cursor()
        .peek_array::<N>()
        .map_err(|_| WireError::Truncated {
            needed: N,
            available: control.len(),
        })
}

/// The little-endian `u16` at `at` (the caller checked the length).
pub(crate) fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

/// The little-endian `u32` at `at` (the caller checked the length).
pub(crate) fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_iobuf::IoBuf;

    fn chain(bytes: &[u8]) -> IoChain {
        IoChain::from(IoBuf::copy_from_slice(bytes))
    }

    #[test]
    fn hello_round_trips_and_checks_its_length() {
        let hello = Hello {
            limits: Limits {
                max_control_len: 100,
                max_payload_len: 1 << 24,
            },
        };
        assert_eq!(hello.encode(), [100, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(Hello::decode(&chain(&hello.encode())), Ok(hello));
        assert_eq!(
            Hello::decode(&chain(&[0; 7])),
            Err(WireError::ControlLength {
                expected: 8,
                found: 7
            })
        );
    }

    #[test]
    fn error_replies_round_trip_and_refuse_unknown_codes() {
        for reply in [
            ErrorReply::UnknownEbb(0x8000),
            ErrorReply::UnknownMessage(9),
            ErrorReply::Refused(42),
            ErrorReply::ReplyTooLarge(1 << 30),
            ErrorReply::NoRepresentative(0x8001),
            ErrorReply::NoSuchCore(3),
        ] {
            assert_eq!(ErrorReply::decode(&chain(&reply.encode())), Ok(reply));
        }
        assert_eq!(
            ErrorReply::decode(&chain(&[7, 0, 0, 0, 1, 0, 0, 0])),
            Err(WireError::UnknownErrorCode { code: 7 })
        );
        assert_eq!(
            ErrorReply::decode(&chain(&[1, 0, 5, 0, 1, 0, 0, 0])),
            Err(WireError::Reserved { value: 5 })
        );
    }
}
