//! `hello` as a user runs it.

use std::process::Command;

const HELLO: &str = env!("CARGO_BIN_EXE_hello");

#[test]
fn hello_prints_a_line_from_every_core_and_exits_0() {
    for cores in [1, 2, 4] {
        let output = Command::new(HELLO)
            .args(["--cores", &cores.to_string(), "--no-pin"])
            .output()
            .expect("run hello");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        for core in 0..cores {
            let line = format!("hello from core {core} of {cores}: greeting #1");
            assert!(stdout.contains(&line), "missing '{line}' in:\n{stdout}");
        }
        assert!(
            stdout.contains(&format!("{cores} representatives made, one per core")),
            "{stdout}"
        );
    }
}

#[test]
fn hello_explains_bad_arguments() {
    let output = Command::new(HELLO).arg("--frobnicate").output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unexpected argument '--frobnicate'"));
    // A node of a cluster started with its node words wrong does not start.
    let output = Command::new(HELLO)
        .env("EBB_NODE", "node=3 ebb_ids=32832-32896")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains(
        "EBB_NODE: frontend= is missing: a node needs all of node=, frontend=, ebb_ids= and messenger_port="
    ));
    let output = Command::new(HELLO).arg("--help").output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("--cores <N>"));
}
