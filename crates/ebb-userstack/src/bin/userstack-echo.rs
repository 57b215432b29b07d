//! `userstack-echo`: UDP and TCP echo servers on the user-space stack,
//! written against `ebb-net` like any application (the namespace tests run
//! it). Every reply is the received buffers themselves, chained unchanged.
//!
//! usage: userstack-echo --tap NAME [--tap-ip ADDR/LEN] [--udp-port N]
//!        [--tcp-port N] [PLATFORM OPTIONS]

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use ebb_hosted::PlatformArgs;
use ebb_net::{IoBuf, IoChain, TcpConnection, TcpHandler, UdpHandler, UdpSocket};
use ebb_userstack::TapArgs;

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

/// UDP and TCP echo servers on the user-space stack.
#[derive(Debug, Parser)]
#[command(name = "userstack-echo")]
struct Cli {
    /// UDP port
    #[arg(long, value_name = "PORT", default_value_t = 7)]
    udp_port: u16,
    /// TCP port
    #[arg(long, value_name = "PORT", default_value_t = 7)]
    tcp_port: u16,
    #[command(flatten)]
    tap: TapArgs,
    #[command(flatten)]
    platform: PlatformArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let (udp_port, tcp_port) = (cli.udp_port, cli.tcp_port);
    let mut config = cli.platform.config();
    let options = match cli.tap.options() {
        Ok(Some(options)) => options,
        Ok(None) => {
            eprintln!("userstack-echo: --tap NAME is required");
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("userstack-echo: {error}");
            return ExitCode::from(2);
        }
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
