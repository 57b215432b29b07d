//! Issue 18, natively: the syscall-group programs of
//! `crates/ebb-posix/programs` linked into a native image
//! (`apps/c-program`, `./ebb run c-program --native`) print what the same
//! programs print hosted, as Linux processes with the hosted personality;
//! the program's exit code is the one `./ebb run` exits with; and a call
//! the personality does not provide is `ENOSYS` with the same log line
//! once per call number, after which the program goes on.
//!
//! This slice: memory, time, files (natively on the in-memory file
//! system, in its empty `/tmp`; hosted in an empty scratch directory),
//! process, the unknown call, and the red zone (`redzone.c`, built with
//! one: its locals below rsp survive 300 ms of timer interrupts, which
//! natively fire every 10 ms on their own stack; with interrupts on the
//! interrupted stack this program reports them overwritten), and threads
//! (`threads.c`: pthreads with mutexes, condition variables, TLS, once,
//! a detached thread; natively stackful events on core 0).
//!
//! Needs QEMU and what `crates/ebb-cbuild/tests/posix_hosted.rs` needs
//! (apt's deb-src entries, gcc, make, the `x86_64-unknown-none` target);
//! without them it is SKIPPED with the reason.

mod c_support;
mod native_support;

use std::process::Command;
use std::time::Duration;

use c_support::{named, target_dir, Built};
use ebb_testbed::child::run_bounded;
use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{skip_unless, Need};
use native_support::BOOT;

/// musl (cached after the first build), the hosted personality and the
/// programs, on a loaded two-core machine.
const PREPARE_LIMIT: Duration = Duration::from_secs(900);
/// One hosted run (the slowest sleeps 300 ms).
const HOSTED_LIMIT: Duration = Duration::from_secs(60);

/// The programs this slice runs natively, and their exit codes.
const NATIVE_PROGRAMS: [(&str, i32); 10] = [
    ("memory", 0),
    ("time", 0),
    ("files", 0),
    ("process", 7),
    ("unknown", 0),
    ("redzone", 0),
    ("threads", 0),
    ("signals", 0),
    ("events", 0),
    ("math", 0),
];

/// `files` works in the directory it is given, which must be empty.
const NATIVE_SCRATCH: &str = "/tmp";

/// What a run printed: the program's own lines (`NAME: ...`) and the
/// personality's log lines (`ebb-posix: ...`), and its exit code.
struct Printed {
    program: Vec<String>,
    log: Vec<String>,
    code: Option<i32>,
}

fn printed(name: &str, text: &str, code: Option<i32>) -> Printed {
    let prefix = format!("{name}: ");
    let lines = || text.lines().map(|line| line.trim_end_matches('\r'));
    Printed {
        program: lines()
            .filter(|l| l.starts_with(&prefix))
            .map(str::to_owned)
            .collect(),
        log: lines()
            .filter(|l| l.starts_with("ebb-posix: "))
            .map(str::to_owned)
            .collect(),
        code,
    }
}

fn run_hosted(program: &Built, args: &[&str]) -> Printed {
    let mut command = Command::new(&program.ebbflow);
    command.args(args);
    let scratch = target_dir().join(format!("posix-programs/native-test-{}", std::process::id()));
    if program.name == "files" {
        std::fs::create_dir_all(&scratch).expect("a scratch directory");
        command.arg(&scratch);
    }
    let finished = run_bounded(&mut command, HOSTED_LIMIT);
    if program.name == "files" {
        std::fs::remove_dir_all(&scratch).expect("removing the scratch directory");
    }
    let text = format!("{}{}", finished.stdout, finished.stderr);
    printed(&program.name, &text, finished.status.code())
}

fn run_native(program: &Built, args: &[&str]) -> (Printed, String) {
    // redzone: the platform says how many ticks the program took (below).
    let verbose = program.name == "redzone";
    let mut all_args = Vec::new();
    if program.name == "files" {
        all_args.push(NATIVE_SCRATCH);
    }
    all_args.extend_from_slice(args);
    let launcher: &[&str] = if verbose { &["--verbose"] } else { &[] };
    let (code, text) = c_support::run_native(program, launcher, &all_args);
    (printed(&program.name, &text, code), text)
}

/// The syscall-group programs, or `None` after reporting `test` SKIPPED
/// when the machine cannot build them.
fn built_programs(test: &str) -> Option<Vec<Built>> {
    let tools = ["apt-get", "dpkg-source", "gcc", "make"];
    match c_support::build("posix-programs", &tools, PREPARE_LIMIT) {
        Ok((programs, _)) => Some(programs),
        Err(reason) => {
            ebb_testbed::skip(test, &reason);
            None
        }
    }
}

#[test]
fn syscall_group_programs_print_the_same_natively_and_hosted() {
    skip_unless!(Need::Qemu);
    let Some(programs) = built_programs(ebb_testbed::function_name!()) else {
        return;
    };
    let _boot = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    for (name, code) in NATIVE_PROGRAMS {
        let program = named(&programs, name);
        let hosted = run_hosted(program, &[]);
        let (native, console) = run_native(program, &[]);
        assert!(!hosted.program.is_empty(), "{name} printed nothing hosted");
        assert_eq!(
            native.program, hosted.program,
            "{name}'s lines, natively:\n{console}"
        );
        let ticks = "ebb-posix: the program took ";
        let native_log: Vec<&String> = native
            .log
            .iter()
            .filter(|l| !l.starts_with(ticks))
            .collect();
        let hosted_log: Vec<&String> = hosted.log.iter().collect();
        assert_eq!(
            native_log, hosted_log,
            "{name}'s log lines, natively:\n{console}"
        );
        if name == "redzone" {
            // The check ran for 300 ms under a 10 ms tick: interrupts
            // really came while the red zone was in use.
            let taken: u64 = native
                .log
                .iter()
                .find_map(|line| {
                    line.strip_prefix(ticks)?
                        .strip_suffix(" timer interrupts")?
                        .parse()
                        .ok()
                })
                .unwrap_or_else(|| panic!("no tick count natively:\n{console}"));
            assert!(taken >= 20, "{taken} ticks during redzone:\n{console}");
        }
        assert_eq!(hosted.code, Some(code), "{name}'s exit code hosted");
        assert_eq!(
            native.code,
            Some(code),
            "{name}'s exit code natively:\n{console}"
        );
    }
    // Exit codes: one QEMU's exit device carries arrives as it is; one
    // past its 0..=126 is said on the console and leaves as 1.
    let exitcode = named(&programs, "exitcode");
    for (code, native_code, said) in [(42, 42, false), (103, 103, true), (200, 1, true)] {
        let argument = code.to_string();
        let hosted = run_hosted(exitcode, &[&argument]);
        let (native, console) = run_native(exitcode, &[&argument]);
        assert_eq!(hosted.code, Some(code), "exit {code} hosted");
        assert_eq!(native.program, hosted.program, "exit {code}:\n{console}");
        assert_eq!(
            native.code,
            Some(native_code),
            "exit {code} natively:\n{console}"
        );
        let line = format!(
            "ebb-posix: the program exited with {code} (the image exits with {native_code})"
        );
        assert_eq!(native.log.contains(&line), said, "exit {code}:\n{console}");
    }
    // A CPU without RDRAND (QEMU told to hide it and RDSEED): getrandom
    // draws from the CSPRNG the launcher's seed started, and `process`
    // (two 32-byte draws that must differ) prints what it prints hosted.
    let process = named(&programs, "process");
    let hosted = run_hosted(process, &[]);
    let no_rdrand = [
        "--verbose",
        "--qemu-arg=-cpu",
        "--qemu-arg=max,-rdrand,-rdseed",
    ];
    let (code, console) = c_support::run_native(process, &no_rdrand, &[]);
    let native = printed("process", &console, code);
    assert_eq!(
        native.program, hosted.program,
        "process without RDRAND:\n{console}"
    );
    let seeded = "ebb-posix: no RDRAND: getrandom draws from ChaCha20 seeded by the launcher";
    assert!(
        native.log.iter().any(|line| line == seeded),
        "process without RDRAND:\n{console}"
    );
    assert!(
        !console.contains("not provided"),
        "process without RDRAND:\n{console}"
    );
    assert_eq!(native.code, Some(7), "process without RDRAND:\n{console}");
}

#[test]
fn a_directory_packed_by_the_launcher_is_the_native_file_system() {
    skip_unless!(Need::Qemu);
    let Some(programs) = built_programs(ebb_testbed::function_name!()) else {
        return;
    };
    // A tree with nested and empty directories, an empty file, a file
    // larger than one read, and three permission modes; and `tmp`, which
    // the native file system has already (a directory packed again is
    // kept), so that both listings hold it.
    let tree = target_dir().join(format!("posix-programs/packed-tree-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(tree.join("data/deep")).unwrap();
    std::fs::create_dir_all(tree.join("tmp")).unwrap();
    std::fs::create_dir_all(tree.join("empty-dir")).unwrap();
    std::fs::write(tree.join("a.txt"), b"hello\n").unwrap();
    let blob: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(tree.join("data/blob"), &blob).unwrap();
    std::fs::write(tree.join("data/deep/empty"), b"").unwrap();
    std::fs::write(tree.join("run.sh"), b"#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    for (file, mode) in [("data/blob", 0o600), ("run.sh", 0o755)] {
        std::fs::set_permissions(tree.join(file), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let packed = named(&programs, "packed");
    let hosted = run_hosted(packed, &[tree.to_str().unwrap()]);
    let files = format!("--files={}", tree.display());
    let _boot = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let (code, console) = c_support::run_native(packed, &[&files], &["/"]);
    let native = printed("packed", &console, code);
    let _ = std::fs::remove_dir_all(&tree);
    assert_eq!(hosted.code, Some(0), "packed hosted: {:?}", hosted.program);
    assert!(
        hosted
            .program
            .iter()
            .any(|line| line.starts_with("packed: data/blob 100000 bytes")),
        "{:?}",
        hosted.program
    );
    assert_eq!(
        native.program, hosted.program,
        "packed natively:\n{console}"
    );
    assert_eq!(native.code, Some(0), "packed natively:\n{console}");
}

/// Issue 19 on the user-space stack: the same programs linked with
/// `ebb-posix-userstack` (`ebb-cbuild posix-userstack`), run as Linux
/// processes in a network namespace of the test's own whose TAP device
/// their stack takes: sockets, epoll sets, eventfds and pipes are
/// Ebbflow's (`events.c`'s 77 checks), everything else passes to Linux,
/// and each prints what it prints hosted, with the same exit code.
#[test]
fn syscall_group_programs_print_the_same_on_the_user_space_stack() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let Some(programs) = built_programs(ebb_testbed::function_name!()) else {
        return;
    };
    let tools = ["apt-get", "dpkg-source", "gcc", "make"];
    let printed_lines = match c_support::build("posix-userstack", &tools, PREPARE_LIMIT) {
        Ok((_, printed)) => printed,
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    let ns = format!("ebb-posix-us-{}", std::process::id());
    let namespace = NetNamespace::create(&ns).expect("a network namespace");
    let _tap = TapDevice::create(
        &namespace,
        &TapConfig::from_cidr("ebb0", "10.99.0.1/24").expect("an address"),
    )
    .expect("a TAP device");
    for (name, code) in NATIVE_PROGRAMS {
        let program = named(&programs, name);
        let userstack = printed_lines
            .lines()
            .find_map(|line| line.strip_prefix(&format!("userstack {name} ")))
            .unwrap_or_else(|| panic!("ebb-cbuild names {name} on the user-space stack"));
        let hosted = run_hosted(program, &[]);
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &ns, userstack])
            .env("EBB_USERSTACK_TAP", "ebb0")
            .env("EBB_USERSTACK_IP", "10.99.0.2/24");
        let scratch = target_dir().join(format!(
            "posix-programs/userstack-test-{}",
            std::process::id()
        ));
        if name == "files" {
            std::fs::create_dir_all(&scratch).expect("a scratch directory");
            command.arg(&scratch);
        }
        let finished = run_bounded(&mut command, HOSTED_LIMIT);
        if name == "files" {
            std::fs::remove_dir_all(&scratch).expect("removing the scratch directory");
        }
        let text = format!("{}{}", finished.stdout, finished.stderr);
        let ours = printed(name, &text, finished.status.code());
        assert!(!hosted.program.is_empty(), "{name} printed nothing hosted");
        assert_eq!(
            ours.program, hosted.program,
            "{name}'s lines on the user-space stack:\n{text}"
        );
        assert_eq!(
            ours.log, hosted.log,
            "{name}'s log lines on the user-space stack:\n{text}"
        );
        assert_eq!(
            ours.code,
            Some(code),
            "{name}'s exit code on the user-space stack:\n{text}"
        );
    }
}
