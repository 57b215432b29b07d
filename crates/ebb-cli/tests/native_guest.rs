//! The in-guest tests (`apps/native-tests`): `./ebb run native-tests
//! --native` boots the test image on q35 with 1 and with 4 vCPUs; every test
//! runs inside the guest and reports over the serial console. This checks
//! that every test ran and passed and that the image exited 0; then it
//! disassembles the image's EbbRef fast path. Needs `qemu-system-x86_64`
//! and binutils' `objdump`, which `./ebb test` installs.

mod native_support;

use std::process::Command;

use ebb_testbed::{skip_unless, Need};
use native_support::{root, BOOT, EBB};

/// The tests the image holds (`apps/native-tests/src/lib.rs`, `TESTS`).
const IN_GUEST_TESTS: &[&str] = &[
    "allocators_on_every_core_with_cross_core_frees",
    "per_core_representatives_fault_once_per_core",
    "spawn_on_hops_across_every_core_in_order",
    "timers_fire_in_deadline_order_and_cancelled_ones_never",
    "demand_zero_region_is_filled_on_first_touch",
    "interrupt_stacks_have_guard_pages_on_every_core",
    "large_allocations_are_mapped_in_their_window_and_returned",
];

fn boot_tests(cores: usize, filters: &[&str]) -> (Option<i32>, String) {
    let _boot = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let cores = cores.to_string();
    let output = Command::new(EBB)
        .args(["run", "native-tests", "--native", "--machine", "q35"])
        .args(["--cores", &cores, "--timeout", "120", "--"])
        .args(filters)
        .env("EBB_ROOT", root())
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
    let (code, console) = boot_tests(cores, &[]);
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
    skip_unless!(Need::Qemu);
    check_every_test_passed(1);
}

#[test]
fn every_in_guest_test_passes_on_4_cores() {
    skip_unless!(Need::Qemu);
    check_every_test_passed(4);
}

/// `EbbRef::get`'s fast path in the native image is one load from the
/// per-core table at ebb-core's fixed address and one test-and-branch on
/// null (DESIGN §1): no hashing, atomics, locks or calls. The probe is
/// `native_tests::ebbs::ebb_ref_fast_path_probe` (`ebb.get().ok()`, kept out
/// of line); its instructions up to the first `ret` are checked, leaving
/// out the frame-pointer prologue and epilogue (images are built with frame
/// pointers) and register-to-register moves.
#[test]
fn the_native_ebb_ref_fast_path_is_one_load_and_one_test_and_branch() {
    skip_unless!(Need::Qemu);
    // Builds the image and runs the test that calls the probe.
    let (code, console) = boot_tests(1, &["per_core_representatives"]);
    assert_eq!(code, Some(0), "{console}");
    let image = root().join("target/native/x86_64-unknown-none/release/native-tests");
    let output = Command::new("objdump")
        .args(["-d", "-C", "--no-show-raw-insn"])
        .arg(&image)
        .output()
        .expect("objdump is missing: run the tests through `./ebb test`, which installs binutils");
    assert!(
        output.status.success(),
        "objdump failed on {}",
        image.display()
    );
    let listing = String::from_utf8_lossy(&output.stdout);
    let body: Vec<(String, String)> = listing
        .lines()
        .skip_while(|line| !line.ends_with("<native_tests::ebbs::ebb_ref_fast_path_probe>:"))
        .skip(1)
        .map_while(|line| {
            // "  11a32a:\tmov    -0x10000000(,%rax,8),%rax"
            let instruction = line.split('\t').nth(1)?.trim();
            let (mnemonic, operands) = instruction
                .split_once(char::is_whitespace)
                .unwrap_or((instruction, ""));
            Some((mnemonic.to_string(), operands.trim().to_string()))
        })
        .collect();
    let fast_path: Vec<&(String, String)> = {
        let end = body
            .iter()
            .position(|(mnemonic, _)| mnemonic == "ret")
            .expect("the probe has a ret");
        body[..end].iter().collect()
    };
    let frame = |(mnemonic, operands): &&(String, String)| {
        matches!(
            (mnemonic.as_str(), operands.as_str()),
            ("push", "%rbp") | ("pop", "%rbp") | ("mov", "%rsp,%rbp")
        ) || (matches!(mnemonic.as_str(), "sub" | "add") && operands.ends_with(",%rsp"))
    };
    let work: Vec<_> = fast_path
        .iter()
        .filter(|i| !frame(i))
        .filter(|(mnemonic, operands)| mnemonic != "mov" || operands.contains('('))
        .collect();
    let shown = format!("{fast_path:#?}");
    // ebb-core's TABLE_VADDR 0xFFFF_FFFF_F000_0000 as a sign-extended
    // 32-bit displacement.
    let loads: Vec<_> = work.iter().filter(|(_, o)| o.contains('(')).collect();
    assert_eq!(loads.len(), 1, "one memory access: {shown}");
    assert!(
        loads[0].0 == "mov" && loads[0].1.starts_with("-0x10000000("),
        "the load reads the per-core table: {shown}"
    );
    assert_eq!(
        work.len(),
        3,
        "load, test, branch and nothing else: {shown}"
    );
    assert_eq!(work[1].0, "test", "{shown}");
    assert!(
        work[2].0.starts_with('j') && work[2].0 != "jmp",
        "a conditional branch right after the test: {shown}"
    );
    assert!(
        !fast_path
            .iter()
            .any(|(m, _)| m.starts_with("call") || m.starts_with("lock")),
        "{shown}"
    );
}
