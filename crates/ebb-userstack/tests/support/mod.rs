//! What the namespace tests share: a network namespace of the test's own
//! with a TAP device in it, the echo server on our stack started inside it,
//! and a way to run code in it (see QEMU-NOTES: TAP and private addresses
//! only inside a namespace of the test's own), all from `ebb-testbed`.
//! Everything is deleted on drop, also when the test fails.
#![allow(dead_code)] // each test file uses its own part

use std::process::{Command, Stdio};
use std::time::Duration;

use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};

pub use ebb_testbed::lines::Lines;

pub const ECHO: &str = env!("CARGO_BIN_EXE_userstack-echo");

/// Returns from the test, counted as skipped, without root, /dev/net/tun
/// or the tools the namespace tests run (`ip`, `ping`, `dnsmasq`).
#[macro_export]
macro_rules! require_root_and_tun {
    () => {
        ebb_testbed::skip_unless!(
            ebb_testbed::Need::Root,
            ebb_testbed::Need::Tun,
            ebb_testbed::Need::Ip,
            ebb_testbed::Need::Ping,
            ebb_testbed::Need::Dnsmasq,
        );
    };
}

/// A network namespace with a TAP device `tap` whose kernel side has
/// `kernel_addr`; the processes started in it are killed and the namespace
/// deleted on drop.
pub struct Namespace {
    pub name: String,
    _tap: TapDevice,
    namespace: NetNamespace,
}

impl Namespace {
    pub fn new(tap: &str, kernel_addr: &str) -> Self {
        let namespace = NetNamespace::for_this_process("ust").expect("namespace");
        let config = TapConfig::from_cidr(tap, kernel_addr).expect("kernel address");
        let device = TapDevice::create(&namespace, &config).expect("tap");
        Namespace {
            name: namespace.name().to_owned(),
            _tap: device,
            namespace,
        }
    }

    /// Starts `program args` inside the namespace; its stderr lines come
    /// out of the returned [`Lines`] (and are echoed with `  | `).
    pub fn spawn(&mut self, program: &str, args: &[&str]) -> Lines {
        let mut command = self.namespace.command(program);
        command
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let (_, stderr) = self
            .namespace
            .spawn(&mut command)
            .unwrap_or_else(|error| panic!("starting {program}: {error}"));
        Lines::spawn(stderr.expect("piped stderr"), Some("  | "))
    }

    /// Runs `program args` inside the namespace to completion; whether it
    /// succeeded, and its stdout.
    pub fn exec(&self, program: &str, args: &[&str]) -> (bool, String) {
        let output: std::process::Output = self
            .namespace
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|error| panic!("running {program}: {error}"));
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    }

    /// Runs `body` on a thread that has entered the namespace.
    pub fn inside<R: Send>(&self, body: impl FnOnce() -> R + Send) -> R {
        self.namespace
            .run_inside(body)
            .unwrap_or_else(|error| panic!("{error}"))
    }
}

/// Waits for a line containing `needle` (or finds it among those already
/// seen); returns it.
pub fn wait_for(lines: &mut Lines, needle: &str, limit: Duration) -> String {
    lines
        .wait_for(needle, limit)
        .unwrap_or_else(|error| panic!("{error}"))
}

/// Runs `args` to completion and checks it succeeded.
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

/// Starts the echo server on our stack over `tap` with `extra` options.
pub fn start_echo(ns: &mut Namespace, tap: &str, extra: &[&str]) -> Lines {
    let mut args = vec!["--cores", "1", "--no-pin", "--tap", tap, "--udp-port", "7"];
    args.extend_from_slice(extra);
    let mut lines = ns.spawn(ECHO, &args);
    wait_for(&mut lines, "TCP 0.0.0.0:7", Duration::from_secs(20));
    lines
}
