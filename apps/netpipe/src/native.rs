//! `netpipe` on the native platform: the same ping-pong and sink
//! (`netpipe::ping_pong_accept`, `netpipe::sink_accept`) on Ebbflow's own
//! stack over virtio-net (core 0). Behind QEMU user networking the guest
//! is 10.0.2.15 (`./ebb run netpipe --native --forward 5002 --forward
//! 5003`); on a TAP device it takes the address of `ip=` (`--net tap`).

use core::net::{Ipv4Addr, SocketAddr};

use ebb_event::{core_count, shutdown, spawn_task};
use netpipe::{ping_pong_accept, sink_accept, DEFAULT_PING_PONG_PORT, DEFAULT_SINK_PORT};

const USAGE: &str = "\
usage: netpipe [--port PORT] [--sink-port PORT]

NetPIPE-style ping-pong (a 4-byte big-endian length, then the payload, which
comes back) and a bulk sink (an 8-byte length, then the data; answered with
the count and its Adler-32) on 0.0.0.0, native (virtio-net, core 0).
  --port PORT        ping-pong TCP port (default 5002)
  --sink-port PORT   sink TCP port (default 5003)
";

ebb_native::entry!(main);

fn main(args: &[&str]) -> i32 {
    let mut port = DEFAULT_PING_PONG_PORT;
    let mut sink_port = DEFAULT_SINK_PORT;
    let mut args = args.iter();
    while let Some(&arg) = args.next() {
        let value = match arg {
            "--help" | "-h" => {
                ebb_native::println!("{USAGE}");
                return 0;
            }
            "--port" | "--sink-port" => args.next().and_then(|text| text.parse::<u16>().ok()),
            other => {
                ebb_native::println!("netpipe: unexpected argument '{other}'\n\n{USAGE}");
                return 2;
            }
        };
        let Some(value) = value else {
            ebb_native::println!("netpipe: {arg} takes a port number\n\n{USAGE}");
            return 2;
        };
        if arg == "--port" {
            port = value;
        } else {
            sink_port = value;
        }
    }
    let any = Ipv4Addr::UNSPECIFIED.into();
    let result = ebb_native::run(move || {
        spawn_task(async move {
            let ping = SocketAddr::new(any, port);
            let sink = SocketAddr::new(any, sink_port);
            let ping = match ebb_net::listen_on_all_cores(ping, ping_pong_accept()).await {
                Ok(bound) => bound,
                Err(error) => {
                    ebb_native::println!("netpipe: cannot listen on TCP {ping}: {error}");
                    let _ = shutdown(1);
                    return;
                }
            };
            match ebb_net::listen_on_all_cores(sink, sink_accept()).await {
                // Tests and benchmarks wait for this line (as hosted).
                Ok(sink) => ebb_native::println!(
                    "netpipe: ping-pong {ping} sink {sink} on {} cores",
                    core_count()
                ),
                Err(error) => {
                    ebb_native::println!("netpipe: cannot listen on TCP {sink}: {error}");
                    let _ = shutdown(1);
                }
            }
        });
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            ebb_native::println!("netpipe: {error}");
            1
        }
    }
}
