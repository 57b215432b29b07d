//! Echo over Ebbflow's network interface: every byte received on a TCP
//! connection or in a UDP datagram goes back to its sender. Replies are the
//! received buffers themselves, chained unchanged (no copy).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::boxed::Box;
use alloc::sync::Arc;

use ebb_net::{
    AcceptFn, IoBuf, IoChain, SocketAddr, TcpConnection, TcpHandler, UdpHandler, UdpSocket,
};

/// Echoes a TCP connection; buffers what the peer's window does not take.
pub struct TcpEcho;

impl TcpHandler for TcpEcho {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        if conn.send_or_buffer(data).is_err() {
            conn.abort();
        }
    }
}

/// Handler factory for listeners.
pub fn tcp_echo() -> AcceptFn {
    Arc::new(|_conn: &TcpConnection| Box::new(TcpEcho) as Box<dyn TcpHandler>)
}

/// Echoes UDP datagrams to their source.
pub struct UdpEcho;

impl UdpHandler for UdpEcho {
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        // A datagram that cannot be sent is lost, as UDP allows.
        let _ = socket.send_to(from, IoChain::from(data));
    }
}
