//! `echo` hosted: a TCP and UDP echo server on every core; with `--tap NAME`, on
//! Ebbflow's own network stack over that TAP device (`ebb-userstack`, core
//! 0 only; `./ebb run echo --userstack` sets it up).

use std::net::SocketAddr;
use std::process::ExitCode;

use ebb_core::CoreId;
use ebb_event::{core_count, shutdown, spawn_task, spawn_task_on};
use ebb_hosted::{Config, OPTIONS_HELP};
use ebb_net::NetError;
use echo::{tcp_echo, UdpEcho};

const USAGE: &str = "\
usage: echo [--listen ADDR] [--tcp-port PORT] [--udp-port PORT] [PLATFORM OPTIONS]

Echoes TCP connections and UDP datagrams on every core.
  --listen ADDR     address to listen on (default 127.0.0.1; 0.0.0.0 with --tap)
  --tcp-port PORT   TCP port (default 7007; 0 picks one)
  --udp-port PORT   UDP port (default 7007; 0 picks one); UDP is served on core 0
";

struct Options {
    listen: std::net::IpAddr,
    tcp_port: u16,
    udp_port: u16,
}

fn parse(args: Vec<String>, userstack: bool) -> Result<Options, String> {
    let listen = if userstack {
        [0, 0, 0, 0]
    } else {
        [127, 0, 0, 1]
    };
    let mut options = Options {
        listen: listen.into(),
        tcp_port: 7007,
        udp_port: 7007,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => {
                let text = value()?;
                options.listen = text
                    .parse()
                    .map_err(|_| format!("--listen takes an IP address, not '{text}'"))?;
            }
            "--tcp-port" | "--udp-port" => {
                let text = value()?;
                let port = text
                    .parse()
                    .map_err(|_| format!("{arg} takes a port number, not '{text}'"))?;
                if arg == "--tcp-port" {
                    options.tcp_port = port;
                } else {
                    options.udp_port = port;
                }
            }
            other => return Err(format!("unexpected argument '{other}'")),
        }
    }
    Ok(options)
}

pub fn main() -> ExitCode {
    let help = format!("{USAGE}\n{OPTIONS_HELP}\n{}", ebb_userstack::OPTIONS_HELP);
    let parsed = Config::from_args(std::env::args().skip(1))
        .and_then(|(config, rest)| Ok((config, ebb_userstack::Options::from_args(rest)?)))
        .map_err(|error| error.to_string())
        .and_then(|(config, (userstack, rest))| {
            if rest.iter().any(|arg| arg == "--help" || arg == "-h") {
                println!("{help}");
                std::process::exit(0);
            }
            let options = parse(rest, userstack.is_some())?;
            Ok((config, userstack, options))
        });
    let (mut config, userstack, options) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            eprintln!("echo: {error}\n\n{help}");
            return ExitCode::from(2);
        }
    };
    if let Some(userstack) = userstack {
        if let Err(error) = ebb_userstack::install(&mut config, userstack) {
            eprintln!("echo: {error}");
            return ExitCode::FAILURE;
        }
    }
    let result = ebb_hosted::run(config, move || {
        spawn_task(async move {
            let tcp = SocketAddr::new(options.listen, options.tcp_port);
            let udp = SocketAddr::new(options.listen, options.udp_port);
            let tcp = match ebb_net::listen_on_all_cores(tcp, tcp_echo()).await {
                Ok(bound) => format!("TCP {bound} on {} cores", core_count()),
                // A stack without TCP (the user-space one with --cores
                // above 1 refuses on other cores): serve UDP.
                Err(NetError::Unsupported(why)) => format!("no TCP ({why})"),
                Err(error) => {
                    eprintln!("echo: cannot listen on TCP {tcp}: {error}");
                    let _ = shutdown(1);
                    return;
                }
            };
            let udp_wanted = udp;
            let udp = match spawn_task_on(CoreId(0), async move {
                ebb_net::udp_bind(udp, Box::new(UdpEcho)).map(|socket| socket.local_addr())
            }) {
                Ok(handle) => handle.await.unwrap_or(Err(ebb_net::NetError::NotOnCore)),
                Err(_) => Err(ebb_net::NetError::NotOnCore),
            };
            match udp {
                Ok(udp) => println!("echo: {tcp}, UDP {udp}; Ctrl-C stops"),
                Err(error) => {
                    eprintln!("echo: cannot bind UDP {udp_wanted}: {error}");
                    let _ = shutdown(1);
                }
            }
        });
    });
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("echo: {error}");
            ExitCode::FAILURE
        }
    }
}
