//! The Messenger (DESIGN §5): Ebb-to-Ebb messages between nodes.
//!
//! This crate has the wire format and the message layer, free of any
//! platform; the platform gives it a [`ebb_net::TcpConnection`].
//!
//! * [`header`](Header): the fixed 40-byte little-endian header, versioned,
//!   decoded in place with typed errors ([`WireError`]).
//! * [`control`](Hello): the Messenger's own small control structures (the
//!   handshake's [`Hello`], the [`ErrorReply`]), in a fixed documented
//!   layout.
//! * [`framing`](Deframer): a TCP byte stream split anywhere in, whole
//!   messages out, whose payloads are views into the receive buffers (zero
//!   copy); [`encode_message`] for the other way.
//!
//! The wire layout and the reasons for each field are in
//! `docs/messenger.md`. Nothing here panics on bytes from the network.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod control;
mod error;
mod framing;
mod header;

pub use control::{ErrorReply, Hello};
pub use error::{MessengerError, WireError};
pub use framing::{encode_message, Deframer, Frame};
pub use header::{
    Header, Kind, Limits, MessageNumber, RawHeader, FLAG_CALL, FLAG_ERROR, FLAG_HELLO, FLAG_REPLY,
    HEADER_LEN, MAGIC, VERSION,
};
