//! `echo` on the native platform: the same handlers (`echo::tcp_echo`,
//! `echo::UdpEcho`) on Ebbflow's own stack over virtio-net, core 0. With
//! QEMU user networking the guest is 10.0.2.15; `./ebb run echo --native`
//! forwards the TCP port to 127.0.0.1.

use core::net::{Ipv4Addr, SocketAddr};

use ebb_event::{shutdown, spawn};
use echo::{tcp_echo, UdpEcho};

const USAGE: &str = "\
usage: echo [--tcp-port PORT] [--udp-port PORT]

Echoes TCP connections and UDP datagrams on 0.0.0.0 (core 0, virtio-net).
  --tcp-port PORT   TCP port (default 7007)
  --udp-port PORT   UDP port (default 7007)
";

ebb_native::entry!(main);

fn main(args: &[&str]) -> i32 {
    let mut tcp_port = 7007u16;
    let mut udp_port = 7007u16;
    let mut args = args.iter();
    while let Some(&arg) = args.next() {
        let port = match arg {
            "--help" | "-h" => {
                ebb_native::println!("{USAGE}");
                return 0;
            }
            "--tcp-port" | "--udp-port" => args.next().and_then(|text| text.parse::<u16>().ok()),
            other => {
                ebb_native::println!("echo: unexpected argument '{other}'\n\n{USAGE}");
                return 2;
            }
        };
        let Some(port) = port else {
            ebb_native::println!("echo: {arg} takes a port number\n\n{USAGE}");
            return 2;
        };
        if arg == "--tcp-port" {
            tcp_port = port;
        } else {
            udp_port = port;
        }
    }
    let result = ebb_native::run(move || {
        spawn(move || {
            let any = Ipv4Addr::UNSPECIFIED.into();
            let tcp = match ebb_net::listen(SocketAddr::new(any, tcp_port), tcp_echo()) {
                Ok(bound) => bound,
                Err(error) => {
                    ebb_native::println!("echo: cannot listen on TCP port {tcp_port}: {error}");
                    let _ = shutdown(1);
                    return;
                }
            };
            match ebb_net::udp_bind(
                SocketAddr::new(any, udp_port),
                alloc::boxed::Box::new(UdpEcho),
            ) {
                Ok(udp) => ebb_native::println!("echo: TCP {tcp}, UDP {}", udp.local_addr()),
                Err(error) => {
                    ebb_native::println!("echo: cannot bind UDP port {udp_port}: {error}");
                    let _ = shutdown(1);
                }
            }
        });
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            ebb_native::println!("echo: {error}");
            1
        }
    }
}
