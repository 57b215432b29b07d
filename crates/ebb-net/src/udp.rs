//! UDP sockets.

use alloc::rc::Rc;
use core::net::SocketAddr;

use ebb_iobuf::{IoBuf, IoChain};

use crate::SendError;

/// What the application does with datagrams arriving on a socket; runs on
/// the socket's core.
pub trait UdpHandler {
    /// One datagram from `from`, as a view into the receive buffer.
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf);
}

/// What a platform implements for one UDP socket.
pub trait UdpOps {
    /// Sends one datagram made of `data`.
    fn send_to(&self, to: SocketAddr, data: IoChain) -> Result<(), SendError>;
    /// The bound address.
    fn local_addr(&self) -> SocketAddr;
    /// Stops receiving and releases the socket.
    fn close(&self);
}

/// A bound UDP socket; stays on its core.
#[derive(Clone)]
pub struct UdpSocket {
    ops: Rc<dyn UdpOps>,
}

impl UdpSocket {
    /// Wraps a platform's socket.
    pub fn new(ops: Rc<dyn UdpOps>) -> Self {
        UdpSocket { ops }
    }

    /// Sends one datagram (scatter/gather from `data`, no copy).
    pub fn send_to(&self, to: SocketAddr, data: IoChain) -> Result<(), SendError> {
        self.ops.send_to(to, data)
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.ops.local_addr()
    }

    /// Stops receiving and releases the socket.
    pub fn close(&self) {
        self.ops.close();
    }
}
