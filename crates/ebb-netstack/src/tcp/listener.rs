//! Listening ports (RFC 9293 §3.10.7.2, LISTEN) with a bounded SYN backlog.
//!
//! A SYN to a listener creates a connection in SYN-RECEIVED right away
//! (its state is what the SYN,ACK needs); the backlog bounds how many such
//! half-open connections one listener keeps, so a SYN flood costs at most
//! `syn_backlog` connections per listener (further SYNs are dropped and
//! counted; the peers retransmit them, RFC 6298 §2.1, and a retransmitted
//! SYN is answered once the backlog has room). A connection leaves the
//! backlog when its handshake completes and goes straight to the
//! application: there is no queue of completed connections to overflow.
//! No SYN cookies: without timestamps they cannot carry the window scale,
//! and the backlog already bounds what a flood costs.

use core::net::Ipv4Addr;

use ebb_net::AcceptFn;

/// One listening port.
pub struct Listener {
    /// The address listened on (unspecified: any of ours).
    pub addr: Ipv4Addr,
    /// Makes the handler of each accepted connection.
    pub accept: AcceptFn,
    /// Connections in SYN-RECEIVED created by this listener.
    pub half_open: usize,
    /// The most half-open connections.
    pub backlog: usize,
}

impl Listener {
    /// A listener on `addr` with room for `backlog` half-open connections.
    #[must_use]
    pub fn new(addr: Ipv4Addr, accept: AcceptFn, backlog: usize) -> Self {
        Listener {
            addr,
            accept,
            half_open: 0,
            backlog,
        }
    }

    /// Whether a SYN to `dst` is for this listener.
    #[must_use]
    pub fn accepts(&self, dst: Ipv4Addr) -> bool {
        self.addr.is_unspecified() || self.addr == dst
    }

    /// Whether another half-open connection fits.
    #[must_use]
    pub fn has_room(&self) -> bool {
        self.half_open < self.backlog
    }
}
