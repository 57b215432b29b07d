//! What the network tells a socket: the `TcpHandler` of its connection,
//! and the accept callback of a listening socket.

use alloc::boxed::Box;
use alloc::rc::Weak;
use alloc::sync::Arc;

use ebb_net::{AcceptFn, IoChain, NetError, TcpConnection, TcpHandler};

use super::{listeners, Socket};

/// A connection's events, for its socket (if the program still holds
/// it: once closed, the connection is finished and its events dropped).
pub(crate) struct Events {
    pub(crate) socket: Weak<Socket>,
}

impl TcpHandler for Events {
    fn on_connected(&mut self, conn: &TcpConnection) {
        if let Some(socket) = self.socket.upgrade() {
            socket.on_connected(conn);
        }
    }

    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        match self.socket.upgrade() {
            Some(socket) => socket.on_data(conn, data),
            // Data after the program closed the socket: nobody will ever
            // read it, so the connection is reset, as Linux does for an
            // orphaned socket (RFC 2525 §2.17; `tcp_rcv_state_process`'s
            // abort on data). Acknowledging it would let the peer send
            // for ever (Redis's protocol-desync tests wait for the reset).
            None => conn.abort(),
        }
    }

    fn on_send_credit(&mut self, _conn: &TcpConnection) {
        if let Some(socket) = self.socket.upgrade() {
            socket.notifier.notify();
        }
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        match self.socket.upgrade() {
            Some(socket) => socket.on_peer_closed(),
            // Closed by the program already: finish our side too.
            None => conn.close(),
        }
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, error: NetError) {
        if let Some(socket) = self.socket.upgrade() {
            socket.on_aborted(&error);
        }
    }
}

/// The accept callback of the socket listening under `key` on this core.
pub(crate) fn accept_for(key: u64) -> AcceptFn {
    Arc::new(move |conn: &TcpConnection| -> Box<dyn TcpHandler> {
        let listener = listeners::here().ok().and_then(|here| here.find(key));
        match listener.and_then(|listener| listener.enqueue(conn)) {
            Some(accepted) => Box::new(Events {
                socket: alloc::rc::Rc::downgrade(&accepted),
            }),
            None => {
                // Closed, or its backlog is full: refuse with a reset.
                conn.abort();
                Box::new(Events {
                    socket: Weak::new(),
                })
            }
        }
    })
}
