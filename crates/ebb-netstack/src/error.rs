//! Why a received frame was dropped; each message is a sentence.

use core::fmt;

/// Why the stack dropped a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxError {
    /// A header is cut short, or a length field points past the data.
    Truncated,
    /// A length or version field holds an impossible value.
    Malformed,
    /// A checksum does not verify.
    BadChecksum,
    /// The packet is an IPv4 fragment; fragments are dropped, not reassembled.
    Fragment,
    /// The frame or packet is addressed to another host.
    NotForUs,
    /// The protocol or message type is not handled here.
    Unsupported,
    /// No socket is bound to the destination port.
    NoSocket,
}

impl fmt::Display for RxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RxError::Truncated => "a header is truncated or a length field points past the data",
            RxError::Malformed => "a header field holds an impossible value",
            RxError::BadChecksum => "a checksum does not verify",
            RxError::Fragment => "IPv4 fragments are dropped, not reassembled",
            RxError::NotForUs => "the frame is addressed to another host",
            RxError::Unsupported => "the protocol or message type is not handled",
            RxError::NoSocket => "no socket is bound to the destination port",
        })
    }
}

impl core::error::Error for RxError {}
