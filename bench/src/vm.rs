//! What the VM benchmarks (`netpipe`, `memcached-vm`) share: both guests
//! on one TAP device in a namespace the benchmark creates, QEMU pinned to
//! one host CPU and the client to the other, and QEMU's CPU time.
//!
//! - [`VmBench`] holds the namespace and the TAP device; both guests get the
//!   same address and MAC (the permanent neighbour entry names it), so one
//!   guest at a time uses the device and the clients need no changes.
//! - [`boot_native`] boots an Ebbflow image there with the launcher's own
//!   QEMU command line (`ebb_cli::native`, as `./ebb run APP --native --net
//!   tap` does), and [`boot_linux`] the Linux comparison guest.
//! - QEMU's user + system time comes from `ebb_testbed::qemu::qemu_cpu_seconds`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ebb_cli::native::{self as launcher, TapNic};

use std::net::Ipv4Addr;

use ebb_testbed::linux_guest::qemu::{RunningGuest, GUEST_MAC};
use ebb_testbed::linux_guest::{self, GuestImage, GuestSettings, ReadyGuest};
use ebb_testbed::netns::NetNamespace;
use ebb_testbed::pin::pin_current_thread;
use ebb_testbed::qemu::{accel, shell_words};
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{require, Need};

use crate::report::Report;

/// The host CPU QEMU runs on.
pub const QEMU_CPU: usize = 1;
/// The host CPU the client (ping-pong, load generator) runs on.
pub const CLIENT_CPU: usize = 0;
/// The nice level of QEMU and the client, the same for both guests. On a
/// busy shared host this does not remove other users' delays (their work
/// runs in other cgroups, where nice does not reach). SCHED_FIFO does not
/// work either: a TCG QEMU at FIFO on one CPU starves its own main-loop
/// thread whenever the vCPU thread is busy (a Linux guest fails its
/// IO-APIC timer check at boot, or stalls under load).
pub const NICE: i32 = -10;

/// The network both guests share: a namespace and a TAP device in it,
/// owned by the benchmark's `main` (so that they are deleted however it
/// ends): `let ns = vm::namespace("tag")?; let tap = vm::tap(&ns)?;`.
pub struct VmBench<'a> {
    namespace: &'a NetNamespace,
    tap: &'a TapDevice,
    guest: Ipv4Addr,
}

/// Creates the namespace `ebb-PID-TAG-N`; needs root.
pub fn namespace(tag: &str) -> Result<NetNamespace, String> {
    require(&[Need::Root, Need::Tun, Need::Ip, Need::Qemu]).map_err(|skip| {
        format!(
            "this benchmark puts both guests on a TAP device in a network namespace: \
             run it as root (with /dev/net/tun): {skip}"
        )
    })?;
    NetNamespace::for_this_process(tag)
}

/// A single-queue TAP device in `namespace` (host 192.168.77.1/24, guest
/// 192.168.77.2, the guests' MAC).
pub fn tap(namespace: &NetNamespace) -> Result<TapDevice, String> {
    tap_with_queues(namespace, 1)
}

/// The same link with `queues` queue pairs (`multi_queue` above one): a
/// guest with [`GuestShape::cpus`] vCPUs gets one pair per vCPU. QEMU
/// opens a multi-queue device only with `queues=` > 1 and a single-queue
/// one only without, so a guest of another size needs the device made
/// again (drop the old one first: both take the same name and address).
pub fn tap_with_queues(namespace: &NetNamespace, queues: u16) -> Result<TapDevice, String> {
    TapDevice::create(
        namespace,
        &TapConfig::guest_link(GUEST_MAC).with_queues(queues),
    )
}

impl<'a> VmBench<'a> {
    /// The bench network over `tap` in `namespace`.
    ///
    /// # Panics
    ///
    /// When `tap` has no guest neighbour entry ([`tap`] always makes one).
    pub fn new(namespace: &'a NetNamespace, tap: &'a TapDevice) -> Self {
        let guest = tap.guest().expect("the bench's TAP device names its guest");
        VmBench {
            namespace,
            tap,
            guest,
        }
    }

    /// The guest's address (both guests take it).
    pub fn guest(&self) -> Ipv4Addr {
        self.guest
    }

    /// The namespace.
    pub fn namespace(&self) -> &NetNamespace {
        self.namespace
    }

    /// The TAP device.
    pub fn tap(&self) -> &TapDevice {
        self.tap
    }

    /// Runs `work` inside the namespace on a thread pinned to
    /// [`CLIENT_CPU`] at nice [`NICE`] (threads it starts inherit all
    /// three).
    pub fn client<R: Send>(&self, work: impl FnOnce() -> R + Send) -> Result<R, String> {
        self.namespace.run_inside(|| {
            // Best effort: a machine with one CPU runs everything on it.
            let _ = pin_current_thread(CLIENT_CPU);
            // SAFETY: setpriority(2) with who = 0 changes only the calling
            // thread's nice level (per thread on Linux); failure is harmless.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, NICE) };
            work()
        })
    }
}

/// Builds `app`'s native image (as `./ebb run APP --native` does) and
/// returns its path.
pub fn build_native(root: &Path, app: &str) -> Result<PathBuf, String> {
    let status = launcher::build_command(root, app)
        .arg("--quiet")
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the native image of {app} failed"));
    }
    Ok(launcher::image_path(root, app))
}

/// Builds a hosted application (release) and returns its binary.
pub fn build_hosted(root: &Path, app: &str) -> Result<PathBuf, String> {
    let status = Command::new("cargo")
        .args(["build", "--release", "--quiet", "-p", app])
        .current_dir(root)
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building apps/{app} failed"));
    }
    Ok(root.join("target/release").join(app))
}

/// A booted native guest whose application printed its ready line.
pub struct NativeGuest {
    /// The QEMU process (stopped on drop).
    pub qemu: RunningGuest,
    /// From QEMU's start to the ready line.
    pub boot_to_ready: Duration,
    /// The QEMU command line.
    pub command: String,
}

/// How both guests are sized: the headline setup of BENCH-NOTES.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestShape {
    /// Guest memory, QEMU's `-m`.
    pub memory: String,
    /// vCPUs.
    pub cpus: u16,
    /// `tcg` or `kvm`.
    pub accel: String,
    /// More QEMU arguments for both guests (e.g. a TCG plugin).
    pub qemu_args: Vec<String>,
    /// The host CPUs QEMU (all its threads) may run on, as `taskset -c`
    /// takes them: [`QEMU_CPU`] alone for the one-vCPU head-to-heads; a
    /// guest with more vCPUs than that needs more to run them at once.
    pub qemu_host_cpus: String,
}

impl Default for GuestShape {
    /// One vCPU, 512 MiB, the accelerator of [`accel`], QEMU on
    /// [`QEMU_CPU`].
    fn default() -> Self {
        GuestShape {
            memory: "512M".to_owned(),
            cpus: 1,
            accel: accel().to_owned(),
            qemu_args: Vec::new(),
            qemu_host_cpus: QEMU_CPU.to_string(),
        }
    }
}

/// Boots the native `image` on the bench's TAP device with the guest's
/// address (`ip=`), one queue pair per vCPU (the device must have as many:
/// [`tap_with_queues`]), QEMU pinned to `shape.qemu_host_cpus` at nice
/// [`NICE`], `args` for the application, and waits for a serial line
/// containing `ready`.
pub fn boot_native(
    bench: &VmBench<'_>,
    image: &Path,
    shape: &GuestShape,
    args: &[String],
    ready: &str,
) -> Result<NativeGuest, String> {
    let tap = bench.tap();
    let settings = launcher::Settings {
        cores: usize::from(shape.cpus),
        mem: shape.memory.clone(),
        timeout: 900,
        boot_args: vec![format!("ip={}/24,gw={}", bench.guest(), tap.host())],
        tap: Some(TapNic {
            ifname: tap.ifname().to_owned(),
            queues: shape.cpus,
            mac: GUEST_MAC.to_owned(),
        }),
        qemu_args: shape.qemu_args.clone(),
        ..launcher::Settings::default()
    };
    let cmdline = launcher::kernel_cmdline(&settings, ebb_testbed::qemu::measure_tsc_khz(), args)?;
    // The host's time last, just before QEMU starts (measuring the TSC
    // above takes 30 ms): the guest lags by QEMU's start-up only.
    let cmdline = format!("{} {cmdline}", ebb_testbed::qemu::host_wall_word());
    let qemu = launcher::qemu_command(&settings, image, &cmdline, shape.accel == "kvm")?;
    let mut prefix = vec!["ip", "netns", "exec", bench.namespace().name()];
    prefix.extend(["taskset", "-c", &shape.qemu_host_cpus]);
    let nice = NICE.to_string();
    prefix.extend(["nice", "-n", &nice]);
    let command = wrap(&prefix, &qemu);
    let shown = shell_words(&command);
    let mut qemu = RunningGuest::spawn(command)?;
    let boot_to_ready = qemu.wait_for(ready, Duration::from_secs(120))?;
    Ok(NativeGuest {
        qemu,
        boot_to_ready,
        command: shown,
    })
}

/// Boots the Linux guest `image` serving `settings.service` on the bench's
/// TAP device, QEMU pinned to `shape.qemu_host_cpus` at nice [`NICE`].
pub fn boot_linux(
    bench: &VmBench<'_>,
    image: &GuestImage,
    shape: &GuestShape,
    mut settings: GuestSettings,
) -> Result<ReadyGuest, String> {
    settings.memory.clone_from(&shape.memory);
    settings.cpus = shape.cpus;
    settings.accel.clone_from(&shape.accel);
    settings.qemu_args.clone_from(&shape.qemu_args);
    settings.pin_cpus = Some(shape.qemu_host_cpus.clone());
    settings.priority = ["nice", "-n", &NICE.to_string()]
        .map(str::to_owned)
        .to_vec();
    linux_guest::boot_tap(image, &settings, bench.namespace(), bench.tap())
}

/// A booted guest of either kind, kept (with its QEMU) while it is
/// measured.
pub enum Booted {
    /// Ebbflow's native image.
    Ours(NativeGuest),
    /// The Linux comparison guest.
    Linux(ReadyGuest),
}

impl Booted {
    /// Its QEMU.
    pub fn qemu(&self) -> &RunningGuest {
        match self {
            Booted::Ours(guest) => &guest.qemu,
            Booted::Linux(guest) => &guest.qemu,
        }
    }

    /// Its QEMU command line, as shown in reports.
    pub fn command(&self) -> String {
        match self {
            Booted::Ours(guest) => guest.command.clone(),
            Booted::Linux(guest) => guest.command.clone(),
        }
    }
}

/// The order of the guests in run `run`: ours first in even runs, Linux
/// first in odd ones, so neither always meets the host first.
pub fn alternating(run: usize) -> [Guest; 2] {
    if run.is_multiple_of(2) {
        [Guest::Ours, Guest::Linux]
    } else {
        [Guest::Linux, Guest::Ours]
    }
}

/// The two guests a VM benchmark compares.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Guest {
    /// Ebbflow's native image.
    Ours,
    /// The Linux guest with the stock service.
    Linux,
}

impl Guest {
    /// The name used in report keys.
    pub fn name(self) -> &'static str {
        match self {
            Guest::Ours => "ours",
            Guest::Linux => "linux",
        }
    }
}

/// A VM benchmark's report, opened with the conditions it ran under: the
/// accelerator, the host's load average at the start (`load_start`) and
/// now, and the priority of QEMU and `client` (the load generator or
/// ping-pong client).
pub fn new_report(name: &str, accel: &str, load_start: f64, client: &str) -> Report {
    let mut report = report_with_load(name, accel, load_start);
    report.metric(
        "nice",
        f64::from(NICE),
        "",
        format!("QEMU and {client}, both guests"),
    );
    report
}

/// A report opened with the accelerator and the host's load average at
/// the start (`load_start`) and now (what every benchmark of guests on
/// this shared host records).
pub fn report_with_load(name: &str, accel: &str, load_start: f64) -> Report {
    let mut report = Report::new(name);
    report
        .label("accel", accel.to_owned())
        .metric(
            "host_load_1m_start",
            load_start,
            "",
            "the shared host's load average when the benchmark started",
        )
        .metric(
            "host_load_1m_end",
            load_average(),
            "",
            "the shared host's load average at the end",
        );
    report
}

/// The host's 1-minute load average (`/proc/loadavg`), reported with the
/// figures: this machine is shared, and its load moves the results.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// `prefix... PROGRAM ARGS...` of `command`.
/// Sends one-byte pings to a netpipe ping-pong server until one comes back
/// intact (the readiness check of a guest serving netpipe).
pub fn wait_for_ping(server: std::net::SocketAddr, limit: Duration) -> Result<String, String> {
    let mut config = ebb_loadgen::netpipe::PingPongConfig::new(server);
    config.sizes = vec![1];
    config.warmup = 0;
    config.min_repetitions = 1;
    config.max_repetitions = 1;
    config.io_timeout = Duration::from_secs(5);
    let deadline = std::time::Instant::now() + limit;
    loop {
        match ebb_loadgen::netpipe::ping_pong(&config) {
            Ok(_) => return Ok("netpipe".to_owned()),
            Err(e) if std::time::Instant::now() >= deadline => {
                return Err(format!(
                    "netpipe at {server} did not answer within {} s: {e}",
                    limit.as_secs()
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn wrap(prefix: &[&str], command: &Command) -> Command {
    let mut wrapped = Command::new(prefix[0]);
    wrapped
        .args(&prefix[1..])
        .arg(command.get_program())
        .args(command.get_args());
    wrapped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_the_program_and_arguments() {
        let mut inner = Command::new("timeout");
        inner.args(["5", "qemu-system-x86_64", "-m", "512M"]);
        let wrapped = wrap(&["taskset", "-c", "1"], &inner);
        assert_eq!(
            shell_words(&wrapped),
            "taskset -c 1 timeout 5 qemu-system-x86_64 -m 512M"
        );
    }
}
