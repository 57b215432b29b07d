//! Stopping `./ebb run memcached` with a signal, as `kill PID` from another
//! shell does (the signal reaches `./ebb` only, not its process group), or
//! as Ctrl-C in a terminal does (SIGINT to the whole group), in each mode: hosted, `--userstack` and `--native` (needing root, `ip` and
//! /dev/net/tun, or QEMU; skipped otherwise). The launcher must stop what
//! it started, delete what it created, say it stopped on the signal, and
//! exit as shells report a death by signal: 128 + the signal's number.
//!
//! The launcher runs in a process group of its own, so every process it
//! starts (`cargo run`, `ip netns exec`, `timeout`, QEMU, memcached) is in
//! that group: "nothing left behind" is "the group is empty".

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ebb_testbed::{skip_unless, Need};

/// One run at a time: the namespace checks compare before and after, and
/// builds and TCG guests at once only slow each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How long a build and a boot may take before the ready line (the first
/// native build of memcached takes minutes).
const READY_WITHIN: Duration = Duration::from_secs(900);
/// How long `./ebb` may take to stop after the signal: generous, for TCG
/// and a loaded machine; a launcher that ignores the signal never exits.
const STOPPED_WITHIN: Duration = Duration::from_secs(60);

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;
const SIGKILL: i32 = 9;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}

/// `kill -SIGNAL -- TARGET`, quietly (the target may be gone already).
fn kill(signal: &str, target: &str) {
    let _ = Command::new("kill")
        .args([signal, "--", target])
        .stderr(Stdio::null())
        .status();
}

/// The processes (pid and name) whose process group is `group`.
fn group_members(group: u32) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let name = stat[stat.find('(')? + 1..stat.rfind(')')?].to_owned();
            // After the name: state, ppid, pgrp.
            let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
            let zombie = fields.first() == Some(&"Z");
            let pgrp: u32 = fields.get(2)?.parse().ok()?;
            (pgrp == group && !zombie).then_some((pid, name))
        })
        .collect()
}

/// The network namespaces named `ebb-memcached-*` (the launcher's).
fn launcher_namespaces() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("run `ip netns list`");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with("ebb-memcached-"))
        .map(str::to_owned)
        .collect()
}

/// `./ebb ARGS...` in a process group of its own, whose stdout is read
/// line by line and whose stderr is kept; the whole group is killed if the
/// test fails early.
struct Launcher {
    child: Child,
    stdout: Receiver<String>,
    stderr: Option<JoinHandle<String>>,
    seen: Vec<String>,
}

impl Launcher {
    fn start(args: &[&str]) -> Launcher {
        let mut child = Command::new(root().join("ebb"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("start ./ebb");
        let stdout = child.stdout.take().expect("stdout");
        let (lines, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line.replace('\r', "")).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Launcher {
            child,
            stdout: receiver,
            stderr: Some(stderr),
            seen: Vec::new(),
        }
    }

    /// Reads stdout until a line starts with `prefix`; panics with what
    /// was seen if `./ebb` ends or stays silent too long first.
    fn wait_for(&mut self, prefix: &str) {
        let deadline = Instant::now() + READY_WITHIN;
        while !self.seen.iter().any(|line| line.starts_with(prefix)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stdout.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => panic!(
                    "'{prefix}' not seen:\n{}\nstderr:\n{}",
                    self.seen.join("\n"),
                    self.stderr_text()
                ),
            }
        }
    }

    /// Waits for `./ebb` to exit, for [`STOPPED_WITHIN`] at most.
    fn wait_exit(&mut self) -> Option<ExitStatus> {
        let deadline = Instant::now() + STOPPED_WITHIN;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Everything `./ebb` wrote to stderr (waits for the pipe to close).
    fn stderr_text(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        // Whatever is left of the group (nothing, when the test passes),
        // and the namespace a killed launcher could not delete (its name
        // has the launcher's pid: `./ebb` execs it).
        kill("-KILL", &format!("-{}", self.child.id()));
        let _ = self.child.wait();
        let _ = Command::new("ip")
            .args([
                "netns",
                "delete",
                &format!("ebb-memcached-{}", self.child.id()),
            ])
            .stderr(Stdio::null())
            .status();
    }
}

/// Where a signal goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum To {
    /// `./ebb`'s process only (`kill PID`).
    Launcher,
    /// Its whole process group (Ctrl-C in a terminal).
    Group,
}

/// Runs `./ebb run memcached MODE... -- APP_ARGS...`, waits for
/// memcached's ready line, sends `signal` to `./ebb` (or `to` its group), and checks
/// that it stops as a stop and leaves nothing behind: no process of its
/// group, no namespace it made, and `port` (if any) free again.
fn stops_on(signal: i32, to: To, mode: &[&str], app_args: &[&str], port: Option<u16>) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let before = launcher_namespaces();
    let mut args = vec!["run", "memcached"];
    args.extend_from_slice(mode);
    args.push("--");
    args.extend_from_slice(app_args);
    let mut launcher = Launcher::start(&args);
    let group = launcher.child.id();
    launcher.wait_for("memcached: ready: ");
    let made: Vec<String> = launcher_namespaces()
        .into_iter()
        .filter(|name| !before.contains(name))
        .collect();
    if mode.contains(&"--userstack") || mode.contains(&"tap") {
        assert_eq!(made.len(), 1, "one namespace for the run: {made:?}");
    }

    match to {
        // `kill PID` from another shell: the launcher's process only.
        To::Launcher => kill(&format!("-{signal}"), &group.to_string()),
        To::Group => kill(&format!("-{signal}"), &format!("-{group}")),
    }
    let status = launcher.wait_exit();
    // What it left behind, once it is gone (or right away if it hangs).
    let left: Vec<(u32, String)> = (0..100)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(50));
            group_members(group)
        })
        .find(|members| members.is_empty() || status.is_none())
        .unwrap_or_else(|| group_members(group));
    let namespaces_left: Vec<String> = launcher_namespaces()
        .into_iter()
        .filter(|name| made.contains(name))
        .collect();
    // Whatever is left would hold stderr open; and a namespace left is
    // deleted here, before any assertion can fail.
    kill("-KILL", &format!("-{group}"));
    for namespace in &namespaces_left {
        let _ = Command::new("ip")
            .args(["netns", "delete", namespace])
            .stderr(Stdio::null())
            .status();
    }
    let stderr = launcher.stderr_text();
    let what = format!(
        "{} to{} ./ebb {}:\nstdout:\n{}\nstderr:\n{stderr}",
        signal_name(signal),
        if to == To::Group { " the group of" } else { "" },
        args.join(" "),
        launcher.seen.join("\n")
    );
    let status = status.unwrap_or_else(|| {
        panic!(
            "./ebb did not exit within {} s of {what}",
            STOPPED_WITHIN.as_secs()
        )
    });
    assert_eq!(
        status.code(),
        Some(128 + signal),
        "./ebb exits 128 + the signal, as shells report a stop by signal: {status}, {what}"
    );
    assert!(
        left.is_empty(),
        "processes left behind: {left:?} after {what}"
    );
    assert!(
        namespaces_left.is_empty(),
        "namespaces left behind: {namespaces_left:?} after {what}"
    );
    if let Some(port) = port {
        if let Err(e) = TcpListener::bind(("127.0.0.1", port)) {
            panic!("port {port} still taken ({e}) after {what}");
        }
    }
    assert!(
        stderr.contains(&format!(
            "ebb: stopped memcached on {}",
            signal_name(signal)
        )),
        "the launcher says it stopped on the signal: {what}"
    );
    assert!(
        !stderr.contains("triple fault") && !stderr.contains("error:"),
        "a stop is not reported as a failure: {what}"
    );
}

fn hosted(signal: i32, to: To) {
    let port = ebb_testbed::free_port().expect("a free port");
    stops_on(signal, to, &[], &["-p", &port.to_string()], Some(port));
}

fn userstack(signal: i32) {
    stops_on(signal, To::Launcher, &["--userstack"], &[], None);
}

fn native(signal: i32, to: To) {
    let port = ebb_testbed::free_port().expect("a free port");
    let forward = format!("{port}:11211");
    stops_on(
        signal,
        to,
        &["--native", "--accel", "tcg", "--forward", &forward],
        &[],
        Some(port),
    );
}

#[test]
fn hosted_stops_on_sigterm() {
    hosted(SIGTERM, To::Launcher);
}

#[test]
fn hosted_stops_on_sigint() {
    hosted(SIGINT, To::Launcher);
}

#[test]
fn hosted_stops_on_ctrl_c() {
    hosted(SIGINT, To::Group);
}

#[test]
fn userstack_stops_on_sigterm() {
    skip_unless!(Need::Root, Need::Ip, Need::Tun);
    userstack(SIGTERM);
}

#[test]
fn userstack_stops_on_sigint() {
    skip_unless!(Need::Root, Need::Ip, Need::Tun);
    userstack(SIGINT);
}

#[test]
fn native_stops_on_sigterm() {
    skip_unless!(Need::Qemu);
    native(SIGTERM, To::Launcher);
}

#[test]
fn native_stops_on_sigint() {
    skip_unless!(Need::Qemu);
    native(SIGINT, To::Launcher);
}

/// Ctrl-C reaches QEMU too, which exits with status 0 as on a guest reset:
/// it is still a stop, not a "triple fault".
#[test]
fn native_stops_on_ctrl_c() {
    skip_unless!(Need::Qemu);
    native(SIGINT, To::Group);
}

#[test]
fn native_on_a_tap_stops_on_sigint() {
    skip_unless!(Need::Qemu, Need::Root, Need::Ip, Need::Tun);
    stops_on(
        SIGINT,
        To::Launcher,
        &["--native", "--accel", "tcg", "--net", "tap"],
        &[],
        None,
    );
}

/// A signal to QEMU itself, from another process than `./ebb` (`kill`,
/// the OOM killer), stops the guest: `./ebb` says so, names the signal and
/// exits 128 + it, instead of reporting a guest reset ("triple fault")
/// for SIGTERM, or a guest exit code (67) for SIGKILL's status 137.
fn native_qemu_stopped_from_outside(signal: i32) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let port = ebb_testbed::free_port().expect("a free port");
    let forward = format!("{port}:11211");
    let args = [
        "run",
        "memcached",
        "--native",
        "--accel",
        "tcg",
        "--forward",
        &forward,
    ];
    let mut launcher = Launcher::start(&args);
    let group = launcher.child.id();
    launcher.wait_for("memcached: ready: ");
    let qemu: Vec<u32> = group_members(group)
        .into_iter()
        .filter(|(_, name)| name.starts_with("qemu-system"))
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(qemu.len(), 1, "one QEMU in the launcher's group");
    kill(&format!("-{signal}"), &qemu[0].to_string());
    let status = launcher.wait_exit();
    kill("-KILL", &format!("-{group}"));
    let stderr = launcher.stderr_text();
    let status = status.unwrap_or_else(|| panic!("./ebb did not exit:\n{stderr}"));
    assert_eq!(status.code(), Some(128 + signal), "{status}:\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "error: QEMU was stopped by {} from another process: the guest did not crash",
            signal_name(signal)
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("triple fault"), "{stderr}");
}

#[test]
fn native_says_when_qemu_is_stopped_from_outside() {
    skip_unless!(Need::Qemu);
    native_qemu_stopped_from_outside(SIGTERM);
    native_qemu_stopped_from_outside(SIGKILL);
}
