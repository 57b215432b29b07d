//! What the namespace tests share: a network namespace of the test's own
//! with a TAP device in it, the echo server on our stack started inside it,
//! and a way to run code in it (see QEMU-NOTES: TAP and private addresses
//! only inside a namespace of the test's own). Everything is deleted on
//! drop, also when the test fails.
#![allow(dead_code)] // each test file uses its own part

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

pub const ECHO: &str = env!("CARGO_BIN_EXE_userstack-echo");

/// Why these tests cannot run here, if they cannot.
pub fn unable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun");
    }
    None
}

/// Returns from the test (which passes) when it cannot run here, saying why.
#[macro_export]
macro_rules! require_root_and_tun {
    () => {
        if let Some(reason) = $crate::support::unable() {
            eprintln!("SKIPPED: the TAP namespace tests need root and /dev/net/tun ({reason})");
            return;
        }
    };
}

pub fn run(args: &[&str]) {
    let output = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|error| panic!("running {args:?}: {error}"));
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A network namespace with a TAP device `tap` whose kernel side has
/// `kernel_addr`; the processes started in it are killed and the namespace
/// deleted on drop.
pub struct Namespace {
    pub name: String,
    children: Vec<Child>,
}

impl Namespace {
    pub fn new(tap: &str, kernel_addr: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "ebbtest-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run(&["ip", "netns", "add", &name]);
        // From here on, drop deletes it.
        let namespace = Namespace {
            name,
            children: Vec::new(),
        };
        let ns = namespace.name.as_str();
        run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        run(&["ip", "-n", ns, "tuntap", "add", "dev", tap, "mode", "tap"]);
        run(&["ip", "-n", ns, "addr", "add", kernel_addr, "dev", tap]);
        run(&["ip", "-n", ns, "link", "set", tap, "up"]);
        namespace
    }

    /// Starts `program args` inside the namespace; its stderr lines come
    /// out of the receiver.
    pub fn spawn(&mut self, program: &str, args: &[&str]) -> Lines {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {program}: {error}"));
        let stderr = child.stderr.take().expect("piped stderr");
        self.children.push(child);
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("  | {line}");
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            receiver,
            seen: Vec::new(),
        }
    }

    /// Runs `program args` inside the namespace to completion; its stdout.
    pub fn exec(&self, program: &str, args: &[&str]) -> (bool, String) {
        let output = Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .output()
            .unwrap_or_else(|error| panic!("running {program}: {error}"));
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    }

    /// Runs `body` on a thread that has entered the namespace (setns
    /// changes only the calling thread's network namespace).
    pub fn inside<R: Send + 'static>(&self, body: impl FnOnce() -> R + Send + 'static) -> R {
        let path = format!("/var/run/netns/{}", self.name);
        thread::spawn(move || {
            let file = File::open(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
            // SAFETY: setns takes a namespace file descriptor we hold open;
            // it switches only this thread's network namespace.
            let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
            body()
        })
        .join()
        .expect("the thread inside the namespace panicked")
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A child's stderr lines, those already seen kept.
pub struct Lines {
    receiver: Receiver<String>,
    seen: Vec<String>,
}

/// Waits for a line containing `needle` (or finds it among those already
/// seen); returns it.
pub fn wait_for(lines: &mut Lines, needle: &str, limit: Duration) -> String {
    if let Some(line) = lines.seen.iter().find(|line| line.contains(needle)) {
        return line.clone();
    }
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.receiver.recv_timeout(left) {
            Ok(line) => {
                lines.seen.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            Err(_) => panic!("no line with '{needle}' within {limit:?}"),
        }
    }
}

/// Starts the echo server on our stack over `tap` with `extra` options.
pub fn start_echo(ns: &mut Namespace, tap: &str, extra: &[&str]) -> Lines {
    let mut args = vec!["--cores", "1", "--no-pin", "--tap", tap, "--udp-port", "7"];
    args.extend_from_slice(extra);
    let mut lines = ns.spawn(ECHO, &args);
    wait_for(&mut lines, "TCP 0.0.0.0:7", Duration::from_secs(20));
    lines
}
