//! libmemcached's `memccapable` (Debian's libmemcached-tools) against our
//! server: every one of its text ("ascii") and binary tests must pass.
//!
//! Against Debian's memcached 1.6.18 it runs 27 ascii and 27 binary tests
//! and prints "All tests passed" (no test is skipped without `-P`); we
//! require exactly that, on the hosted platform (kernel TCP on 127.0.0.1)
//! and on Ebbflow's own TCP over a TAP device (`--tap`, the user-space
//! stack), with memccapable in the TAP device's network namespace.

mod common;
mod netns;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::start_ours;

const TESTS_PER_PROTOCOL: usize = 27;

fn memccapable() -> PathBuf {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|dir| dir.join("memccapable"))
        .chain([PathBuf::from("/usr/bin/memccapable")])
        .find(|candidate| candidate.is_file());
    found.unwrap_or_else(|| {
        panic!("memccapable is missing: run the tests through ./ebb test, which installs Debian's libmemcached-tools")
    })
}

/// Runs memccapable with `flag` (-a: ascii only, -b: binary only) against
/// the server at `host`:`port`, inside network namespace `namespace` if
/// given; returns its exit status and output.
fn run(
    tool: &Path,
    namespace: Option<&str>,
    host: &str,
    port: u16,
    flag: &str,
) -> (Option<i32>, String) {
    let mut command = match namespace {
        Some(namespace) => {
            let mut command = Command::new("ip");
            command.args(["netns", "exec", namespace, "sh"]);
            command
        }
        None => Command::new("sh"),
    };
    // Through sh, so that its stderr ("[FAIL]") and stdout interleave.
    let mut child = command
        .args(["-c", "exec \"$0\" \"$@\" 2>&1"])
        .arg(tool)
        .args(["-h", host, "-p", &port.to_string(), "-t", "5", flag])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", tool.display()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut output = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut output)
        .unwrap();
    (status, output)
}

/// Where memccapable finds the server.
enum Target {
    /// A fresh hosted server of ours on 127.0.0.1.
    Hosted,
    /// A fresh server of ours on the user-space stack in a namespace.
    UserStack,
}

fn check(target: &Target, flag: &str, protocol: &str) {
    let tool = memccapable();
    let (status, output) = match target {
        Target::Hosted => {
            let server = start_ours(&[]);
            run(&tool, None, "127.0.0.1", server.port, flag)
        }
        Target::UserStack => {
            let server = netns::UserStackServer::start(env!("CARGO_BIN_EXE_memcached"));
            run(&tool, Some(&server.namespace), netns::STACK_IP, 11211, flag)
        }
    };
    let passed = output
        .lines()
        .filter(|line| line.starts_with(protocol) && line.trim_end().ends_with("[pass]"))
        .count();
    let failed: Vec<&str> = output
        .lines()
        .filter(|line| {
            line.contains("[FAIL]") || line.contains("[skip]") || line.contains("failed")
        })
        .collect();
    assert!(
        status == Some(0) && failed.is_empty() && passed == TESTS_PER_PROTOCOL && output.contains("All tests passed"),
        "memccapable {flag}: exit {status:?}, {passed} of {TESTS_PER_PROTOCOL} {protocol} tests passed; \
         problems: {failed:?}\n--- output ---\n{output}"
    );
}

#[test]
fn memccapable_binary_tests_all_pass() {
    check(&Target::Hosted, "-b", "binary");
}

#[test]
fn memccapable_ascii_tests_all_pass() {
    check(&Target::Hosted, "-a", "ascii");
}

#[test]
fn memccapable_binary_tests_all_pass_on_the_user_space_stack() {
    ebb_testbed::skip_unless!(
        ebb_testbed::Need::Root,
        ebb_testbed::Need::Tun,
        ebb_testbed::Need::Ip
    );
    check(&Target::UserStack, "-b", "binary");
}

#[test]
fn memccapable_ascii_tests_all_pass_on_the_user_space_stack() {
    ebb_testbed::skip_unless!(
        ebb_testbed::Need::Root,
        ebb_testbed::Need::Tun,
        ebb_testbed::Need::Ip
    );
    check(&Target::UserStack, "-a", "ascii");
}
