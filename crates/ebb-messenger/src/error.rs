//! The errors of the wire format and of the message layer. Each message
//! is a sentence; callers match on the variants.

use core::fmt;

use ebb_core::NodeId;
use ebb_net::NetError;

use crate::{Kind, MessageNumber};

/// Why bytes received are not a valid message. After any of these the
/// stream's framing is lost, so the connection is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes than the structure needs.
    Truncated {
        /// Bytes the structure needs.
        needed: usize,
        /// Bytes there were.
        available: usize,
    },
    /// The stream does not start with the Messenger's magic.
    BadMagic {
        /// The four bytes found instead.
        found: [u8; 4],
    },
    /// The peer speaks another wire version.
    Version {
        /// The peer's version.
        theirs: u16,
        /// Ours.
        ours: u16,
    },
    /// The flags name no message kind.
    BadFlags {
        /// The flags found.
        flags: u16,
    },
    /// A reserved field is not zero.
    Reserved {
        /// The value found.
        value: u32,
    },
    /// The control length is over our limit.
    ControlTooLong {
        /// The length in the header.
        len: u32,
        /// Our limit.
        limit: u32,
    },
    /// The payload length is over our limit.
    PayloadTooLong {
        /// The length in the header.
        len: u32,
        /// Our limit.
        limit: u32,
    },
    /// A control structure has the wrong length for its kind.
    ControlLength {
        /// The length the structure has.
        expected: usize,
        /// The length received.
        found: usize,
    },
    /// An error reply carries a code this version does not know.
    UnknownErrorCode {
        /// The code found.
        code: u16,
    },
    /// An announcement reply accepted a node with an empty or inverted
    /// range of global Ebb ids.
    EmptyIdRange {
        /// The first id.
        start: u32,
        /// The end (excluded).
        end: u32,
    },
    /// A message of a kind the connection's state does not allow (anything
    /// but a hello first, or a second hello).
    Unexpected {
        /// The kind received.
        kind: Kind,
    },
    /// A message's source node is not the node that said hello on this
    /// connection (a connection carries one node's messages only).
    WrongSource {
        /// The node of the connection's hello.
        hello: NodeId,
        /// The source the message's header names.
        found: NodeId,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            WireError::Truncated { needed, available } => write!(
                f,
                "truncated: the structure needs {needed} bytes but only {available} are there"
            ),
            WireError::BadMagic { found } => write!(
                f,
                "bad magic {found:02x?}: this is not a Messenger stream (expected \"EBBM\")"
            ),
            WireError::Version { theirs, ours } => write!(
                f,
                "the peer speaks Messenger wire version {theirs}, we speak version {ours}"
            ),
            WireError::BadFlags { flags } => {
                write!(f, "flags {flags:#06x} name no message kind")
            }
            WireError::Reserved { value } => {
                write!(f, "the reserved header field is {value:#x}, not zero")
            }
            WireError::ControlTooLong { len, limit } => write!(
                f,
                "a control structure of {len} bytes is over the limit of {limit} bytes"
            ),
            WireError::PayloadTooLong { len, limit } => write!(
                f,
                "a payload of {len} bytes is over the limit of {limit} bytes"
            ),
            WireError::ControlLength { expected, found } => write!(
                f,
                "the control structure has {found} bytes, its kind has {expected}"
            ),
            WireError::UnknownErrorCode { code } => {
                write!(f, "error reply code {code} is not one this version knows")
            }
            WireError::EmptyIdRange { start, end } => write!(
                f,
                "an accepted node's global Ebb ids {start}..{end} are an empty range"
            ),
            WireError::Unexpected { kind } => write!(
                f,
                "a {kind:?} message where the connection allows none (a hello comes first, once)"
            ),
            WireError::WrongSource { hello, found } => write!(
                f,
                "a message from node {found} on node {hello}'s connection (a connection carries \
                 the messages of the node that said hello on it)"
            ),
        }
    }
}

impl core::error::Error for WireError {}

/// Why a message could not be sent or a call did not get its reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessengerError {
    /// No connection to the peer could be made.
    Unreachable {
        /// The node called.
        node: NodeId,
        /// Why.
        reason: Unreachable,
    },
    /// The connection was lost before the reply came (reset, closed, or
    /// the peer broke the wire format).
    ConnectionLost,
    /// The node is gone (its launcher saw its VM or process end:
    /// [`crate::MessengerRep::lose_node`]); a peer killed outright sends
    /// no reset, so without this its calls would wait for TCP to give up.
    NodeLost {
        /// The node.
        node: NodeId,
    },
    /// The two nodes speak different wire versions; refused on both sides.
    VersionMismatch {
        /// The peer's version.
        theirs: u16,
        /// Ours.
        ours: u16,
    },
    /// The peer broke the wire format; the connection was closed.
    Protocol(WireError),
    /// The peer has no Ebb with this id.
    UnknownEbb {
        /// The peer.
        node: NodeId,
        /// The id asked for.
        ebb: u32,
    },
    /// The peer's Ebb does not know this message number.
    UnknownMessage {
        /// The peer.
        node: NodeId,
        /// The Ebb.
        ebb: u32,
        /// The number asked for.
        message: MessageNumber,
    },
    /// The peer's reply was over the size limit, so it sent none.
    ReplyTooLarge {
        /// The peer.
        node: NodeId,
        /// The reply payload's length.
        len: u32,
    },
    /// The peer's fault handler could not build a representative of the
    /// Ebb on the receiving core.
    NoRepresentative {
        /// The peer.
        node: NodeId,
        /// The Ebb.
        ebb: u32,
    },
    /// The message named a core the peer does not have.
    NoSuchCore {
        /// The peer.
        node: NodeId,
        /// The core named.
        core: u32,
    },
    /// The peer's Ebb refused the call with its own code.
    Refused {
        /// The peer.
        node: NodeId,
        /// The Ebb's code.
        code: u32,
    },
    /// The message is over the size limit (ours or the peer's); nothing
    /// was sent.
    TooLarge {
        /// Which part: "control" or "payload".
        part: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        limit: u32,
    },
    /// The peer does not read fast enough and our send queue is full;
    /// nothing was sent. Try again after the queue drains.
    Backpressure {
        /// Bytes already queued.
        queued: usize,
        /// The queue's limit.
        limit: usize,
    },
}

impl fmt::Display for MessengerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MessengerError::Unreachable { node, reason } => {
                write!(f, "node {node} is unreachable: {reason}")
            }
            MessengerError::ConnectionLost => {
                f.write_str("the connection to the peer was lost before the reply came")
            }
            MessengerError::NodeLost { node } => write!(f, "node {node} is lost"),
            MessengerError::VersionMismatch { theirs, ours } => write!(
                f,
                "refused: the peer speaks Messenger wire version {theirs}, we speak version {ours}"
            ),
            MessengerError::Protocol(error) => {
                write!(f, "the peer broke the wire format ({error}); connection closed")
            }
            MessengerError::UnknownEbb { node, ebb } => {
                write!(f, "node {node} has no Ebb with id {ebb}")
            }
            MessengerError::UnknownMessage { node, ebb, message } => write!(
                f,
                "Ebb {ebb} on node {node} does not know message number {message}"
            ),
            MessengerError::ReplyTooLarge { node, len } => write!(
                f,
                "node {node} could not reply: its reply of {len} bytes is over the size limit"
            ),
            MessengerError::NoRepresentative { node, ebb } => write!(
                f,
                "node {node} could not build a representative of Ebb {ebb}: its fault handler failed"
            ),
            MessengerError::NoSuchCore { node, core } => {
                write!(f, "node {node} has no core {core}")
            }
            MessengerError::Refused { node, code } => {
                write!(f, "node {node} refused the call with code {code}")
            }
            MessengerError::TooLarge { part, len, limit } => write!(
                f,
                "a {part} of {len} bytes is over the limit of {limit} bytes; nothing was sent"
            ),
            MessengerError::Backpressure { queued, limit } => write!(
                f,
                "the peer is not reading: {queued} bytes are queued of at most {limit}; nothing was sent"
            ),
        }
    }
}

impl core::error::Error for MessengerError {}

/// Why a node could not be reached ([`MessengerError::Unreachable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unreachable {
    /// The node directory has no address for the node.
    NotInDirectory,
    /// Connecting failed: refused, no route, or another platform error.
    Connect(NetError),
    /// The connection ended before the peer's hello arrived.
    ClosedBeforeHello,
    /// The peer's hello did not arrive within the timeout.
    NoHello {
        /// The timeout, in milliseconds.
        waited_ms: u64,
    },
    /// The address the directory gives for the node answered as another
    /// node.
    WrongNode {
        /// The node that said hello there.
        found: NodeId,
    },
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreachable::NotInDirectory => f.write_str("no address is known for it"),
            Unreachable::Connect(error) => write!(f, "connecting failed: {error}"),
            Unreachable::ClosedBeforeHello => {
                f.write_str("the connection ended before the node said hello")
            }
            Unreachable::NoHello { waited_ms } => {
                write!(f, "no hello within {waited_ms} ms of connecting")
            }
            Unreachable::WrongNode { found } => {
                write!(f, "its address answered as node {found}")
            }
        }
    }
}
