//! `memcached` on the native platform: the same server (`memcached::Server`)
//! on Ebbflow's own stack over virtio-net (core 0; 10.0.2.15 behind QEMU
//! user networking). `./ebb run memcached --native --forward 11211`
//! serves it on 127.0.0.1:11211.

use alloc::boxed::Box;
use core::net::{Ipv4Addr, SocketAddr};
use core::sync::atomic::AtomicU64;

use ebb_core::Multicore;
use ebb_event::{now, shutdown, spawn_task};
use memcached::stats::Counters;
use memcached::{accept_fn, Server, Settings, Store};

const USAGE: &str = "\
usage: memcached [-p PORT] [-m MB] [-c N] [-A] [-v]

memcached 1.6-compatible server on Ebbflow, native (virtio-net, core 0).
  -p PORT   TCP port to listen on (default 11211), on 0.0.0.0
  -m MB     item memory in megabytes (default 64)
  -c N      most simultaneous connections (default 1024)
  -A        enable the text `shutdown` command (stops the guest)
  -v        verbose
";

ebb_native::entry!(main);

fn main(args: &[&str]) -> i32 {
    let mut settings = Settings::default();
    let mut port = 11211u16;
    let mut args = args.iter();
    while let Some(&arg) = args.next() {
        match arg {
            "-h" | "--help" => {
                ebb_native::println!("{USAGE}");
                return 0;
            }
            "-v" => settings.verbosity += 1,
            "-A" => settings.shutdown_enabled = true,
            "-p" | "-m" | "-c" => {
                let Some(value) = args.next().and_then(|text| text.parse::<u32>().ok()) else {
                    ebb_native::println!("memcached: {arg} takes a number\n\n{USAGE}");
                    return 2;
                };
                if arg == "-p" {
                    let Ok(value) = u16::try_from(value) else {
                        ebb_native::println!("memcached: -p takes a port number\n\n{USAGE}");
                        return 2;
                    };
                    port = value;
                } else if arg == "-m" {
                    settings.memory_limit = usize::try_from(value).unwrap_or(usize::MAX) << 20;
                } else {
                    settings.max_connections = usize::try_from(value).unwrap_or(usize::MAX);
                }
            }
            other => {
                ebb_native::println!("memcached: unexpected argument '{other}'\n\n{USAGE}");
                return 2;
            }
        }
    }
    let addr = SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), port);
    let result = ebb_native::run(move || {
        let stats = match Multicore::<Counters>::create(()) {
            Ok(stats) => stats,
            Err(error) => {
                ebb_native::println!("memcached: {error}");
                let _ = shutdown(1);
                return;
            }
        };
        let server: &'static Server = Box::leak(Box::new(Server {
            store: Store::from_settings(&settings),
            settings,
            stats,
            // No wall clock yet on native (crates/ebb-native README, Next):
            // `time` counts from the epoch plus uptime.
            started: 0,
            started_mono: now(),
            connections: AtomicU64::new(0),
        }));
        spawn_task(async move {
            match ebb_net::listen_on_all_cores(addr, accept_fn(server)).await {
                Ok(bound) => ebb_native::println!(
                    "memcached: listening on {bound} on {} cores",
                    ebb_event::core_count()
                ),
                Err(error) => {
                    ebb_native::println!("memcached: cannot listen on {addr}: {error}");
                    let _ = shutdown(71);
                }
            }
        });
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            ebb_native::println!("memcached: {error}");
            1
        }
    }
}
