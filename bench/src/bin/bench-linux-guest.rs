//! `./ebb bench linux-guest`: builds the Linux comparison guest (Debian's
//! cloud kernel and stock memcached, cached under `target/linux-guest/`),
//! boots it under QEMU (TCG) and checks that its service answers, over user
//! networking (127.0.0.1 ports forwarded to the guest) and over a TAP device
//! in a network namespace (needs root), then shuts it down. A smoke check
//! with timings, not a throughput benchmark.
//!
//! Services: stock memcached (default), checked with `version` and a
//! set/get; or `--service netpipe`, Ebbflow's hosted netpipe application
//! added to the image (built first with cargo), checked with ping-pongs of
//! 1 B to 1 MiB and an 8 MiB bulk transfer, whose figures are reported.
//!
//! Options (after `--`): `--net user|tap|both` (default: both as root,
//! else user), `--service memcached|netpipe`, `--rebuild` (ignore the
//! cache), `--memory SIZE` (512M), `--memcached-mem MB` (64),
//! `--connections N` (1024).

use std::net::SocketAddr;
use std::process::{Command, ExitCode};
use std::time::Duration;

use ebb_bench::report::{workspace_root, Report};
use ebb_loadgen::netpipe::{self as netpipe_client, PingPongConfig};
use ebb_testbed::linux_guest::{
    self, default_cache_dir, probe, GuestService, GuestSettings, MemcachedSettings, ReadyGuest,
};
use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{require, Need};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Networks {
    User,
    Tap,
    Both,
}

struct Options {
    networks: Networks,
    rebuild: bool,
    netpipe: bool,
    memcached: MemcachedSettings,
    settings: GuestSettings,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        networks: if require(&[Need::Root, Need::Tun, Need::Ip]).is_ok() {
            Networks::Both
        } else {
            Networks::User
        },
        rebuild: false,
        netpipe: false,
        memcached: MemcachedSettings::default(),
        settings: GuestSettings::default(),
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |text: &String| {
            text.parse::<u32>()
                .map_err(|e| format!("{arg} {text}: {e}"))
        };
        match arg.as_str() {
            "--net" => {
                options.networks = match value()?.as_str() {
                    "user" => Networks::User,
                    "tap" => Networks::Tap,
                    "both" => Networks::Both,
                    other => return Err(format!("--net {other}: expected user, tap or both")),
                }
            }
            "--service" => {
                options.netpipe = match value()?.as_str() {
                    "memcached" => false,
                    "netpipe" => true,
                    other => {
                        return Err(format!("--service {other}: expected memcached or netpipe"))
                    }
                }
            }
            "--rebuild" => options.rebuild = true,
            "--memory" => options.settings.memory.clone_from(value()?),
            "--memcached-mem" => options.memcached.memory_mb = number(value()?)?,
            "--connections" => options.memcached.connections = number(value()?)?,
            other => {
                return Err(format!(
                    "unknown option {other} (see bench/src/bin/bench-linux-guest.rs)"
                ))
            }
        }
    }
    options.settings.service = if options.netpipe {
        GuestService::Netpipe
    } else {
        GuestService::Memcached(options.memcached)
    };
    Ok(options)
}

/// Checks memcached with a set/get; returns nothing to report.
fn check_memcached(server: SocketAddr, label: &str) -> Result<Vec<(String, f64)>, String> {
    probe::set_and_get(server, "ebb-probe", label)?;
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
    let mut report = Report::new(if options.netpipe {
        "linux-guest-netpipe"
    } else {
        "linux-guest"
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
    let image = if options.netpipe {
        linux_guest::with_netpipe(&built.image, &build_netpipe()?)?
    } else {
        built.image.clone()
    };
    let netpipe = options.netpipe;
    let check = move |addresses: &[SocketAddr], label: &str| {
        if netpipe {
            check_netpipe(addresses[0], addresses[1])
        } else {
            check_memcached(addresses[0], label)
        }
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args).and_then(|options| run(&options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
