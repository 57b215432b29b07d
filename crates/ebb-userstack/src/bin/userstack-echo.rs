//! `userstack-echo`: UDP and TCP echo servers on the user-space stack,
//! written against `ebb-net` like any application (the namespace tests run
//! it). Every reply is the received buffers themselves, chained unchanged.
//!
//! usage: userstack-echo --tap NAME [--tap-ip ADDR/LEN] [--udp-port N]
//!        [--tcp-port N] [PLATFORM OPTIONS]

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use ebb_hosted::Config;
use ebb_net::{IoBuf, IoChain, TcpConnection, TcpHandler, UdpHandler, UdpSocket};
use ebb_userstack::Options;

/// Sends each datagram back as received: the very receive buffer.
struct UdpEcho;

impl UdpHandler for UdpEcho {
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        // A reply that cannot go out now is lost, as UDP allows.
        let _ = socket.send_to(from, IoChain::from(data));
    }
}

/// Sends a connection's bytes back; what the peer's window does not take
/// now is queued. The peer's FIN is answered by ours once the queue is
/// out (the default `on_closed`).
struct TcpEcho;

impl TcpHandler for TcpEcho {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        if conn.send_or_buffer(data).is_err() {
            conn.abort();
        }
    }
}

fn main() -> ExitCode {
    let parsed = Config::from_args(std::env::args().skip(1))
        .and_then(|(config, rest)| Ok((config, Options::from_args(rest)?)));
    let (mut config, (options, rest)) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            eprintln!("userstack-echo: {error}");
            return ExitCode::from(2);
        }
    };
    let mut udp_port = 7;
    let mut tcp_port = 7;
    let mut rest = rest.into_iter();
    while let Some(arg) = rest.next() {
        match (arg.as_str(), rest.next().and_then(|text| text.parse().ok())) {
            ("--udp-port", Some(value)) => udp_port = value,
            ("--tcp-port", Some(value)) => tcp_port = value,
            _ => {
                eprintln!("userstack-echo: unexpected argument '{arg}'");
                return ExitCode::from(2);
            }
        }
    }
    let Some(options) = options else {
        eprintln!("userstack-echo: --tap NAME is required");
        return ExitCode::from(2);
    };
    if let Err(error) = ebb_userstack::install(&mut config, options) {
        eprintln!("userstack-echo: {error}");
        return ExitCode::FAILURE;
    }
    let result = ebb_hosted::run(config, move || {
        let any = |port: u16| SocketAddr::from(([0, 0, 0, 0], port));
        match ebb_net::udp_bind(any(udp_port), Box::new(UdpEcho)) {
            Ok(socket) => eprintln!("userstack-echo: UDP {}", socket.local_addr()),
            Err(error) => {
                eprintln!("userstack-echo: cannot bind UDP port {udp_port}: {error}");
                let _ = ebb_event::shutdown(1);
                return;
            }
        }
        let accept = Arc::new(|_: &TcpConnection| Box::new(TcpEcho) as Box<dyn TcpHandler>);
        match ebb_net::listen(any(tcp_port), accept) {
            Ok(bound) => eprintln!("userstack-echo: TCP {bound}"),
            Err(error) => {
                eprintln!("userstack-echo: cannot listen on TCP port {tcp_port}: {error}");
                let _ = ebb_event::shutdown(1);
            }
        }
    });
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("userstack-echo: {error}");
            ExitCode::FAILURE
        }
    }
}
