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
//! * [`Peer`]: one connection to one peer node over a
//!   [`ebb_net::TcpConnection`]: the handshake, [`Peer::call`] paired with
//!   its reply by correlation id, the node's [`Service`]s answering the
//!   peer's messages (an unknown Ebb or message number gets an error
//!   reply), every pending call completed with an error when the
//!   connection ends, and back-pressure through the send credit.
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
mod node;
mod peer;

pub use control::{ErrorReply, Hello};
pub use error::{MessengerError, WireError};
pub use framing::{encode_message, hello_message, Deframer, Frame};
pub use header::{
    Header, Kind, Limits, MessageNumber, RawHeader, FLAG_CALL, FLAG_ERROR, FLAG_HELLO, FLAG_REPLY,
    HEADER_LEN, MAGIC, VERSION,
};
pub use node::{Config, LocalNode, Message, Request, Service, ServiceError};
pub use peer::{Call, Peer, PeerHandler, PeerState};
