//! `./ebb run APP --native --net tap` end to end, as a user runs it (needs
//! root and /dev/net/tun; skipped otherwise): the launcher creates its
//! namespace with a TAP device, the guest takes 10.98.0.2 from `ip=`,
//! echo answers over TCP from inside the namespace, and a SIGTERM to the
//! launcher stops QEMU and deletes the namespace.

mod launcher_support;

use std::process::Command;
use std::time::{Duration, Instant};

use ebb_testbed::{skip_unless, Need};
use launcher_support::launch;

fn namespaces() -> String {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default()
}

#[test]
fn echo_on_a_tap_in_its_own_namespace_answers_and_the_namespace_goes_away() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    let (mut launcher, output) = launch(&[
        "run",
        "echo",
        "--native",
        "--net",
        "tap",
        "--timeout",
        "300",
    ]);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    while !seen
        .iter()
        .any(|l: &String| l.starts_with("echo: ready: TCP"))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        match output.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("echo did not start:\n{}", seen.join("\n")),
        }
    }
    let text = seen.join("\n");
    let ns = text
        .split("network namespace ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the launcher names its namespace")
        .to_owned();
    assert!(ns.starts_with("ebb-echo-"), "{text}");
    assert!(
        namespaces().contains(&ns),
        "{ns} exists while the guest runs"
    );
    assert!(
        text.contains("virtio-net has address 10.98.0.2/24, gateway 10.98.0.1 (static)"),
        "{text}"
    );

    // A TCP round trip from inside the namespace (bash's /dev/tcp).
    let reply = Command::new("ip")
        .args(["netns", "exec", &ns, "timeout", "60", "bash", "-c"])
        .arg("exec 3<>/dev/tcp/10.98.0.2/7007 && printf ebbflow >&3 && head -c 7 <&3")
        .output()
        .expect("run bash in the namespace");
    assert_eq!(
        String::from_utf8_lossy(&reply.stdout),
        "ebbflow",
        "{}",
        String::from_utf8_lossy(&reply.stderr)
    );

    // SIGTERM to the launcher: QEMU stops, the namespace is deleted.
    let status = Command::new("kill")
        .args(["-TERM", &launcher.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let code = launcher.0.wait().expect("wait for the launcher").code();
    let rest: Vec<String> = output.iter().collect();
    assert_eq!(code, Some(128 + 15), "{}", rest.join("\n"));
    assert!(
        rest.iter()
            .any(|l| l == &format!("ebb: deleted namespace {ns}")),
        "{}",
        rest.join("\n")
    );
    assert!(!namespaces().contains(&ns), "{ns} is gone");
}
