//! NetPIPE-style network measurement as an Ebbflow application: the server
//! side of a ping-pong latency test and of a bulk throughput test, written
//! against Ebbflow's network interface so the same code runs hosted and
//! native. The host-side client is `ebb_loadgen::netpipe`.
//!
//! - [`PingPong`] (port 5002 by default): each message is a 4-byte
//!   big-endian length and that many payload bytes; once the whole message
//!   is in, the payload goes back unchanged (the received buffers
//!   themselves when they are few, see [`pingpong`]). The client times the
//!   round trip: one-way latency = RTT / 2, goodput = size / one-way time,
//!   as NetPIPE reports them.
//! - [`Sink`] (port 5003): a transfer is an 8-byte big-endian length and
//!   that many bytes, which are checksummed (Adler-32, RFC 1950 §8.2) and
//!   dropped; when all are in, the sink answers with the byte count and the
//!   checksum (12 bytes), so the client gets an end-to-end time and an
//!   integrity check.
//!
//! The crate is platform-neutral (`no_std` + `alloc`, no `unsafe`);
//! `main.rs` runs it on the hosted platform.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod adler32;
pub mod pingpong;
pub mod sink;

pub use adler32::Adler32;
pub use pingpong::{ping_pong_accept, PingPong, MAX_MESSAGE_LEN, PING_HEADER_LEN};
pub use sink::{sink_accept, Sink, SINK_HEADER_LEN, SINK_REPLY_LEN};

/// The ping-pong server's default TCP port.
pub const DEFAULT_PING_PONG_PORT: u16 = 5002;
/// The sink's default TCP port.
pub const DEFAULT_SINK_PORT: u16 = 5003;
