//! [`COPY`]'s control structures, fixed little-endian layouts as the
//! Messenger's own:
//!
//! | | layout |
//! | --- | --- |
//! | request | from: length u16 + UTF-8, to: length u16 + UTF-8 |
//! | reply | bytes u64, digest u64 |
//!
//! A failed copy is an error reply (refused) whose code is the
//! `FsError`'s status in the high half and its errno in the low half
//! ([`refusal`]); 0xffff in the high half: an error of the node's own
//! (the hosted node unreachable, ...), said on its console.

use alloc::string::String;
use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Message, MessageNumber};
use ebb_offload::FsError;

use crate::Copied;

/// Copy a file of the shared directory to another and report its digest.
pub const COPY: MessageNumber = MessageNumber(1);

/// [`COPY`]'s request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyOrder {
    /// The file read.
    pub from: String,
    /// The file written.
    pub to: String,
}

impl CopyOrder {
    /// As a message.
    #[must_use]
    pub fn message(&self) -> Message {
        let mut out = Vec::new();
        for path in [&self.from, &self.to] {
            let len = u16::try_from(path.len()).unwrap_or(u16::MAX);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&path.as_bytes()[..usize::from(len)]);
        }
        Message {
            control: IoChain::from(IoBuf::from_vec(out)),
            payload: IoChain::new(),
        }
    }

    /// The order `control` holds, if it is one.
    #[must_use]
    pub fn decode(control: &[u8]) -> Option<CopyOrder> {
        let (from, rest) = path(control)?;
        let (to, rest) = path(rest)?;
        rest.is_empty().then_some(CopyOrder { from, to })
    }
}

fn path(bytes: &[u8]) -> Option<(String, &[u8])> {
    let len = usize::from(u16::from_le_bytes([*bytes.first()?, *bytes.get(1)?]));
    let text = bytes.get(2..2 + len)?;
    Some((
        String::from(core::str::from_utf8(text).ok()?),
        &bytes[2 + len..],
    ))
}

/// [`COPY`]'s reply.
#[must_use]
pub fn copied_message(copied: Copied) -> Message {
    let mut out = Vec::with_capacity(16);
    out.extend_from_slice(&copied.bytes.to_le_bytes());
    out.extend_from_slice(&copied.digest.to_le_bytes());
    Message {
        control: IoChain::from(IoBuf::from_vec(out)),
        payload: IoChain::new(),
    }
}

/// The copy a reply's control reports.
#[must_use]
pub fn decode_copied(control: &[u8]) -> Option<Copied> {
    let bytes: [u8; 16] = control.try_into().ok()?;
    let (len, digest) = bytes.split_at(8);
    Some(Copied {
        bytes: u64::from_le_bytes(len.try_into().ok()?),
        digest: u64::from_le_bytes(digest.try_into().ok()?),
    })
}

/// A failed copy's refusal code.
#[must_use]
pub fn refusal(error: &FsError) -> u32 {
    let (status, errno) = error.code().unwrap_or((0xffff, 0));
    (u32::from(status) << 16) | u32::from(errno)
}

/// The file error a refusal code names (`None`: the node's own).
#[must_use]
pub fn refused(code: u32) -> Option<FsError> {
    let status = u16::try_from(code >> 16).ok()?;
    FsError::from_code(status, u16::try_from(code & 0xffff).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_replies_and_refusals_round_trip() {
        let order = CopyOrder {
            from: "in.bin".into(),
            to: "out/copy.bin".into(),
        };
        let message = order.message();
        assert_eq!(CopyOrder::decode(&message.control.to_vec()), Some(order));
        assert_eq!(CopyOrder::decode(&[3, 0, b'a']), None);
        assert_eq!(CopyOrder::decode(&[0, 0, 0, 0, 9]), None);
        let copied = Copied {
            bytes: 64 << 20,
            digest: 7,
        };
        assert_eq!(
            decode_copied(&copied_message(copied).control.to_vec()),
            Some(copied)
        );
        assert_eq!(decode_copied(&[0; 15]), None);
        assert_eq!(
            refused(refusal(&FsError::NotFound)),
            Some(FsError::NotFound)
        );
        assert_eq!(refused(refusal(&FsError::Io(28))), Some(FsError::Io(28)));
        assert_eq!(refused(refusal(&FsError::NotShared)), None);
    }
}
