//! `./ebb bench linux-guest`: builds the Linux comparison guest (Debian's
//! cloud kernel and stock memcached, cached under `target/linux-guest/`),
//! boots it under QEMU and checks that memcached answers `version` and a
//! set/get, over user networking (127.0.0.1:PORT forwarded to the guest's
//! 11211) and over a TAP device in a network namespace (needs root), then
//! shuts it down. A smoke check with timings, not a throughput benchmark.
//!
//! Options (after `--`): `--net user|tap|both` (default: both as root,
//! else user), `--rebuild` (ignore the cache), `--memory SIZE` (512M),
//! `--memcached-mem MB` (64), `--connections N` (1024), `--port N`.

use std::net::TcpListener;
use std::process::ExitCode;

use ebb_bench::linux_guest::{self, default_cache_dir, probe, GuestSettings, ReadyGuest};
use ebb_bench::netns::{can_use_tap, NetNamespace, TapConfig, TapDevice};
use ebb_bench::report::Report;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Networks {
    User,
    Tap,
    Both,
}

struct Options {
    networks: Networks,
    rebuild: bool,
    settings: GuestSettings,
    port: Option<u16>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        networks: if can_use_tap() {
            Networks::Both
        } else {
            Networks::User
        },
        rebuild: false,
        settings: GuestSettings::default(),
        port: None,
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
            "--rebuild" => options.rebuild = true,
            "--memory" => options.settings.memory.clone_from(value()?),
            "--memcached-mem" => options.settings.memcached.memory_mb = number(value()?)?,
            "--connections" => options.settings.memcached.connections = number(value()?)?,
            "--port" => {
                let port = number(value()?)?;
                options.port = Some(u16::try_from(port).map_err(|e| format!("--port: {e}"))?);
            }
            other => {
                return Err(format!(
                    "unknown option {other} (see bench/src/bin/linux-guest.rs)"
                ))
            }
        }
    }
    Ok(options)
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// Checks a set/get (inside the namespace for TAP) and records the timings.
fn record(
    report: &mut Report,
    label: &str,
    guest: &ReadyGuest,
    check: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    check().map_err(|e| format!("{label}: {e}"))?;
    println!(
        "{label}: memcached {} answered at {} ({:.2} s after QEMU started); set/get ok",
        guest.version,
        guest.server,
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
            "QEMU start to memcached's reply to version (tcg)",
        )
        .command(guest.command.clone());
    Ok(())
}

fn run(options: &Options) -> Result<(), String> {
    let mut report = Report::new("linux-guest");
    let cache = default_cache_dir();
    let built = linux_guest::build_or_reuse(&cache, options.rebuild)?;
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
    if options.networks != Networks::Tap {
        let port = options.port.map_or_else(free_port, Ok)?;
        let guest = linux_guest::boot_user(&built.image, &options.settings, port)?;
        let server = guest.server;
        record(&mut report, "user", &guest, || {
            probe::set_and_get(server, "ebb-probe", "user-net")
        })?;
    }
    if options.networks != Networks::User {
        let namespace = NetNamespace::create("linux-guest")?;
        let tap = TapDevice::create(&namespace, &TapConfig::new(linux_guest::qemu::GUEST_MAC))?;
        let guest = linux_guest::boot_tap(&built.image, &options.settings, &namespace, &tap)?;
        let server = guest.server;
        record(&mut report, "tap", &guest, || {
            namespace.run_inside(|| probe::set_and_get(server, "ebb-probe", "tap-in-netns"))?
        })?;
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
