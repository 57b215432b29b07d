//! `userstack-udp-echo`: a UDP echo server on the user-space stack, written
//! against `ebb-net` like any application (the namespace tests run it).
//!
//! usage: userstack-udp-echo --tap NAME [--tap-ip ADDR/LEN] [--udp-port N]
//!        [PLATFORM OPTIONS]

use std::net::SocketAddr;
use std::process::ExitCode;

use ebb_hosted::Config;
use ebb_net::{IoBuf, IoChain, UdpHandler, UdpSocket};
use ebb_userstack::Options;

/// Sends each datagram back as received: the very receive buffer.
struct Echo;

impl UdpHandler for Echo {
    fn on_datagram(&mut self, socket: &UdpSocket, from: SocketAddr, data: IoBuf) {
        // A reply that cannot go out now is lost, as UDP allows.
        let _ = socket.send_to(from, IoChain::from(data));
    }
}

fn main() -> ExitCode {
    let parsed = Config::from_args(std::env::args().skip(1))
        .and_then(|(config, rest)| Ok((config, Options::from_args(rest)?)));
    let (mut config, (options, rest)) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            eprintln!("userstack-udp-echo: {error}");
            return ExitCode::from(2);
        }
    };
    let mut port = 7;
    let mut rest = rest.into_iter();
    while let Some(arg) = rest.next() {
        match (arg.as_str(), rest.next().and_then(|text| text.parse().ok())) {
            ("--udp-port", Some(value)) => port = value,
            _ => {
                eprintln!("userstack-udp-echo: unexpected argument '{arg}'");
                return ExitCode::from(2);
            }
        }
    }
    let Some(options) = options else {
        eprintln!("userstack-udp-echo: --tap NAME is required");
        return ExitCode::from(2);
    };
    if let Err(error) = ebb_userstack::install(&mut config, options) {
        eprintln!("userstack-udp-echo: {error}");
        return ExitCode::FAILURE;
    }
    let result = ebb_hosted::run(config, move || {
        match ebb_net::udp_bind(SocketAddr::from(([0, 0, 0, 0], port)), Box::new(Echo)) {
            Ok(socket) => eprintln!("userstack-udp-echo: UDP {}", socket.local_addr()),
            Err(error) => {
                eprintln!("userstack-udp-echo: cannot bind UDP port {port}: {error}");
                let _ = ebb_event::shutdown(1);
            }
        }
    });
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("userstack-udp-echo: {error}");
            ExitCode::FAILURE
        }
    }
}
