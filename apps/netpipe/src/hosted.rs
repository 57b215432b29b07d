//! `netpipe` on the hosted platform: the ping-pong and sink servers on
//! every core.

use std::net::SocketAddr;
use std::process::ExitCode;

use ebb_event::{core_count, shutdown, spawn_task};
use ebb_hosted::{Config, OPTIONS_HELP};
use netpipe::{ping_pong_accept, sink_accept, DEFAULT_PING_PONG_PORT, DEFAULT_SINK_PORT};

const USAGE: &str = "\
usage: netpipe [--listen ADDR] [--port PORT] [--sink-port PORT] [PLATFORM OPTIONS]

NetPIPE-style ping-pong (a 4-byte big-endian length, then the payload, which
comes back) and a bulk sink (an 8-byte length, then the data; answered with
the count and its Adler-32) on every core.
  --listen ADDR      address to listen on (default 127.0.0.1)
  --port PORT        ping-pong TCP port (default 5002; 0 picks one)
  --sink-port PORT   sink TCP port (default 5003; 0 picks one)
";

struct Options {
    listen: std::net::IpAddr,
    port: u16,
    sink_port: u16,
}

fn parse(args: Vec<String>) -> Result<Options, String> {
    let mut options = Options {
        listen: [127, 0, 0, 1].into(),
        port: DEFAULT_PING_PONG_PORT,
        sink_port: DEFAULT_SINK_PORT,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let text = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--listen" => {
                options.listen = text
                    .parse()
                    .map_err(|_| format!("--listen takes an IP address, not '{text}'"))?;
            }
            "--port" | "--sink-port" => {
                let port = text
                    .parse()
                    .map_err(|_| format!("{arg} takes a port number, not '{text}'"))?;
                if arg == "--port" {
                    options.port = port;
                } else {
                    options.sink_port = port;
                }
            }
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    Ok(options)
}

pub fn main() -> ExitCode {
    let parsed = Config::from_args(std::env::args().skip(1))
        .map_err(|error| error.to_string())
        .and_then(|(config, rest)| {
            if rest.iter().any(|arg| arg == "--help" || arg == "-h") {
                println!("{USAGE}\n{OPTIONS_HELP}");
                std::process::exit(0);
            }
            Ok((config, parse(rest)?))
        });
    let (config, options) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            eprintln!("netpipe: {error}\n\n{USAGE}\n{OPTIONS_HELP}");
            return ExitCode::from(2);
        }
    };
    let result = ebb_hosted::run(config, move || {
        spawn_task(async move {
            let ping = SocketAddr::new(options.listen, options.port);
            let sink = SocketAddr::new(options.listen, options.sink_port);
            let ping = match ebb_net::listen_on_all_cores(ping, ping_pong_accept()).await {
                Ok(bound) => bound,
                Err(error) => {
                    eprintln!("netpipe: cannot listen on TCP {ping}: {error}");
                    let _ = shutdown(1);
                    return;
                }
            };
            match ebb_net::listen_on_all_cores(sink, sink_accept()).await {
                // Tests and scripts read the two ports from this line.
                Ok(sink) => println!(
                    "netpipe: ping-pong {ping} sink {sink} on {} cores; Ctrl-C stops",
                    core_count()
                ),
                Err(error) => {
                    eprintln!("netpipe: cannot listen on TCP {sink}: {error}");
                    let _ = shutdown(1);
                }
            }
        });
    });
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("netpipe: {error}");
            ExitCode::FAILURE
        }
    }
}
