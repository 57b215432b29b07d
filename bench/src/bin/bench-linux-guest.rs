//! `./ebb bench linux-guest`: builds the Linux comparison guest (Debian's
//! cloud kernel, stock memcached and stock Redis, cached under
//! `target/linux-guest/`),
//! boots it under QEMU (TCG) and checks that its service answers, over user
//! networking (127.0.0.1 ports forwarded to the guest) and over a TAP device
//! in a network namespace (needs root), then shuts it down. A smoke check
//! with timings, not a throughput benchmark.
//!
//! Services: stock memcached (default), checked with `version` and a
//! set/get; `--service redis`, stock Redis 7.0.15 (in memory only), checked
//! with `PING` and a `SET` read back with `GET` over RESP; or `--service
//! netpipe`, Ebbflow's hosted netpipe application added to the image
//! (built first with cargo), checked with ping-pongs of 1 B to 1 MiB and an
//! 8 MiB bulk transfer, whose figures are reported.
//!
//! Options (after `--`): `--net user|tap|both` (default: both as root,
//! else user), `--service memcached|redis|netpipe`, `--rebuild` (ignore the
//! cache), `--memory SIZE` (512M), and for memcached `--memcached-mem MB`
//! (64) and `--connections N` (1024).

use std::net::SocketAddr;
use std::process::{Command, ExitCode};
use std::time::Duration;

use ebb_bench::report::{workspace_root, Report};
use ebb_loadgen::netpipe::{self as netpipe_client, PingPongConfig};
use ebb_testbed::linux_guest::{
    self, default_cache_dir, probe, GuestService, GuestSettings, MemcachedSettings, ReadyGuest,
    RedisSettings,
};
use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{require, Need};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Networks {
    User,
    Tap,
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Service {
    Memcached,
    Redis,
    Netpipe,
}

/// The command line (after `--` in `./ebb bench linux-guest`).
#[derive(clap::Parser)]
#[command(
    name = "bench-linux-guest",
    about = "./ebb bench linux-guest: build and boot the Linux comparison guest, check its service"
)]
struct Args {
    /// Networks to boot on (default: both as root, else user).
    #[arg(long, value_enum)]
    net: Option<Networks>,
    /// What the guest serves.
    #[arg(long, value_enum, default_value_t = Service::Memcached)]
    service: Service,
    /// Rebuild the image, ignoring the cache.
    #[arg(long)]
    rebuild: bool,
    /// Guest memory, QEMU's -m.
    #[arg(long, value_name = "SIZE", default_value = "512M")]
    memory: String,
    /// memcached's -m (MB; memcached only).
    #[arg(long, value_name = "MB")]
    memcached_mem: Option<u32>,
    /// memcached's -c (memcached only).
    #[arg(long, value_name = "N")]
    connections: Option<u32>,
}

struct Options {
    networks: Networks,
    rebuild: bool,
    service: Service,
    settings: GuestSettings,
}

fn parse(args: Args) -> Options {
    let networks = args.net.unwrap_or_else(|| {
        if require(&[Need::Root, Need::Tun, Need::Ip]).is_ok() {
            Networks::Both
        } else {
            Networks::User
        }
    });
    let mut memcached = MemcachedSettings::default();
    if let Some(mb) = args.memcached_mem {
        memcached.memory_mb = mb;
    }
    if let Some(connections) = args.connections {
        memcached.connections = connections;
    }
    let mut settings = GuestSettings {
        memory: args.memory,
        ..GuestSettings::default()
    };
    settings.service = match args.service {
        Service::Memcached => GuestService::Memcached(memcached),
        Service::Redis => GuestService::Redis(RedisSettings::default()),
        Service::Netpipe => GuestService::Netpipe,
    };
    Options {
        networks,
        rebuild: args.rebuild,
        service: args.service,
        settings,
    }
}

/// Checks memcached with a set/get; returns nothing to report.
fn check_memcached(server: SocketAddr, label: &str) -> Result<Vec<(String, f64)>, String> {
    probe::set_and_get(server, "ebb-probe", label)?;
    Ok(Vec::new())
}

/// Checks Redis with a SET read back by GET and shows its version; returns
/// nothing to report.
fn check_redis(server: SocketAddr, label: &str) -> Result<Vec<(String, f64)>, String> {
    probe::redis_set_and_get(server, "ebb-probe", label)?;
    println!("{label}: Redis {}", probe::redis_version(server)?);
    Ok(Vec::new())
}

/// Ping-pongs of 1 B to 1 MiB and an 8 MiB bulk transfer, all checked;
/// returns `(key suffix, value)` figures.
fn check_netpipe(ping: SocketAddr, sink: SocketAddr) -> Result<Vec<(String, f64)>, String> {
    let mut config = PingPongConfig::new(ping);
    config.sizes = vec![1, 64, 1024, 65_536, 1 << 20];
    config.warmup = 2;
    config.min_repetitions = 5;
    config.max_repetitions = 200;
    config.time_per_size = Duration::from_millis(300);
    let points = netpipe_client::ping_pong(&config)?;
    let bulk = netpipe_client::bulk(sink, 8 << 20, 64 << 10, Duration::from_secs(60))?;
    let mut figures = Vec::new();
    for point in &points {
        if point.size == 64 {
            figures.push(("one_way_64b_us".to_owned(), point.one_way_us()));
        }
        if point.size == 1 << 20 {
            figures.push(("goodput_1mib_mbps".to_owned(), point.goodput_mbps()));
        }
    }
    figures.push(("bulk_mbps".to_owned(), bulk.goodput_mbps()));
    Ok(figures)
}

/// Records the timings and the figures of the service's check.
fn record(
    report: &mut Report,
    label: &str,
    guest: &ReadyGuest,
    figures: Result<Vec<(String, f64)>, String>,
) -> Result<(), String> {
    let figures = figures.map_err(|e| format!("{label}: {e}"))?;
    println!(
        "{label}: {} answered at {} ({:.2} s after QEMU started); checks passed",
        guest.answer,
        guest.server(),
        guest.boot_to_ready.as_secs_f64()
    );
    report
        .metric(
            format!("{label}_boot_to_marker_s"),
            guest.boot_to_marker.as_secs_f64(),
            "s",
            "QEMU start to the ready marker on the serial console",
        )
        .metric(
            format!("{label}_boot_to_ready_s"),
            guest.boot_to_ready.as_secs_f64(),
            "s",
            "QEMU start to the service's first reply (tcg)",
        );
    for (key, value) in figures {
        let unit = if key.ends_with("_us") {
            "µs"
        } else {
            "Mbit/s"
        };
        report.metric(
            format!("{label}_{key}"),
            value,
            unit,
            "netpipe in the Linux guest (hosted platform), tcg",
        );
    }
    report.command(guest.command.clone());
    Ok(())
}

/// Builds apps/netpipe (release) and returns its binary.
fn build_netpipe() -> Result<std::path::PathBuf, String> {
    let root = workspace_root();
    let status = Command::new("cargo")
        .args(["build", "--release", "--quiet", "-p", "netpipe"])
        .current_dir(&root)
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err("building apps/netpipe failed".to_owned());
    }
    Ok(root.join("target/release/netpipe"))
}

fn run(options: &Options) -> Result<(), String> {
    let mut report = Report::new(match options.service {
        Service::Memcached => "linux-guest",
        Service::Redis => "linux-guest-redis",
        Service::Netpipe => "linux-guest-netpipe",
    });
    let built = linux_guest::build_or_reuse(&default_cache_dir(), options.rebuild)?;
    println!(
        "guest image: {} and {} ({}, {:.1} s)",
        built.image.kernel.display(),
        built.image.initrd.display(),
        if built.cached { "cached" } else { "built" },
        built.seconds
    );
    report
        .metric(
            "build_s",
            built.seconds,
            "s",
            if built.cached {
                "cache hit"
            } else {
                "downloaded and built"
            },
        )
        .metric(
            "build_cached",
            f64::from(u8::from(built.cached)),
            "bool",
            "",
        );
    let image = if options.service == Service::Netpipe {
        linux_guest::with_netpipe(&built.image, &build_netpipe()?)?
    } else {
        built.image.clone()
    };
    let service = options.service;
    let check = move |addresses: &[SocketAddr], label: &str| match service {
        Service::Memcached => check_memcached(addresses[0], label),
        Service::Redis => check_redis(addresses[0], label),
        Service::Netpipe => check_netpipe(addresses[0], addresses[1]),
    };
    if options.networks != Networks::Tap {
        let guest = linux_guest::boot_user(&image, &options.settings)?;
        let figures = check(&guest.addresses, "user-net");
        record(&mut report, "user", &guest, figures)?;
    }
    if options.networks != Networks::User {
        let namespace = NetNamespace::for_this_process("linux-guest")?;
        let tap = TapDevice::create(
            &namespace,
            &TapConfig::guest_link(linux_guest::qemu::GUEST_MAC),
        )?;
        let guest = linux_guest::boot_tap(&image, &options.settings, &namespace, &tap)?;
        let addresses = guest.addresses.clone();
        let figures = namespace.run_inside(|| check(&addresses, "tap-in-netns"))?;
        record(&mut report, "tap", &guest, figures)?;
    }
    report.finish().map(|_| ())
}

fn main() -> ExitCode {
    let options = parse(<Args as clap::Parser>::parse());
    match run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
