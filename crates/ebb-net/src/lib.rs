//! The network interface every Ebbflow application talks to, on every
//! platform (DESIGN §4).
//!
//! There is no socket API and no hidden buffering. A TCP connection lives on
//! one core and is driven by its [`TcpHandler`]: received data arrives in
//! [`TcpHandler::on_data`] as an [`IoChain`] of views into the very buffers
//! the platform received into. The application sends [`IoChain`]s (scatter
//! /gather, no copy) and checks [`TcpConnection::send_credit`] first — how
//! many bytes the platform accepts now without buffering; when credit grows
//! after it ran out, [`TcpHandler::on_send_credit`] says so. Applications that
//! do not want to manage credit use [`TcpConnection::send_or_buffer`].
//! [`TcpConnection::pause_receive`] closes the application's own receive
//! window (back-pressure on the peer) until
//! [`TcpConnection::resume_receive`].
//!
//! The platform provides a [`NetStack`] per core as the representative of
//! the [`NETWORK`] Ebb: Linux sockets on the hosted platform, Ebbflow's own
//! TCP/IP stack natively, so an application compiles unchanged for both.
#![no_std]
// The protocol-free interface has one unsafe item: the `const` handle of
// the reserved network Ebb id (see `api.rs`).
#![deny(unsafe_code)]

extern crate alloc;

mod api;
mod error;
mod stack;
mod tcp;
mod udp;

pub use api::{connect, listen, listen_on_all_cores, udp_bind, unlisten, NETWORK};
pub use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
pub use ebb_iobuf::{IoBuf, IoChain};
pub use error::{NetError, SendError};
pub use stack::{AcceptFn, NetStack, NetworkEbb};
pub use tcp::{TcpConnection, TcpHandler, TcpOps};
pub use udp::{UdpHandler, UdpOps, UdpSocket};
