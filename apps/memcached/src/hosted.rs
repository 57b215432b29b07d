//! `memcached` on the hosted platform. Options are named as
//! memcached 1.6 names them; the platform's own options (`--cores`,
//! `--cpus`, `--backend`, `--no-pin`) are accepted too, and with `--tap
//! NAME` the server runs on Ebbflow's own network stack over that TAP
//! device (`ebb-userstack`; `./ebb run memcached --userstack` sets it up).

use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use ebb_core::{CoreId, Multicore};
use ebb_event::{now, shutdown, spawn_task, spawn_task_on};
use ebb_hosted::{Config, OPTIONS_HELP};
use memcached::stats::Counters;
use memcached::{accept_fn, Server, Settings, Store};

/// Ebbflow's general-purpose allocator: per-core slabs with no atomics on
/// the local paths (see crates/ebb-mem).
#[global_allocator]
static ALLOCATOR: ebb_mem::hosted::HostedAllocator = ebb_mem::hosted::HostedAllocator::new();

const USAGE: &str = "\
usage: memcached [OPTIONS]

memcached 1.6-compatible server on Ebbflow (text, binary and meta protocols).
  -p, --port=PORT             TCP port to listen on (default 11211)
  -l, --listen=ADDR           interface to listen on (default 127.0.0.1;
                              0.0.0.0 with --tap)
  -m, --memory-limit=MB       item memory in megabytes (default 64)
  -I, --max-item-size=SIZE    largest item, e.g. 1m, 512k (default 1m)
  -c, --conn-limit=NUM        most simultaneous connections (default 1024)
  -t, --threads=NUM           cores to run on (default: every CPU; 1 with
                              --tap, whose stack serves core 0 only)
  -C, --disable-cas           do not use CAS
  -A, --enable-shutdown       the text `shutdown` command stops the server
  -U, --udp-port=PORT         accepted for compatibility; only 0 (off)
  -v                          verbose
  -h, --help                  this text
";

struct Options {
    settings: Settings,
    port: u16,
    listen: std::net::IpAddr,
    cores: Option<usize>,
}

fn size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 1 << 10),
        (i, 'm' | 'M') => (&text[..i], 1 << 20),
        (i, 'g' | 'G') => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

fn parse(args: Vec<String>, userstack: bool) -> Result<Options, String> {
    let listen = if userstack {
        [0, 0, 0, 0]
    } else {
        [127, 0, 0, 1]
    };
    let mut options = Options {
        settings: Settings::default(),
        port: 11211,
        listen: listen.into(),
        cores: None,
    };
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                (flag.to_string(), Some(value.to_string()))
            }
            _ if arg.len() > 2 && arg.starts_with('-') && !arg.starts_with("--") => {
                (arg[..2].to_string(), Some(arg[2..].to_string()))
            }
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "-p" | "--port" => {
                let text = value("-p")?;
                options.port = text
                    .parse()
                    .map_err(|_| format!("-p takes a port number, not '{text}'"))?;
            }
            "-l" | "--listen" => {
                let text = value("-l")?;
                options.listen = text
                    .parse()
                    .map_err(|_| format!("-l takes an IP address, not '{text}'"))?;
            }
            "-m" | "--memory-limit" => {
                let text = value("-m")?;
                let megabytes: usize = text
                    .parse()
                    .ok()
                    .filter(|&mb| mb > 0)
                    .ok_or_else(|| format!("-m takes megabytes above 0, not '{text}'"))?;
                options.settings.memory_limit = megabytes << 20;
            }
            "-I" | "--max-item-size" => {
                let text = value("-I")?;
                let bytes = size(&text)
                    .ok_or_else(|| format!("-I takes a size like 1m or 512k, not '{text}'"))?;
                if !(1024..=(1 << 30)).contains(&bytes) {
                    return Err(format!("-I must be between 1k and 1g, not '{text}'"));
                }
                options.settings.item_size_max = bytes;
            }
            "-c" | "--conn-limit" => {
                let text = value("-c")?;
                options.settings.max_connections = text
                    .parse()
                    .ok()
                    .filter(|&c| c > 0)
                    .ok_or_else(|| format!("-c takes a number above 0, not '{text}'"))?;
            }
            "-t" | "--threads" => {
                let text = value("-t")?;
                options.cores = Some(
                    text.parse()
                        .ok()
                        .filter(|&t| t > 0)
                        .ok_or_else(|| format!("-t takes a number above 0, not '{text}'"))?,
                );
            }
            "-U" | "--udp-port" => {
                let text = value("-U")?;
                if text != "0" {
                    return Err("UDP is not supported: only -U 0".to_string());
                }
            }
            "-C" | "--disable-cas" => options.settings.cas_disabled = true,
            "-A" | "--enable-shutdown" => options.settings.shutdown_enabled = true,
            "-v" | "-vv" | "-vvv" => options.settings.verbosity += 1,
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    Ok(options)
}

pub fn main() -> ExitCode {
    let help = format!("{USAGE}\n{OPTIONS_HELP}\n{}", ebb_userstack::OPTIONS_HELP);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|arg| arg == "-h" || arg == "--help") {
        println!("{help}");
        return ExitCode::SUCCESS;
    }
    // The platform's options first, then the user-space stack's, then
    // memcached's own from what is left.
    let parsed = Config::from_args(args)
        .and_then(|(config, rest)| Ok((config, ebb_userstack::Options::from_args(rest)?)))
        .map_err(|error| error.to_string())
        .and_then(|(config, (userstack, rest))| {
            let options = parse(rest, userstack.is_some())?;
            Ok((config, userstack, options))
        });
    let (mut config, userstack, options) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => {
            eprintln!("memcached: {error}\n\n{help}");
            return ExitCode::from(2);
        }
    };
    if let Some(cores) = options.cores {
        config.cores = Some(cores);
    }
    let on_userstack = userstack.is_some();
    if let Some(userstack) = userstack {
        // One TAP queue: the stack serves core 0 only.
        config.cores.get_or_insert(1);
        if let Err(error) = ebb_userstack::install(&mut config, userstack) {
            eprintln!("memcached: {error}");
            return ExitCode::FAILURE;
        }
    }
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| u32::try_from(elapsed.as_secs()).unwrap_or(u32::MAX))
        .unwrap_or(0);
    let addr = std::net::SocketAddr::new(options.listen, options.port);
    let settings = options.settings;
    let result = ebb_hosted::run(config, move || {
        let stats = match Multicore::<Counters>::create(()) {
            Ok(stats) => stats,
            Err(error) => {
                eprintln!("memcached: {error}");
                let _ = shutdown(1);
                return;
            }
        };
        let server: &'static Server = Box::leak(Box::new(Server {
            store: Store::from_settings(&settings),
            settings,
            stats,
            started,
            started_mono: now(),
            connections: AtomicU64::new(0),
        }));
        spawn_task(async move {
            let listening = if on_userstack {
                // Only core 0 has the user-space stack; the other cores
                // (with -t) still serve the store to nobody.
                match spawn_task_on(CoreId(0), async move {
                    ebb_net::listen(addr, accept_fn(server)).map(|bound| (bound, 1))
                }) {
                    Ok(handle) => handle.await.unwrap_or(Err(ebb_net::NetError::NotOnCore)),
                    Err(_) => Err(ebb_net::NetError::NotOnCore),
                }
            } else {
                ebb_net::listen_on_all_cores(addr, accept_fn(server))
                    .await
                    .map(|bound| (bound, ebb_event::core_count()))
            };
            match listening {
                Ok((bound, cores)) => {
                    if server.settings.verbosity > 0 {
                        eprintln!("memcached: listening on {bound} on {cores} cores");
                    }
                }
                Err(error) => {
                    eprintln!("memcached: cannot listen on {addr}: {error}");
                    let _ = shutdown(71);
                }
            }
        });
    });
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("memcached: {error}");
            ExitCode::FAILURE
        }
    }
}
