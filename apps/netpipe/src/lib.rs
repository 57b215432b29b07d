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
//! The crate is platform-neutral (`no_std` + `alloc`, no `unsafe`),
//! written against `ebb-app`: `main.rs` runs it on every platform.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use core::net::SocketAddr;

use ebb_app::{exit, App, Args, Launch, Opt, UsageError};

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

const OPTIONS: &[Opt] = &[
    Opt::long_value(
        "listen",
        "ADDR",
        "Address to listen on (default 127.0.0.1 on kernel sockets, 0.0.0.0 on our stack)",
    ),
    Opt::long_value(
        "port",
        "PORT",
        "Ping-pong TCP port (default 5002; 0 picks one)",
    ),
    Opt::long_value(
        "sink-port",
        "PORT",
        "Sink TCP port (default 5003; 0 picks one)",
    ),
];

/// The application: both servers on every core.
pub static APP: App = App {
    name: "netpipe",
    about: "NetPIPE-style ping-pong (a 4-byte big-endian length, then the payload, which comes back) and a bulk sink (an 8-byte length, then the data; answered with the count and its Adler-32).",
    options: OPTIONS,
    operands: None,
    setup,
};

fn setup(args: &Args) -> Result<Launch, UsageError> {
    let listen = args.parse_or("listen", ebb_app::net::default_listen_ip(), "an IP address")?;
    let ping = args.parse_or("port", DEFAULT_PING_PONG_PORT, "a port number")?;
    let sink = args.parse_or("sink-port", DEFAULT_SINK_PORT, "a port number")?;
    Ok(Launch::new(move || {
        serve(SocketAddr::new(listen, ping), SocketAddr::new(listen, sink));
    }))
}

/// Core 0's first event: both listeners, then the ready line (tests and
/// benchmarks read the two ports from it).
fn serve(ping: SocketAddr, sink: SocketAddr) {
    ebb_event::spawn_task(async move {
        let ping = match ebb_app::net::listen(ping, ping_pong_accept()).await {
            Ok(listening) => listening.addr,
            Err(error) => {
                ebb_app::error!("cannot listen on TCP {ping}: {error}");
                exit::stop(exit::OS_ERROR);
                return;
            }
        };
        match ebb_app::net::listen(sink, sink_accept()).await {
            Ok(sink) => ebb_app::ready(format_args!("ping-pong {ping} sink {}", sink.addr)),
            Err(error) => {
                ebb_app::error!("cannot listen on TCP {sink}: {error}");
                exit::stop(exit::OS_ERROR);
            }
        }
    });
}
