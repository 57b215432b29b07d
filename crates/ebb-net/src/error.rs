//! Network errors.

use core::fmt;

use ebb_iobuf::IoChain;

/// Why a network operation failed; each message is a sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetError {
    /// The address is already in use.
    AddrInUse,
    /// The address is not one of this machine's.
    AddrNotAvailable,
    /// Nothing listens at the address.
    ConnectionRefused,
    /// The peer reset the connection.
    ConnectionReset,
    /// The connection or socket is closed (or closing) on our side.
    Closed,
    /// The data is larger than the send credit.
    NoCredit {
        /// Bytes the platform accepts now.
        credit: usize,
        /// Bytes that were offered.
        offered: usize,
    },
    /// The connection belongs to another core.
    WrongCore,
    /// The calling thread is not a core with a network stack.
    NotOnCore,
    /// The platform cannot do this.
    Unsupported(&'static str),
    /// The operating system refused.
    Os {
        /// What we were doing.
        operation: &'static str,
        /// The `errno` value.
        errno: i32,
    },
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::AddrInUse => f.write_str("the address is already in use"),
            NetError::AddrNotAvailable => f.write_str("the address is not available on this machine"),
            NetError::ConnectionRefused => f.write_str("the connection was refused: nothing listens there"),
            NetError::ConnectionReset => f.write_str("the peer reset the connection"),
            NetError::Closed => f.write_str("the connection is closed on this side"),
            NetError::NoCredit { credit, offered } => write!(
                f,
                "{offered} bytes exceed the send credit of {credit} bytes: wait for on_send_credit or use send_or_buffer"
            ),
            NetError::WrongCore => f.write_str("the connection lives on another core: send its core an event"),
            NetError::NotOnCore => f.write_str("this thread is not an Ebbflow core with a network stack"),
            NetError::Unsupported(what) => write!(f, "not supported on this platform: {what}"),
            NetError::Os { operation, errno } => write!(f, "{operation} failed with errno {errno}"),
        }
    }
}

impl core::error::Error for NetError {}

/// A send that was refused, with the data handed back unchanged.
#[derive(Debug)]
pub struct SendError {
    /// Why.
    pub error: NetError,
    /// The data, untouched.
    pub data: IoChain,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl core::error::Error for SendError {}
