//! libmemcached's `memccapable` (Debian's libmemcached-tools) against our
//! server: every one of its text ("ascii") and binary tests must pass.
//!
//! Against Debian's memcached 1.6.18 it runs 27 ascii and 27 binary tests
//! and prints "All tests passed" (no test is skipped without `-P`); we
//! require exactly that.

mod common;

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
/// a fresh server of ours; returns its exit status and output.
fn run(tool: &Path, flag: &str) -> (Option<i32>, String) {
    let server = start_ours(&[]);
    // Through sh, so that its stderr ("[FAIL]") and stdout interleave.
    let mut child = Command::new("sh")
        .args(["-c", "exec \"$0\" \"$@\" 2>&1"])
        .arg(tool)
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "-t",
            "5",
            flag,
        ])
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

fn check(flag: &str, protocol: &str) {
    let tool = memccapable();
    let (status, output) = run(&tool, flag);
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
    check("-b", "binary");
}

#[test]
fn memccapable_ascii_tests_all_pass() {
    check("-a", "ascii");
}
