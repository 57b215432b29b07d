//! `./ebb run hello --native` as a user runs it: builds the native image,
//! boots it under QEMU (q35 and microvm), and checks the console and the
//! exit code; then a deliberate CPU exception and a panic, checking the
//! report. Needs `qemu-system-x86_64`, which `./ebb test` installs.

mod native_support;

use std::process::{Command, Output};

// One boot at a time (`BOOT`): the native image is built once, and two
// tests never build it at the same time.
use ebb_testbed::{skip_unless, Need};
use native_support::{root, BOOT, EBB};

fn run_native(extra: &[&str]) -> Output {
    let _build = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let output = Command::new(EBB)
        .args(["run", "hello", "--native", "--timeout", "60"])
        .args(extra)
        .env("EBB_ROOT", root())
        .output()
        .expect("run ebb-cli");
    output
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).replace('\r', ""),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn hello_boots_on_q35_and_microvm_and_exits_0() {
    skip_unless!(Need::Qemu);
    for machine in ["q35", "microvm"] {
        let output = run_native(&["--machine", machine, "-v"]);
        let (stdout, stderr) = text(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{machine}:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("hello from core 0 of 1: greeting #1 by this core's representative"),
            "{machine}:\n{stdout}"
        );
        assert!(
            stdout.contains("1 representatives made, one per core; stopping"),
            "{stdout}"
        );
        assert!(stdout.contains("ebbflow native: heap"), "{stdout}");
        assert!(
            stderr.contains(&format!("qemu-system-x86_64 -machine {machine} -accel")),
            "-v prints the QEMU command:\n{stderr}"
        );
        assert!(!stdout.contains("SeaBIOS"), "{stdout}");
    }
}

/// The guest's wall-clock seconds from its verbose boot log, and where
/// they came from.
fn guest_wall_clock(stdout: &str) -> Option<(u64, String)> {
    let line = stdout
        .lines()
        .find(|line| line.starts_with("ebbflow native: wall clock "))?;
    let rest = line.strip_prefix("ebbflow native: wall clock ")?;
    let seconds = rest.split('.').next()?.parse().ok()?;
    let source = rest
        .split("(from ")
        .nth(1)?
        .trim_end_matches(')')
        .to_owned();
    Some((seconds, source))
}

fn host_unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_secs()
}

#[test]
fn the_guest_wall_clock_follows_the_host_from_the_command_line_or_the_rtc() {
    skip_unless!(Need::Qemu);
    for (machine, boot_args) in [
        ("q35", &[][..]),
        ("q35", &["--boot-arg", "wall=rtc"][..]),
        ("microvm", &["--boot-arg", "wall=rtc"][..]),
    ] {
        let mut args = vec!["--machine", machine, "-v"];
        args.extend_from_slice(boot_args);
        let before = host_unix_seconds();
        let output = run_native(&args);
        let after = host_unix_seconds();
        let (stdout, stderr) = text(&output);
        assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(stdout.contains("ebbflow native: "), "{stdout}");
        assert!(
            stdout.contains("; using ") && stdout.contains(" timer, clock "),
            "the boot log names the chosen modes:\n{stdout}"
        );
        let (guest, source) = guest_wall_clock(&stdout).expect("a wall-clock line");
        let expected = if boot_args.is_empty() {
            "CommandLine"
        } else {
            "CmosRtc"
        };
        assert_eq!(source, expected, "{machine} {boot_args:?}:\n{stdout}");
        // The build runs between `before` and the boot: only the upper
        // bound is tight; a few seconds of slack for a loaded host.
        assert!(
            guest + 3 >= before && guest <= after + 3,
            "{machine} {boot_args:?}: guest {guest}, host {before}..{after}"
        );
    }
}

#[test]
fn hello_runs_on_4_cores_on_q35_and_microvm() {
    skip_unless!(Need::Qemu);
    for machine in ["q35", "microvm"] {
        let output = run_native(&["--machine", machine, "--cores", "4", "-v"]);
        let (stdout, stderr) = text(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{machine}:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("ebbflow native: 4 cores, LAPIC ids"),
            "{machine}: the MADT lists the 4 vCPUs and all start:\n{stdout}"
        );
        for core in 0..4 {
            assert!(
                stdout.contains(&format!(
                    "hello from core {core} of 4: greeting #1 by this core's representative"
                )),
                "{machine}: core {core} ran its event loop:\n{stdout}"
            );
        }
        assert!(
            stdout.contains("4 representatives made, one per core; stopping"),
            "{machine}:\n{stdout}"
        );
    }
}

#[test]
fn application_exit_codes_leave_qemu() {
    skip_unless!(Need::Qemu);
    let output = run_native(&["--machine", "microvm", "--", "--frobnicate"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("error: unexpected argument '--frobnicate' found"),
        "{stdout}"
    );
}

#[test]
fn a_cpu_exception_prints_a_report_and_fails() {
    skip_unless!(Need::Qemu);
    let output = run_native(&["--machine", "microvm", "--boot-arg", "crash=page-fault"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(102), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("CPU EXCEPTION 14 page fault (#PF), error code 0x0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("page fault at address CR2=0x0000000000000000: read of a non-present page"),
        "{stdout}"
    );
    assert!(stdout.contains("RIP=0x"), "{stdout}");
    assert!(stdout.contains("R15=0x"), "{stdout}");
    assert!(stdout.contains("    #1 0x"), "a backtrace:\n{stdout}");
    if Command::new("addr2line").arg("--version").output().is_ok() {
        assert!(
            stderr.contains("crash_now"),
            "symbolized backtrace:\n{stderr}"
        );
        assert!(
            stderr.contains("run_core"),
            "symbolized backtrace:\n{stderr}"
        );
    }
}

/// A store into a virtual region's guard page, and a stack overflow into
/// the guard page below core 0's stack (reported as the page fault it is:
/// page faults run on their own interrupt stack): the report says where
/// the address is, and the launcher symbolizes the faulting frame.
#[test]
fn guard_page_hits_print_a_report_with_symbolized_frames_and_fail() {
    skip_unless!(Need::Qemu);
    let found = Command::new("addr2line").arg("--version").output().is_ok();
    assert!(
        found,
        "addr2line is missing: run the tests through `./ebb test` (binutils)"
    );
    for (machine, crash, note, function) in [
        (
            "q35",
            "crash=guard-page",
            "the address is in the guard page of a virtual region",
            "ebb_native::runtime::crash::crash_now at ",
        ),
        (
            "microvm",
            "crash=stack-overflow",
            "the address is in the guard page below a stack: stack overflow",
            "ebb_native::runtime::crash::recurse at ",
        ),
        // Core 0's interrupt stacks have guard pages too: code overflowing
        // one (as a deep handler would) faults into the report.
        (
            "q35",
            "crash=ist-overflow",
            "the address is in the guard page below a stack: stack overflow",
            "ebb_native::runtime::crash::overflow_interrupt_stack at ",
        ),
    ] {
        let output = run_native(&["--machine", machine, "--boot-arg", crash]);
        let (stdout, stderr) = text(&output);
        assert_eq!(
            output.status.code(),
            Some(102),
            "{crash}:\n{stdout}\n{stderr}"
        );
        assert!(
            stdout.contains("CPU EXCEPTION 14 page fault (#PF), error code 0x2"),
            "{crash}: a write to a non-present page:\n{stdout}"
        );
        assert!(stdout.contains(note), "{crash}:\n{stdout}");
        assert!(stdout.contains("    #0 0x"), "{crash}:\n{stdout}");
        assert!(
            stderr.contains("ebb: backtrace, symbolized from "),
            "{crash}:\n{stderr}"
        );
        assert!(
            stderr.contains(function) && stderr.contains("crates/ebb-native/src/runtime/crash.rs:"),
            "{crash}: the faulting frame, symbolized:\n{stderr}"
        );
    }
}

/// The serial logger's level comes from `log=` (default info; `verbose`,
/// which `-v` passes, means debug): an unknown platform word's warning
/// shows at info and is hidden at error; the boot summary (debug) shows
/// only at debug and trace.
#[test]
fn the_log_level_on_the_command_line_chooses_what_the_guest_prints() {
    skip_unless!(Need::Qemu);
    let warning = "ebbflow: warning: ignoring unknown platform option 'bogus'";
    let summary = "ebbflow native: heap: ebb-mem over";
    for (level, shows_warning, shows_summary) in [
        (None, true, false),
        (Some("log=info"), true, false),
        (Some("log=debug"), true, true),
        (Some("log=trace"), true, true),
        (Some("log=error"), false, false),
    ] {
        let mut args = vec!["--machine", "microvm", "--boot-arg", "bogus"];
        if let Some(level) = level {
            args.extend(["--boot-arg", level]);
        }
        let output = run_native(&args);
        let (stdout, stderr) = text(&output);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{level:?}:\n{stdout}\n{stderr}"
        );
        assert_eq!(
            stdout.contains(warning),
            shows_warning,
            "{level:?}:\n{stdout}"
        );
        assert_eq!(
            stdout.contains(summary),
            shows_summary,
            "{level:?}:\n{stdout}"
        );
        assert!(stdout.contains("hello from core 0"), "{level:?}:\n{stdout}");
    }
    // `-v` is debug, unless `log=` says otherwise.
    let output = run_native(&["--machine", "microvm", "-v", "--boot-arg", "log=info"]);
    let (stdout, _) = text(&output);
    assert!(!stdout.contains(summary), "{stdout}");
}

#[test]
fn a_panic_prints_its_message_and_fails() {
    skip_unless!(Need::Qemu);
    let output = run_native(&["--machine", "q35", "--boot-arg", "crash=panic"]);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(101), "{stdout}\n{stderr}");
    assert!(stdout.contains("PANIC: panicked at"), "{stdout}");
    assert!(stdout.contains("crash=panic asked for a panic"), "{stdout}");
}
