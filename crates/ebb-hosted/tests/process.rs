//! Whole hosted processes: what an idle node costs, and Ctrl-C.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IDLE_NODE: &str = env!("CARGO_BIN_EXE_ebb-idle-node");

#[test]
fn an_idle_node_uses_almost_no_cpu() {
    let output = Command::new(IDLE_NODE)
        .args(["--cores", "2", "--measure", "2"])
        .output()
        .expect("start ebb-idle-node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cpu_ns: u64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("idle_cpu_ns="))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|ns| ns.parse().ok())
        .unwrap_or_else(|| panic!("no idle_cpu_ns in output:\n{stdout}"));
    // Two idle cores over 2 s: a core that spun would burn 2 000 ms. Allow
    // 2 % of one CPU for the kernel's and the measurement's own work.
    assert!(
        cpu_ns < 40_000_000,
        "an idle 2-core node used {} ms of CPU in 2 s",
        cpu_ns / 1_000_000
    );
}

#[test]
fn ctrl_c_stops_every_core_and_exits_130() {
    let mut child = Command::new(IDLE_NODE)
        .args(["--cores", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ebb-idle-node");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    stdout.read_line(&mut ready).unwrap();
    assert_eq!(ready.trim(), "ready: 2 cores idle");

    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: sends SIGINT to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);

    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("the node did not stop within 20 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(130), "stdout: {rest}\nstderr: {stderr}");
    assert!(
        stderr.contains("ebbflow: SIGINT: stopping 2 cores"),
        "{stderr}"
    );
    assert!(stderr.contains("ebbflow: all 2 cores stopped"), "{stderr}");
    assert!(rest.contains("stopped with exit code 130"), "{rest}");
}

#[test]
fn bad_platform_options_are_explained() {
    let output = Command::new(IDLE_NODE)
        .args(["--cores", "0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--cores takes a number above 0, not '0'"),
        "{stderr}"
    );
    let output = Command::new(IDLE_NODE)
        .args(["--cpus", "4096"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("CPU 4096 is not available to this process"),
        "{stderr}"
    );
}
