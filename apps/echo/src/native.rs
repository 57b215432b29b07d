//! `echo` on the native platform: the same handlers (`echo::tcp_echo`,
//! `echo::UdpEcho`) on Ebbflow's own stack over virtio-net, core 0. With
//! QEMU user networking the guest is 10.0.2.15; `./ebb run echo --native`
//! forwards the TCP port to 127.0.0.1.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::net::{Ipv4Addr, SocketAddr};
use core::sync::atomic::{AtomicU64, Ordering};

use ebb_event::{shutdown, spawn};
use ebb_net::{AcceptFn, IoChain, NetError, TcpConnection, TcpHandler};
use echo::{tcp_echo, TcpEcho, UdpEcho};

const USAGE: &str = "\
usage: echo [--tcp-port PORT] [--udp-port PORT] [--exit-after N]

Echoes TCP connections and UDP datagrams on 0.0.0.0 (core 0, virtio-net).
  --tcp-port PORT   TCP port (default 7007)
  --udp-port PORT   UDP port (default 7007)
  --exit-after N    exit (code 0) once N TCP connections have ended, e.g. for
                    the platform's counter dump at exit (`verbose`)
";

/// TCP connections ended so far, for `--exit-after`.
static ENDED: AtomicU64 = AtomicU64::new(0);

/// Echoes, and ends the node after `limit` connections.
struct Counted(TcpEcho, u64);

impl Counted {
    fn ended(&self) {
        if ENDED.fetch_add(1, Ordering::Relaxed) + 1 >= self.1 {
            // After this event, so that our FIN goes out first.
            spawn(|| {
                let _ = shutdown(0);
            });
        }
    }
}

impl TcpHandler for Counted {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        self.0.on_data(conn, data);
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        conn.close();
        self.ended();
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, _error: NetError) {
        self.ended();
    }
}

fn counted_echo(limit: u64) -> AcceptFn {
    Arc::new(move |_conn: &TcpConnection| Box::new(Counted(TcpEcho, limit)) as Box<dyn TcpHandler>)
}

ebb_native::entry!(main);

fn main(args: &[&str]) -> i32 {
    let mut tcp_port = 7007u16;
    let mut udp_port = 7007u16;
    let mut exit_after = None;
    let mut args = args.iter();
    while let Some(&arg) = args.next() {
        let port = match arg {
            "--exit-after" => {
                let Some(n) = args.next().and_then(|text| text.parse::<u64>().ok()) else {
                    ebb_native::println!("echo: --exit-after takes a number\n\n{USAGE}");
                    return 2;
                };
                exit_after = Some(n);
                continue;
            }
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
            let accept = exit_after.map_or_else(tcp_echo, counted_echo);
            let tcp = match ebb_net::listen(SocketAddr::new(any, tcp_port), accept) {
                Ok(bound) => bound,
                Err(error) => {
                    ebb_native::println!("echo: cannot listen on TCP port {tcp_port}: {error}");
                    let _ = shutdown(1);
                    return;
                }
            };
            match ebb_net::udp_bind(SocketAddr::new(any, udp_port), Box::new(UdpEcho)) {
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
