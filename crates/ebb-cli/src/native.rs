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
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ebb_testbed::qemu::process::find_qemu;
use ebb_testbed::qemu::qmp::{qmp_args, Qmp, SocketDir};

use ebb_boot_abi::{
    decode_qemu_status, wall_word, QemuExit, EXIT_CPU_EXCEPTION, EXIT_PANIC, SEED_NAME,
};

use crate::{child, stop};

// What every QEMU launch needs comes from the testbed, shared with the
// benchmarks and the tests.
pub use ebb_testbed::qemu::{host_seed, kvm_usable, measure_tsc_khz, shell_words};
// The QEMU command line itself is the testbed's too (a cluster's nodes and
// the VM benchmarks boot with the same one).
pub use ebb_testbed::qemu::command::{
    kernel_cmdline, network_args, qemu_command, Accel, Forward, Machine, Settings, TapNic,
    DEFAULT_TIMEOUT,
};
// And so is building a native image (the cluster tests build theirs).
pub use ebb_testbed::native_image::{build_command, image_path, rustflags, TARGET, TARGET_DIR};

/// Whether `app` has a native entry (its package depends on `ebb-app`, the
/// interface every platform implements, or on `ebb-native` directly).
pub fn has_native_entry(root: &Path, app: &str) -> bool {
    std::fs::read_to_string(root.join("apps").join(app).join("Cargo.toml"))
        .is_ok_and(|manifest| manifest.contains("ebb-app") || manifest.contains("ebb-native"))
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

/// Writes `bytes` to a new file at `path` that only this user may read.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(bytes))
        .map_err(|e| format!("writing {}: {e}", path.display()))
}

/// How far ahead of now the guest's clock is set to start: more than
/// QEMU needs to start up paused (about 100 ms under TCG on an idle
/// host). Later than this, the guest starts at once and its clock lags
/// by the overshoot, as it always did without the paused start.
const START_LEAD: Duration = Duration::from_millis(250);

/// Nanoseconds since the Unix epoch at `time` (0 before it).
fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}

/// How the paused start ended.
enum Started {
    /// Continued; the guest waited paused this long (QEMU's own start-up
    /// excluded), and started this much after `start_at` (its clock lags
    /// by it).
    Continued { paused: Duration, late: Duration },
    /// QEMU ended before it could be continued (a bad argument, a plugin
    /// that failed, a stop signal): the normal path reports why.
    Ended,
}

/// How long QEMU may take to answer QMP after it starts.
const QMP_READY_LIMIT: Duration = Duration::from_secs(30);

/// Continues the paused QEMU (`process`, whose QMP socket is `socket`) at
/// `start_at` (at once if that has passed), then closes QMP for the stop
/// handler's later use. While it waits for QMP it watches QEMU, so one
/// that ended is reported by the normal path with its own message.
fn start_at_wall_time(
    process: &mut std::process::Child,
    socket: &Path,
    start_at: SystemTime,
) -> Result<Started, String> {
    let waiting = Instant::now();
    let mut qmp = loop {
        if process.try_wait().ok().flatten().is_some() {
            return Ok(Started::Ended);
        }
        match Qmp::connect(socket, Duration::from_millis(200)) {
            Ok(qmp) => break qmp,
            Err(_) if process.try_wait().ok().flatten().is_some() => return Ok(Started::Ended),
            Err(error) if waiting.elapsed() > QMP_READY_LIMIT => return Err(error),
            Err(_) => {}
        }
    };
    let ready = SystemTime::now();
    let late = ready.duration_since(start_at).unwrap_or(Duration::ZERO);
    let sleeping = Instant::now();
    std::thread::sleep(start_at.duration_since(ready).unwrap_or(Duration::ZERO));
    let paused = sleeping.elapsed();
    match qmp.cont() {
        Ok(()) => Ok(Started::Continued { paused, late }),
        Err(_) if process.try_wait().ok().flatten().is_some() => Ok(Started::Ended),
        Err(error) => Err(error),
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
    // The guest's wall clock: `wall=` is the host's time at which the
    // guest's TSC is 0, the moment QEMU starts the vCPU. QEMU starts
    // paused (`-S`) and is continued at that very time over QMP
    // (`start_at`), so the guest neither lags by QEMU's own start-up
    // (about 100 ms under TCG here; Redis's absolute-expiry tests allow
    // 100 ms) nor runs ahead. The time is taken after the build, which
    // may be long.
    let start_at = SystemTime::now() + START_LEAD;
    let cmdline = format!("{} {cmdline}", wall_word(unix_nanos(start_at)));
    let mut qemu = qemu_command(settings, &image, &cmdline, kvm)?;
    let qmp_dir = SocketDir::create(&format!("ebb-qmp-{}", std::process::id()))?;
    let socket = qmp_dir.path().join("qmp.sock");
    qemu.args(qmp_args(&socket));
    if settings.verbose {
        eprintln!("ebb: {}", shell_words(&qemu));
    }
    // Paused until `start_at`: added after the command is shown, which
    // stays one a user can paste (it starts at once).
    qemu.arg("-S");
    // Random bytes for the guest's CSPRNG where its CPU lacks RDRAND: a
    // fw_cfg file readable by us alone, in the directory deleted with the
    // QMP socket, never on a command line others can read. Added after
    // the command is shown, which stays one a user can paste (the file
    // is gone once the run ends; without it the guest has only RDRAND).
    if let Some(seed) = host_seed() {
        let path = qmp_dir.path().join("seed");
        write_private(&path, &seed)?;
        qemu.arg("-fw_cfg")
            .arg(crate::packed_files::fw_cfg_file_arg(SEED_NAME, &path));
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

    let paused = match start_at_wall_time(&mut process, &socket, start_at) {
        Ok(Started::Continued { paused, late }) => {
            if settings.verbose && late > Duration::ZERO {
                eprintln!(
                    "ebb: QEMU took {} ms past the {} ms lead to start: the guest's clock lags by that",
                    late.as_millis(),
                    START_LEAD.as_millis()
                );
            }
            paused
        }
        Ok(Started::Ended) => Duration::ZERO,
        Err(error) => {
            // QEMU itself, not `timeout` above it: a paused QEMU would
            // otherwise stay paused with nothing to end it.
            if let Some(qemu) = find_qemu(process.id(), 3) {
                stop::send(stop::SIGKILL, qemu);
            }
            let _ = process.kill();
            let _ = process.wait();
            return Err(format!("starting the guest: {error}"));
        }
    };
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
    // QEMU's own time, without the pause before the clock's start.
    let elapsed = started.elapsed().saturating_sub(paused);
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
