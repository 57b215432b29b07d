//! TCP connections: the handler the application writes and the handle it
//! holds.

use alloc::rc::Rc;
use core::fmt;
use core::net::SocketAddr;

use ebb_core::CoreId;
use ebb_iobuf::IoChain;

use crate::{NetError, SendError};

/// What the application does when things happen on one connection. Every
/// call runs on the connection's core, as an event.
pub trait TcpHandler {
    /// An outgoing connection (from [`crate::connect`]) is established.
    fn on_connected(&mut self, _conn: &TcpConnection) {}

    /// Bytes arrived, in order, as views into the receive buffers. Keeping
    /// the chain keeps those buffers; drop it (or the views) to return them.
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain);

    /// There is send credit again after a `send` or a `send_or_buffer`
    /// found too little of it (what `send_or_buffer` buffered no longer
    /// uses it all). A handler that pauses receiving because the credit is
    /// gone may count on this call to resume.
    fn on_send_credit(&mut self, _conn: &TcpConnection) {}

    /// The peer finished sending (orderly close). The connection is gone
    /// once both sides closed; call [`TcpConnection::close`] to finish ours.
    fn on_closed(&mut self, conn: &TcpConnection) {
        conn.close();
    }

    /// The connection ended abnormally (reset, error); it is gone.
    fn on_aborted(&mut self, _conn: &TcpConnection, _error: NetError) {}
}

/// What a platform implements for one connection.
pub trait TcpOps {
    /// Sends all of `data` if it fits in the send credit, else nothing.
    fn send(&self, data: IoChain) -> Result<(), SendError>;
    /// Sends what fits now and keeps the rest to send in order as credit
    /// comes; fails only if the connection is closed.
    fn send_or_buffer(&self, data: IoChain) -> Result<(), SendError>;
    /// Bytes the platform accepts now without buffering them.
    fn send_credit(&self) -> usize;
    /// Stops reading from the peer (closes our receive window).
    fn pause_receive(&self);
    /// Reads again.
    fn resume_receive(&self);
    /// Finishes our side after everything sent so far (FIN).
    fn close(&self);
    /// Ends the connection at once (RST); nothing more is sent.
    fn abort(&self);
    /// The peer's address.
    fn peer_addr(&self) -> SocketAddr;
    /// Our address.
    fn local_addr(&self) -> SocketAddr;
    /// The core the connection lives on.
    fn core(&self) -> CoreId;
    /// A number unique among this core's live connections.
    fn id(&self) -> u64;
}

/// A handle to one connection. Cheap to clone; stays on the connection's
/// core (it is not `Send`).
#[derive(Clone)]
pub struct TcpConnection {
    ops: Rc<dyn TcpOps>,
}

impl TcpConnection {
    /// Wraps a platform's connection.
    pub fn new(ops: Rc<dyn TcpOps>) -> Self {
        TcpConnection { ops }
    }

    /// Sends all of `data` if it fits in [`TcpConnection::send_credit`];
    /// otherwise sends nothing and hands `data` back.
    pub fn send(&self, data: IoChain) -> Result<(), SendError> {
        self.ops.send(data)
    }

    /// Sends, buffering what does not fit the credit (the default for
    /// applications that do not manage credit themselves).
    pub fn send_or_buffer(&self, data: IoChain) -> Result<(), SendError> {
        self.ops.send_or_buffer(data)
    }

    /// Bytes the platform accepts now without buffering: the peer's window
    /// on Ebbflow's own stack, the socket's free send space on Linux.
    pub fn send_credit(&self) -> usize {
        self.ops.send_credit()
    }

    /// Closes our receive window: nothing more is read until resumed, and
    /// the peer is held back by TCP flow control.
    pub fn pause_receive(&self) {
        self.ops.pause_receive();
    }

    /// Reopens our receive window.
    pub fn resume_receive(&self) {
        self.ops.resume_receive();
    }

    /// Closes our side once what was sent is out.
    pub fn close(&self) {
        self.ops.close();
    }

    /// Resets the connection.
    pub fn abort(&self) {
        self.ops.abort();
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.ops.peer_addr()
    }

    /// Our address.
    pub fn local_addr(&self) -> SocketAddr {
        self.ops.local_addr()
    }

    /// The core this connection lives on.
    pub fn core(&self) -> CoreId {
        self.ops.core()
    }

    /// Unique among this core's live connections.
    pub fn id(&self) -> u64 {
        self.ops.id()
    }
}

impl fmt::Debug for TcpConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TcpConnection({} -> {} on core {})",
            self.local_addr(),
            self.peer_addr(),
            self.core()
        )
    }
}
