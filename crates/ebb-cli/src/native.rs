//! `./ebb run APP --native`: builds APP as a native image
//! (`x86_64-unknown-none`, see `crates/ebb-native`), boots it under QEMU,
//! streams its serial console, and exits with the application's exit code
//! (decoded from QEMU's status, see `ebb_boot_abi::exit`). QEMU opens a QMP
//! socket; a SIGTERM or SIGINT to `./ebb` stops the guest with QMP `quit`
//! (see [`QemuStopper`]), reported as a stop (`crate::stop`), not a crash.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_testbed::qemu::process::find_qemu;
use ebb_testbed::qemu::qmp::{qmp_args, Qmp, SocketDir};

use ebb_boot_abi::{decode_qemu_status, QemuExit, EXIT_CPU_EXCEPTION, EXIT_PANIC};

use crate::{child, stop};

// What every QEMU launch needs comes from the testbed, shared with the
// benchmarks and the tests.
pub use ebb_testbed::qemu::{host_unix_seconds, kvm_usable, measure_tsc_khz, shell_words};

/// The bare-metal target native images are built for.
pub const TARGET: &str = "x86_64-unknown-none";
/// Where native images are built (its own target directory, so that its
/// flags never invalidate the hosted build, and so that a native build run
/// from inside `cargo test` does not wait on the outer build's lock).
pub const TARGET_DIR: &str = "target/native";
/// Default seconds before QEMU is stopped: none. A server runs until it is
/// stopped (Ctrl-C); tests and benchmarks set their own `--timeout`.
pub const DEFAULT_TIMEOUT: u64 = 0;

/// The QEMU machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Machine {
    /// PCIe, ACPI, SeaBIOS: for everything that needs devices.
    #[default]
    Q35,
    /// No PCI, qboot: boots fastest; for boot-only work.
    Microvm,
}

impl Machine {
    fn name(self) -> &'static str {
        match self {
            Machine::Q35 => "q35",
            Machine::Microvm => "microvm",
        }
    }
}

/// The QEMU accelerator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Accel {
    /// KVM where the CPU has hardware virtualization (vmx/svm) and /dev/kvm
    /// exists, TCG otherwise.
    #[default]
    Auto,
    /// QEMU's emulator.
    Tcg,
    /// Hardware virtualization.
    Kvm,
}

/// Settings of one native run (from `./ebb run APP --native ...`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// vCPUs (`-smp`); the guest starts one core on each (`cores=N`).
    pub cores: usize,
    /// Guest memory, in QEMU's `-m` syntax.
    pub mem: String,
    /// The machine.
    pub machine: Machine,
    /// The accelerator asked for.
    pub accel: Accel,
    /// Seconds before QEMU is stopped; 0 for no limit.
    pub timeout: u64,
    /// Print the build and QEMU commands and the platform's boot summary.
    pub verbose: bool,
    /// Extra platform options for the kernel command line.
    pub boot_args: Vec<String>,
    /// TCP ports forwarded from 127.0.0.1 to the guest (`[HOST:]GUEST`),
    /// on q35's virtio-net over QEMU user networking.
    pub forwards: Vec<String>,
    /// More QEMU arguments, appended before `-kernel` (extra devices).
    pub qemu_args: Vec<String>,
    /// A TAP device for the virtio-net instead of user networking
    /// (`--net tap`, see [`crate::tap`]).
    pub tap: Option<TapNic>,
    /// Run QEMU inside this network namespace (`ip netns exec NS ...`),
    /// where the TAP device is.
    pub namespace: Option<String>,
}

/// The guest NIC's TAP back end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapNic {
    /// The TAP interface, which exists already (created `multi_queue`
    /// when `queues` > 1).
    pub ifname: String,
    /// Queue pairs: one per vCPU for a multi-queue device, 1 for one.
    pub queues: u16,
    /// The NIC's MAC address (the host's permanent neighbour entry names it).
    pub mac: String,
}

impl TapNic {
    /// QEMU's `-netdev` and `-device` for this TAP device: a modern
    /// virtio-net (`disable-legacy=on`); with more than one queue pair,
    /// `queues=N` on the back end and `mq=on` on the device with one MSI-X
    /// vector per queue plus the configuration and control queues
    /// (virtio 1.2 §5.1.6.5.5: 2N + 2). No vhost (there is no
    /// `/dev/vhost-net` here, and the user-space back end is what both
    /// guests of the VM benchmarks get).
    pub fn args(&self) -> Vec<String> {
        let mut netdev = format!(
            "tap,id=net0,ifname={},script=no,downscript=no,vhost=off",
            self.ifname
        );
        let mut device = format!(
            "virtio-net-pci,netdev=net0,disable-legacy=on,mac={}",
            self.mac
        );
        if self.queues > 1 {
            netdev.push_str(&format!(",queues={}", self.queues));
            device.push_str(&format!(
                ",mq=on,vectors={}",
                2 * u32::from(self.queues) + 2
            ));
        }
        vec!["-netdev".to_owned(), netdev, "-device".to_owned(), device]
    }
}

/// A TCP port forwarded from the host's loopback to the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forward {
    /// Port on 127.0.0.1.
    pub host: u16,
    /// The guest's port (it is 10.0.2.15 behind QEMU's user networking).
    pub guest: u16,
}

impl Forward {
    /// Parses `[HOST:]GUEST`.
    pub fn parse(text: &str) -> Result<Forward, String> {
        let port = |p: &str| {
            p.parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("--forward takes [HOST:]GUEST port numbers, not '{text}'"))
        };
        match text.split_once(':') {
            Some((host, guest)) => Ok(Forward {
                host: port(host)?,
                guest: port(guest)?,
            }),
            None => port(text).map(|p| Forward { host: p, guest: p }),
        }
    }
}

/// QEMU's network arguments for `settings`: on q35 a modern virtio-net
/// (`disable-legacy=on`) on user networking with the forwards, or on the
/// TAP device ([`TapNic::args`]); none on microvm (no PCI), nor when the
/// extra QEMU arguments bring their own `-netdev` (a multi-queue TAP
/// device in a test's namespace, say).
pub fn network_args(settings: &Settings) -> Result<Vec<String>, String> {
    if settings.qemu_args.iter().any(|arg| arg == "-netdev") {
        if !settings.forwards.is_empty() {
            return Err(
                "--forward needs the default user networking, not a --qemu-arg -netdev".to_owned(),
            );
        }
        if settings.tap.is_some() {
            return Err("--net tap brings its own -netdev: drop the --qemu-arg -netdev".to_owned());
        }
        return Ok(Vec::new());
    }
    if settings.machine != Machine::Q35 {
        if !settings.forwards.is_empty() {
            return Err("--forward needs --machine q35 (virtio-net on PCI)".to_owned());
        }
        if settings.tap.is_some() {
            return Err("--net tap needs --machine q35 (virtio-net on PCI)".to_owned());
        }
        return Ok(Vec::new());
    }
    if let Some(tap) = &settings.tap {
        if !settings.forwards.is_empty() {
            return Err(
                "--forward is for --net user: on a TAP device, reach the guest's ports \
                 at its address inside the namespace"
                    .to_owned(),
            );
        }
        return Ok(tap.args());
    }
    let mut netdev = "user,id=net0".to_owned();
    for forward in &settings.forwards {
        let forward = Forward::parse(forward)?;
        netdev.push_str(&format!(
            ",hostfwd=tcp:127.0.0.1:{}-:{}",
            forward.host, forward.guest
        ));
    }
    Ok(vec![
        "-netdev".to_owned(),
        netdev,
        "-device".to_owned(),
        "virtio-net-pci,netdev=net0,disable-legacy=on".to_owned(),
    ])
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cores: 1,
            mem: "512M".to_owned(),
            machine: Machine::Q35,
            accel: Accel::Auto,
            timeout: DEFAULT_TIMEOUT,
            verbose: false,
            boot_args: Vec::new(),
            forwards: Vec::new(),
            qemu_args: Vec::new(),
            tap: None,
            namespace: None,
        }
    }
}

/// The flags every crate of a native image is compiled with: no PIE (the
/// 32-bit PVH entry needs absolute addresses), frame pointers (crash
/// backtraces), abort on panic, and the image's linker script (load at 1 MiB).
pub fn rustflags(root: &Path) -> Vec<String> {
    vec![
        "-Crelocation-model=static".to_owned(),
        "-Cforce-frame-pointers=yes".to_owned(),
        "-Cpanic=abort".to_owned(),
        format!(
            "-Clink-arg=-T{}",
            root.join("crates/ebb-native/link.ld").display()
        ),
        "-Clink-arg=--no-pie".to_owned(),
    ]
}

/// `cargo build` of `app`'s native image. The flags go in
/// `CARGO_ENCODED_RUSTFLAGS` (which takes precedence over any `RUSTFLAGS`
/// and keeps paths with spaces whole); with `--target`, they do not reach
/// build scripts.
pub fn build_command(root: &Path, app: &str) -> Command {
    let mut c = Command::new("cargo");
    c.args([
        "build",
        "--release",
        "-p",
        app,
        "--bin",
        app,
        "--target",
        TARGET,
    ])
    .arg("--target-dir")
    .arg(root.join(TARGET_DIR))
    .current_dir(root)
    .env("EBB_ROOT", root)
    .env("CARGO_ENCODED_RUSTFLAGS", rustflags(root).join("\x1f"))
    .env_remove("RUSTFLAGS");
    c
}

/// Where `build_command` leaves the image.
pub fn image_path(root: &Path, app: &str) -> PathBuf {
    root.join(TARGET_DIR).join(TARGET).join("release").join(app)
}

/// Whether `app` has a native entry (its package depends on `ebb-app`, the
/// interface every platform implements, or on `ebb-native` directly).
pub fn has_native_entry(root: &Path, app: &str) -> bool {
    std::fs::read_to_string(root.join("apps").join(app).join("Cargo.toml"))
        .is_ok_and(|manifest| manifest.contains("ebb-app") || manifest.contains("ebb-native"))
}

/// The kernel command line: platform options, `--`, the application's
/// arguments (which may not contain spaces: there is no quoting yet).
pub fn kernel_cmdline(
    settings: &Settings,
    tsc_khz: Option<u64>,
    args: &[String],
) -> Result<String, String> {
    let bad =
        |word: &&String| word.is_empty() || word.contains(char::is_whitespace) || *word == "--";
    if let Some(arg) = args
        .iter()
        .find(|a| a.is_empty() || a.contains(char::is_whitespace))
    {
        return Err(format!(
            "native application arguments cannot be empty or contain spaces yet: '{arg}'"
        ));
    }
    if let Some(arg) = settings.boot_args.iter().find(bad) {
        return Err(format!(
            "--boot-arg cannot be empty, '--' or contain spaces: '{arg}'"
        ));
    }
    let mut words = Vec::new();
    if let Some(khz) = tsc_khz {
        words.push(format!("tsc_khz={khz}"));
    }
    words.push(format!("machine={}", settings.machine.name()));
    words.push(format!("cores={}", settings.cores));
    if settings.verbose {
        words.push("verbose".to_owned());
    }
    words.extend(settings.boot_args.iter().cloned());
    words.push("--".to_owned());
    words.extend(args.iter().cloned());
    Ok(words.join(" "))
}

/// `[ip netns exec NS] timeout --foreground SECS qemu-system-x86_64 ...`
/// booting `image`.
pub fn qemu_command(settings: &Settings, image: &Path, cmdline: &str, kvm: bool) -> Command {
    let mut prefix: Vec<String> = Vec::new();
    if let Some(namespace) = &settings.namespace {
        // `ip netns exec` execs its command: signals to this process
        // reach `timeout`, which passes them on to QEMU.
        prefix.extend(["ip", "netns", "exec", namespace].map(str::to_owned));
    }
    if settings.timeout > 0 {
        prefix
            .extend(["timeout", "--foreground", &settings.timeout.to_string()].map(str::to_owned));
    }
    let mut c = match prefix.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg("qemu-system-x86_64");
            c
        }
        None => Command::new("qemu-system-x86_64"),
    };
    c.args(["-machine", settings.machine.name()]);
    if kvm {
        c.args(["-accel", "kvm", "-cpu", "host"]);
    } else {
        c.args(["-accel", "tcg", "-cpu", "max"]);
    }
    c.args(["-smp", &settings.cores.to_string(), "-m", &settings.mem])
        // Guest RAM from a memfd rather than anonymous memory: QEMU asks
        // for transparent huge pages on anonymous RAM, and the host's
        // first touch of each 2 MiB (zeroing, sometimes compaction) made
        // boot times swing from 17 to 270 ms under load; shared memory
        // gets 4 KiB pages (crates/ebb-native/README.md, "Measured").
        .args([
            "-object",
            &format!("memory-backend-memfd,id=ram,size={}", settings.mem),
            "-machine",
            "memory-backend=ram",
        ])
        .args([
            "-nodefaults",
            "-nographic",
            "-monitor",
            "none",
            "-no-reboot",
        ])
        .args(["-serial", "stdio"])
        .args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
    if settings.machine == Machine::Q35 {
        // SeaBIOS's serial console would print its banner before the guest.
        c.args(["-fw_cfg", "name=etc/sercon-port,string=0"]);
    }
    // Checked by `run` before QEMU starts.
    c.args(network_args(settings).unwrap_or_default());
    c.args(&settings.qemu_args);
    c.arg("-kernel").arg(image).args(["-append", cmdline]);
    c
}

/// QEMU's warning about the `etc/sercon-port` name, which is expected.
fn is_expected_qemu_noise(line: &str) -> bool {
    line.contains("externally provided fw_cfg item names should be prefixed")
}

/// The signal QEMU says stopped it, from its stderr line `…: terminating
/// on signal N from pid P (NAME)` (QEMU's `qemu_system_killed` message).
fn qemu_stop_signal(line: &str) -> Option<i32> {
    let after = line.split("terminating on signal ").nth(1)?;
    after.split(' ').next()?.parse().ok()
}

/// The addresses of the `    #N 0xADDRESS` backtrace lines in `output`.
pub fn backtrace_addresses(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let depth = words.next()?;
            let address = words.next()?;
            (depth.starts_with('#') && address.starts_with("0x") && words.next().is_none())
                .then(|| address.to_owned())
        })
        .collect()
}

/// Symbolizes a crash report's backtrace with `addr2line` (binutils), if
/// it is installed.
fn symbolize(image: &Path, output: &str) {
    let addresses = backtrace_addresses(output);
    if addresses.is_empty() {
        return;
    }
    let result = Command::new("addr2line")
        .args(["-a", "-f", "-C", "-i", "-p", "-e"])
        .arg(image)
        .args(&addresses)
        .output();
    match result {
        Ok(out) if out.status.success() => {
            eprintln!("ebb: backtrace, symbolized from {}:", image.display());
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                eprintln!("  {line}");
            }
        }
        _ => eprintln!(
            "ebb: install binutils to symbolize the backtrace (addr2line -e {})",
            image.display()
        ),
    }
}

/// Builds `app`'s native image and boots it; returns the exit code for
/// `./ebb run` (the application's), or an error message.
pub fn run(root: &Path, app: &str, settings: &Settings, args: &[String]) -> Result<u8, String> {
    if !has_native_entry(root, app) {
        return Err(format!(
            "'{app}' has no native entry: its package must depend on ebb-app and declare \
             `ebb_app::main!` (see crates/ebb-app/README.md)"
        ));
    }
    network_args(settings)?;
    let tsc_khz = measure_tsc_khz();
    let cmdline = kernel_cmdline(settings, tsc_khz, args)?;

    let mut build = build_command(root, app);
    // The first build takes a while: say what is happening before cargo's
    // own progress.
    eprintln!("ebb: building {app} (release, {TARGET})...");
    if settings.verbose {
        eprintln!("ebb: {}", shell_words(&build));
    }
    let built = child::run(&mut build)?;
    if let Some(code) = stop::report(&format!("building {app}")) {
        return Ok(code);
    }
    match built {
        0 => {}
        code => {
            return Err(format!(
                "building the native image of '{app}' failed (exit code {code})"
            ))
        }
    }
    let image = image_path(root, app);

    let kvm = match settings.accel {
        Accel::Tcg => false,
        Accel::Kvm => true,
        Accel::Auto => kvm_usable(),
    };
    // The host's wall-clock time, taken after the build (which may be
    // long): the guest's clock starts from it (`wall=`, over the CMOS RTC).
    let cmdline = format!("wall={} {cmdline}", host_unix_seconds());
    let mut qemu = qemu_command(settings, &image, &cmdline, kvm);
    let qmp_dir = SocketDir::create(&format!("ebb-qmp-{}", std::process::id()))?;
    let socket = qmp_dir.path().join("qmp.sock");
    qemu.args(qmp_args(&socket));
    if settings.verbose {
        eprintln!("ebb: {}", shell_words(&qemu));
    }
    for forward in &settings.forwards {
        let forward = Forward::parse(forward)?;
        eprintln!(
            "ebb: forwarding 127.0.0.1:{} to the guest's TCP port {} (10.0.2.15, QEMU user networking)",
            forward.host, forward.guest
        );
    }
    let started = Instant::now();
    let mut process = qemu
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start QEMU (`{}`): {e}; ./ebb installs qemu-system-x86 for --native",
                child::describe(&qemu)
            )
        })?;

    let stopper = QemuStopper::start(process.id(), socket);
    // QEMU's stderr, passed on; the signal that stopped QEMU, if it says.
    let stderr = process.stderr.take().map(|stderr| {
        std::thread::spawn(move || {
            let mut stopped_by = None;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !is_expected_qemu_noise(&line) {
                    eprintln!("{line}");
                }
                stopped_by = stopped_by.or_else(|| qemu_stop_signal(&line));
            }
            stopped_by
        })
    });
    // Stream the serial console as it comes, and keep it for the backtrace.
    let mut output = Vec::new();
    if let Some(mut stdout) = process.stdout.take() {
        let mut buffer = [0u8; 4096];
        let mut out = std::io::stdout();
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0 {
                break;
            }
            let _ = out.write_all(&buffer[..n]);
            let _ = out.flush();
            output.extend_from_slice(&buffer[..n]);
        }
    }
    let status = process
        .wait()
        .map_err(|e| format!("waiting for QEMU: {e}"))?;
    let stopped_by = stderr.and_then(|thread| thread.join().ok()).flatten();
    let elapsed = started.elapsed();
    let code = child::exit_code(status);
    stopper.finish();
    // A stop signal ends QEMU one way or another (QMP `quit` here, or
    // Ctrl-C reaching QEMU directly, after which it exits with 0 as on a
    // guest reset): either way the run was stopped, not crashed.
    if let Some(code) = stop::report(app) {
        return Ok(code);
    }
    // A signal to QEMU itself from elsewhere (`kill`, the OOM killer): a
    // stop, not a guest failure. SIGKILL leaves QEMU no word, and `timeout`
    // dies of the same signal; any other, QEMU catches, says so on stderr
    // and exits with 0, the status a guest reset gives.
    use std::os::unix::process::ExitStatusExt;
    if let Some(signal) = status.signal().or(stopped_by) {
        eprintln!(
            "error: QEMU was stopped by {} from another process: the guest did not crash",
            stop::signal_name(signal)
        );
        return Ok(stop::exit_code(signal));
    }
    if settings.verbose {
        eprintln!(
            "ebb: QEMU exited with status {code} after {:.3} s",
            elapsed.as_secs_f64()
        );
    }
    match decode_qemu_status(i32::from(code)) {
        QemuExit::Guest(code) => {
            if code == EXIT_CPU_EXCEPTION || code == EXIT_PANIC {
                symbolize(&image, &String::from_utf8_lossy(&output));
            }
            Ok(code)
        }
        QemuExit::QemuFailed => Err("QEMU failed (its message is above)".to_owned()),
        QemuExit::NoExitCode => Err(
            "the guest stopped without an exit code (a reset, e.g. a triple fault, or a power-off)"
                .to_owned(),
        ),
        QemuExit::TimedOut => {
            eprintln!(
                "error: the guest was stopped after {} s (--timeout SECS; 0 for no limit)",
                settings.timeout
            );
            Ok(124)
        }
        QemuExit::Other(status) => Ok(u8::try_from(status).unwrap_or(1)),
    }
}

/// Stops QEMU when a stop signal reaches this process, so that this
/// process lives on to clean up after it (`--net tap` deletes its
/// namespace): QMP `quit` first (QEMU exits at once, with status 0), then,
/// should QEMU still run [`stop::STOP_GRACE`] later, SIGTERM to the
/// process started (`timeout` passes it on), and SIGKILL to QEMU itself
/// after as long again.
struct QemuStopper {
    done: Arc<AtomicBool>,
    watcher: Option<std::thread::JoinHandle<()>>,
}

impl QemuStopper {
    /// Starts watching for a stop signal on behalf of process `pid` (QEMU,
    /// or the wrappers it runs under), whose QMP socket is `socket`.
    fn start(pid: u32, socket: PathBuf) -> QemuStopper {
        let done = Arc::new(AtomicBool::new(false));
        let watcher = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let poll = Duration::from_millis(20);
                let signal = loop {
                    if done.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Some(signal) = stop::received() {
                        break signal;
                    }
                    std::thread::sleep(poll);
                };
                // QEMU's own pid, for SIGKILL (killing `timeout` would
                // leave QEMU running), found before QEMU is gone.
                let qemu = find_qemu(pid, 3);
                // QEMU's socket exists from its start: a second is plenty
                // to connect, and a QEMU that the terminal's Ctrl-C already
                // stopped does not keep this process waiting.
                let quit = Qmp::connect(&socket, Duration::from_secs(1)).and_then(|mut q| q.quit());
                if let Err(e) = quit {
                    // QEMU may close the socket before its reply: only a
                    // QEMU that is still running counts.
                    if !done.load(Ordering::Relaxed) {
                        eprintln!(
                            "ebb: QMP quit on {} failed ({e}); QEMU gets SIGTERM if it still runs in {} s",
                            stop::signal_name(signal),
                            stop::STOP_GRACE.as_secs()
                        );
                    }
                }
                let wait = |limit: Duration| {
                    let started = Instant::now();
                    while !done.load(Ordering::Relaxed) && started.elapsed() < limit {
                        std::thread::sleep(poll);
                    }
                    done.load(Ordering::Relaxed)
                };
                if wait(stop::STOP_GRACE) {
                    return;
                }
                stop::send(stop::SIGTERM, pid);
                if wait(stop::STOP_GRACE) {
                    return;
                }
                if let Some(qemu) = qemu {
                    eprintln!("ebb: QEMU (process {qemu}) did not stop: killing it");
                    stop::send(stop::SIGKILL, qemu);
                }
            })
        };
        QemuStopper {
            done,
            watcher: Some(watcher),
        }
    }

    /// QEMU has exited: stops watching.
    fn finish(mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(watcher) = self.watcher.take() {
            let _ = watcher.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_carries_platform_options_then_app_arguments() {
        let settings = Settings {
            verbose: true,
            boot_args: vec!["crash=ud2".into()],
            ..Settings::default()
        };
        assert_eq!(
            kernel_cmdline(&settings, Some(2_445_426), &["a".into(), "--b".into()]).unwrap(),
            "tsc_khz=2445426 machine=q35 cores=1 verbose crash=ud2 -- a --b"
        );
        let bad = Settings {
            boot_args: vec!["--".into()],
            ..Settings::default()
        };
        assert!(
            matches!(kernel_cmdline(&bad, None, &[]), Err(e) if e.contains("--boot-arg cannot be empty"))
        );
        assert!(
            matches!(kernel_cmdline(&settings, None, &["a b".into()]), Err(e) if e.contains("native application arguments cannot be empty or contain spaces"))
        );
    }

    #[test]
    fn qemu_runs_under_timeout_with_debug_exit() {
        let settings = Settings {
            timeout: 60,
            ..Settings::default()
        };
        let c = qemu_command(&settings, Path::new("/img"), "x -- y", false);
        let words = shell_words(&c);
        assert!(
            words.starts_with(
                "timeout --foreground 60 qemu-system-x86_64 -machine q35 -accel tcg -cpu max"
            ),
            "{words}"
        );
        assert!(
            words.contains("-device isa-debug-exit,iobase=0xf4,iosize=0x04"),
            "{words}"
        );
        assert!(
            words.contains(
                "-m 512M -object memory-backend-memfd,id=ram,size=512M -machine memory-backend=ram"
            ),
            "guest RAM from a memfd: {words}"
        );
        assert!(words.ends_with("-kernel /img -append 'x -- y'"), "{words}");
        let microvm = Settings {
            machine: Machine::Microvm,
            timeout: 0,
            ..Settings::default()
        };
        let words = shell_words(&qemu_command(&microvm, Path::new("/img"), "", true));
        assert!(
            words.starts_with("qemu-system-x86_64 -machine microvm -accel kvm -cpu host"),
            "{words}"
        );
        assert!(!words.contains("sercon"), "{words}");
    }

    #[test]
    fn q35_gets_a_modern_virtio_net_with_the_forwards_and_microvm_none() {
        assert_eq!(
            Forward::parse("7007"),
            Ok(Forward {
                host: 7007,
                guest: 7007
            })
        );
        assert_eq!(
            Forward::parse("17007:7007"),
            Ok(Forward {
                host: 17007,
                guest: 7007
            })
        );
        for bad in ["", "0", "x", "1:", "70000", "1:2:3"] {
            assert!(
                matches!(Forward::parse(bad), Err(e) if e.contains("--forward takes [HOST:]GUEST port numbers")),
                "{bad}"
            );
        }
        let q35 = Settings {
            forwards: vec!["17007:7007".to_owned(), "11211".to_owned()],
            ..Settings::default()
        };
        let words = shell_words(&qemu_command(&q35, Path::new("/img"), "", false));
        assert!(
            words.contains(
                "-netdev user,id=net0,hostfwd=tcp:127.0.0.1:17007-:7007,hostfwd=tcp:127.0.0.1:11211-:11211 \
                 -device virtio-net-pci,netdev=net0,disable-legacy=on"
            ),
            "{words}"
        );
        let microvm = Settings {
            machine: Machine::Microvm,
            ..Settings::default()
        };
        assert_eq!(network_args(&microvm), Ok(vec![]));
        let forwarded = Settings {
            forwards: vec!["7007".to_owned()],
            ..microvm
        };
        assert!(
            matches!(network_args(&forwarded), Err(e) if e.contains("--forward needs --machine q35"))
        );
        let own = Settings {
            qemu_args: vec!["-netdev".to_owned(), "tap,id=n".to_owned()],
            ..Settings::default()
        };
        assert_eq!(network_args(&own), Ok(vec![]));
        let both = Settings {
            forwards: vec!["7007".to_owned()],
            ..own
        };
        assert!(
            matches!(network_args(&both), Err(e) if e.contains("--forward needs the default user networking"))
        );
    }

    #[test]
    fn build_uses_its_own_target_dir_and_static_flags() {
        let c = build_command(Path::new("/r"), "hello");
        let words = shell_words(&c);
        assert_eq!(
            words,
            "cargo build --release -p hello --bin hello --target x86_64-unknown-none --target-dir /r/target/native"
        );
        let flags = c
            .get_envs()
            .find(|(k, _)| *k == "CARGO_ENCODED_RUSTFLAGS")
            .and_then(|(_, v)| v)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(flags.contains("-Crelocation-model=static\x1f"), "{flags}");
        assert!(
            flags.contains("-Clink-arg=-T/r/crates/ebb-native/link.ld"),
            "{flags}"
        );
        assert_eq!(
            image_path(Path::new("/r"), "hello"),
            Path::new("/r/target/native/x86_64-unknown-none/release/hello")
        );
    }

    #[test]
    fn qemus_stop_message_gives_the_signal() {
        assert_eq!(
            qemu_stop_signal("qemu-system-x86_64: terminating on signal 15 from pid 13492 ()"),
            Some(15)
        );
        assert_eq!(
            qemu_stop_signal("qemu-system-x86_64: terminating on signal 2"),
            Some(2)
        );
        assert_eq!(qemu_stop_signal("qemu-system-x86_64: warning: x"), None);
    }

    #[test]
    fn backtrace_lines_are_found() {
        let report = "ebbflow: CPU EXCEPTION 14\n  backtrace (symbolize ...):\n    #0 0x00000000001160f7\r\n    #1 0x1111ae\nhello #2 0x5 x\n";
        assert_eq!(
            backtrace_addresses(report),
            ["0x00000000001160f7", "0x1111ae"]
        );
    }

    #[test]
    fn the_host_tsc_is_measured() {
        if cfg!(target_arch = "x86_64") {
            let khz = measure_tsc_khz().expect("a TSC frequency");
            assert!((100_000..20_000_000).contains(&khz), "{khz} kHz");
        }
    }
}
