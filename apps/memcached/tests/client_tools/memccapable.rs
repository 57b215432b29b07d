//! libmemcached's `memccapable` against a server: every one of its text
//! ("ascii") and binary tests must pass. Against Debian's memcached
//! 1.6.18 it runs 27 of each and prints "All tests passed" (no test is
//! skipped without `-P`).

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub const TESTS_PER_PROTOCOL: usize = 27;

pub fn memccapable() -> PathBuf {
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
pub fn run(
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

/// Runs memccapable with `flag` (-a: ascii only, -b: binary only,
/// whose lines start with `protocol`) against `server`, inside
/// `namespace` if given, and checks every test passed.
pub fn passes(namespace: Option<&str>, server: SocketAddr, flag: &str, protocol: &str) {
    let tool = memccapable();
    let host = server.ip().to_string();
    let (status, output) = run(&tool, namespace, &host, server.port(), flag);
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
        "memccapable {flag} against {server}: exit {status:?}, {passed} of {TESTS_PER_PROTOCOL} {protocol} tests passed; \
         problems: {failed:?}\n--- output ---\n{output}"
    );
    println!("memccapable {flag} against {server}: {passed} of {TESTS_PER_PROTOCOL} {protocol} tests passed");
}
