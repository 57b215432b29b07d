//! The in-guest tests (`apps/native-tests`): `./ebb run native-tests
//! --native` boots the test image on q35 with 1 and with 4 vCPUs; every test
//! runs inside the guest and reports over the serial console. This checks
//! that every test ran and passed and that the image exited 0. Needs
//! `qemu-system-x86_64`, which `./ebb test` installs.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

const EBB: &str = env!("CARGO_BIN_EXE_ebb-cli");

/// The tests the image holds (`apps/native-tests/src/lib.rs`, `TESTS`).
const IN_GUEST_TESTS: &[&str] = &[
    "allocators_on_every_core_with_cross_core_frees",
    "per_core_representatives_fault_once_per_core",
    "spawn_on_hops_across_every_core_in_order",
    "timers_fire_in_deadline_order_and_cancelled_ones_never",
];

/// One boot at a time: the image is built once, and two 4-vCPU guests on a
/// small machine would only slow each other down.
static BOOT: Mutex<()> = Mutex::new(());

fn boot_tests(cores: usize) -> (Option<i32>, String) {
    let found = Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    assert!(
        found,
        "qemu-system-x86_64 is missing: run the tests through `./ebb test`, which installs \
         qemu-system-x86 (or `apt-get install qemu-system-x86`)"
    );
    let _boot = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let cores = cores.to_string();
    let output = Command::new(EBB)
        .args(["run", "native-tests", "--native", "--machine", "q35"])
        .args(["--cores", &cores, "--timeout", "120"])
        .env(
            "EBB_ROOT",
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."),
        )
        .output()
        .expect("run ebb-cli");
    let console = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout).replace('\r', ""),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), console)
}

fn check_every_test_passed(cores: usize) {
    let (code, console) = boot_tests(cores);
    assert!(
        console.contains(&format!(
            "ebb-test: start {} tests on {cores} cores",
            IN_GUEST_TESTS.len()
        )),
        "{console}"
    );
    for test in IN_GUEST_TESTS {
        assert!(
            console
                .lines()
                .any(|line| line == format!("ebb-test: ok {test}")),
            "in-guest test {test} did not pass on {cores} cores:\n{console}"
        );
    }
    assert!(!console.contains("ebb-test: FAIL"), "{console}");
    assert!(
        console.contains(&format!(
            "ebb-test: summary: passed {}, failed 0",
            IN_GUEST_TESTS.len()
        )),
        "{console}"
    );
    assert_eq!(code, Some(0), "{console}");
}

#[test]
fn every_in_guest_test_passes_on_1_core() {
    check_every_test_passed(1);
}

#[test]
fn every_in_guest_test_passes_on_4_cores() {
    check_every_test_passed(4);
}
