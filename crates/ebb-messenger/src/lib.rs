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
//! * [`Frontend`]: the frontend's registry of nodes (non-overlapping
//!   global id ranges, announcements accepted once, the
//!   [`Frontend::when_announced`] hook), and [`announce`], a node's side;
//!   their control structures ([`Announce`], [`AnnounceReply`]);
//!   [`LocalFrontend`], the registry and node 0's Messenger started on
//!   the calling core, for nodes a program starts itself (tests).
//! * [`NODE_LOST`]: the frontend's loss notice: the frontend, told a node
//!   is lost, tells the other nodes, whose calls to it then fail too.
//! * [`Messenger`]: the Messenger Ebb, one [`MessengerRep`] per core: the
//!   [`NodeDirectory`], a connection per node opened on the first call
//!   ([`MessengerRep::call`]), `Unreachable` instead of a hang, and
//!   delivery on the connection's core or a named one
//!   ([`MessengerRep::call_on`]).
//!
//! * [`map`]: the application's `GlobalIdMap` for native nodes, served
//!   by the hosted node ([`map::MapService`], reserved Ebb 24) and reached
//!   with [`map::RemoteGlobalIdMap`], and [`map::global_map`], the map of
//!   this address space.
//! * [`command_line`]: the application's arguments and `EBB_APP_*`
//!   variables, served by the hosted node (reserved Ebb 25) and fetched
//!   once by each node.
//!
//! The wire layout and the reasons for each field are in
//! `docs/messenger.md`. Nothing here panics on bytes from the network.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod announce;
mod bound;
pub mod command_line;
mod control;
mod directory;
mod error;
mod framing;
mod frontend;
mod header;
mod layout;
mod local_frontend;
mod loss;
pub mod map;
mod messenger;
mod node;
mod peer;

pub use announce::{
    Announce, AnnounceReply, NodeEntry, Refusal, ANNOUNCE, FRONTEND_EBB, FRONTEND_NODE, LOOKUP,
    LOOKUP_UNKNOWN,
};
pub use control::{ErrorReply, Hello};
pub use directory::NodeDirectory;
pub use error::{MessengerError, Unreachable, WireError};
pub use framing::{encode_message, hello_message, Deframer, Frame};
pub use frontend::{
    announce, announce_retrying, AnnounceError, Forgotten, Frontend, FrontendError, Welcome,
    WhenAnnounced,
};
pub use header::{
    Header, Kind, Limits, MessageNumber, RawHeader, FLAG_CALL, FLAG_ERROR, FLAG_HELLO, FLAG_REPLY,
    HEADER_LEN, MAGIC, MAX_NAMED_CORE, VERSION,
};
pub use layout::LayoutError;
pub use local_frontend::{LocalFrontend, LocalFrontendError};
pub use loss::{LostNotice, NODE_EBB, NODE_LOST, NOTICE_MALFORMED, NOTICE_NOT_FROM_FRONTEND};
pub use messenger::{
    acceptor, create_messenger, Dialer, Messenger, MessengerRef, MessengerRep, MessengerRoot,
    MessengerSettings,
};
pub use node::{
    Answer, Config, CoreResult, CoreRouter, CoreWork, Deferred, LocalNode, Message, Request,
    Service, ServiceError, SharedService, SharedServices,
};
pub use peer::{Call, Peer, PeerHandler, PeerState};
