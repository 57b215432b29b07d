//! What the native integration tests share: the launcher binary, one boot
//! at a time, free ports, and a booted guest whose console is read line by
//! line (the launcher and QEMU in one process group, stopped as a whole
//! when the test ends, also on failure).

#![allow(dead_code)] // each test binary uses its own part

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The launcher (`./ebb` is a script around it).
pub const EBB: &str = env!("CARGO_BIN_EXE_ebb-cli");

/// One boot at a time: the images build in one target directory, and two
/// TCG guests at once on a shared machine only slow each other.
pub static BOOT: Mutex<()> = Mutex::new(());

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A port on 127.0.0.1 free a moment ago.
pub fn free_port() -> u16 {
    ebb_testbed::free_port().expect("a free port")
}

/// A process group stopped as a whole when dropped (its leader spawned
/// with `process_group(0)`).
pub struct Group(pub Child);

impl Drop for Group {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        // Quietly: after a clean exit the group is already gone.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

/// A running guest: its console line by line, and what the launcher said.
pub struct Guest {
    process: Group,
    console: Receiver<String>,
    launcher: Option<JoinHandle<String>>,
    /// The console lines read so far.
    pub seen: Vec<String>,
}

impl Guest {
    /// Spawns `command` (the launcher) in its own process group.
    pub fn spawn(mut command: Command) -> Guest {
        let mut child = command
            .env("EBB_ROOT", root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("start the launcher");
        let stdout = child.stdout.take().expect("stdout");
        let (lines, console) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line.replace('\r', "")).is_err() {
                    break;
                }
            }
        });
        let stderr = child.stderr.take().expect("stderr");
        let launcher = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            text
        });
        Guest {
            process: Group(child),
            console,
            launcher: Some(launcher),
            seen: Vec::new(),
        }
    }

    /// The launcher's process id (what it names its network namespace
    /// after: `ebb-APP-PID` with `--net tap`).
    pub fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// Reads the console until `done` holds for the lines so far; panics
    /// with the console and the launcher's output (saying `what` did not
    /// happen) if the guest ends or stays silent for 10 minutes first.
    pub fn wait_until(&mut self, what: &str, mut done: impl FnMut(&[String]) -> bool) {
        while !done(&self.seen) {
            match self.console.recv_timeout(Duration::from_secs(600)) {
                Ok(line) => self.seen.push(line),
                Err(_) => {
                    let launcher = self.launcher.take().and_then(|l| l.join().ok());
                    panic!(
                        "{what}: not seen on the console:\n{}\n{}",
                        self.seen.join("\n"),
                        launcher.unwrap_or_default()
                    );
                }
            }
        }
    }

    /// Reads the console until a line starts with `prefix`.
    pub fn wait_for(&mut self, prefix: &str) {
        let from = self.seen.len();
        self.wait_until(prefix, |seen| {
            seen[from..].iter().any(|line| line.starts_with(prefix))
        });
    }

    /// The console so far: the lines already looked at and those read
    /// since (a diagnostic after a stall needs what the guest said last).
    pub fn console(&mut self) -> String {
        while let Ok(line) = self.console.try_recv() {
            self.seen.push(line);
        }
        self.seen.join("\n")
    }

    /// Waits for the guest to exit (2 minutes at most) and checks it
    /// exited cleanly; returns the whole console.
    pub fn finish(mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match self.console.recv_timeout(Duration::from_secs(1)) {
                Ok(line) => self.seen.push(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            assert!(
                Instant::now() < deadline,
                "the guest did not exit:\n{}",
                self.seen.join("\n")
            );
        }
        let status = self.process.0.wait().expect("wait for the launcher");
        let console = self.seen.join("\n");
        // The launcher exits with the guest's code; QEMU run directly
        // exits with 3 for a guest exit code of 0 (ebb-native's abi).
        assert!(
            status.success() || status.code() == Some(3),
            "{status}:\n{console}"
        );
        for line in console.lines().filter(|line| line.contains("virtio-net")) {
            eprintln!("{line}");
        }
        console
    }
}

/// Redis (`./ebb run redis --native`) booted with `network` (its
/// launcher options: `--forward P:6379`, or `--net tap`) and bounded by
/// `timeout_seconds`, once it is ready to accept connections. No
/// persistence (`--save ""`: the empty argument crosses the kernel
/// command line percent-encoded, `ebb_boot_abi::app_args`), and a failed
/// BGSAVE (no fork) must not stop writes.
pub fn start_native_redis(network: &[&str], timeout_seconds: u32) -> Guest {
    let mut command = Command::new(EBB);
    command
        .args(["run", "redis", "--native", "--timeout"])
        .arg(timeout_seconds.to_string())
        .args(network)
        .args([
            "--",
            "--appendonly",
            "no",
            "--save",
            "",
            "--stop-writes-on-bgsave-error",
            "no",
        ]);
    let mut guest = Guest::spawn(command);
    guest.wait_until("Redis ready", |seen| {
        seen.iter()
            .any(|line| line.contains("Ready to accept connections"))
    });
    guest
}
