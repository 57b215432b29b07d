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
//! interrupted stack this program reports them overwritten). Threads
//! (stackful events) come next.
//!
//! Needs QEMU and what `crates/ebb-cbuild/tests/posix_hosted.rs` needs
//! (apt's deb-src entries, gcc, make, the `x86_64-unknown-none` target);
//! without them it is SKIPPED with the reason.

mod native_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ebb_testbed::child::run_bounded;
use ebb_testbed::{skip_unless, Need};
use native_support::{root, BOOT, EBB};

/// musl (cached after the first build), the hosted personality and the
/// programs, on a loaded two-core machine.
const PREPARE_LIMIT: Duration = Duration::from_secs(900);
/// One hosted run (the slowest sleeps 40 ms).
const HOSTED_LIMIT: Duration = Duration::from_secs(60);

/// A program as `ebb-cbuild posix-programs` built it.
struct BuiltProgram {
    name: String,
    /// Linked with musl and the hosted personality.
    ebbflow: PathBuf,
    /// What a native image links (`EBB_C_PROGRAM`).
    native_inputs: String,
}

/// The programs this slice runs natively, and their exit codes.
const NATIVE_PROGRAMS: [(&str, i32); 6] = [
    ("memory", 0),
    ("time", 0),
    ("files", 0),
    ("process", 7),
    ("unknown", 0),
    ("redzone", 0),
];

/// `files` works in the directory it is given, which must be empty.
const NATIVE_SCRATCH: &str = "/tmp";

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The programs, built by `ebb-cbuild posix-programs` (through cargo, in
/// its own process group, killed whole past its limit); `Err(reason)`
/// when the machine cannot build them.
fn prepare() -> Result<Vec<BuiltProgram>, String> {
    if let Some(tool) = ["apt-get", "dpkg-source", "gcc", "make"]
        .into_iter()
        .find(|tool| !on_path(tool))
    {
        return Err(format!("no {tool}"));
    }
    let target = target_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .args(["run", "--release", "--quiet", "-p", "ebb-cbuild", "--"])
        .args(["posix-programs", "--target-dir"])
        .arg(&target)
        .arg("--cache")
        .arg(target.join("debian-src"))
        .arg("--out")
        .arg(target.join("musl"))
        .current_dir(root());
    let finished = run_bounded(&mut command, PREPARE_LIMIT);
    if !finished.status.success() {
        // Status 3: apt cannot provide musl's source (no deb-src entries,
        // no network), a reason to skip (ebb-cbuild's usage).
        if finished.status.code() == Some(3) {
            return Err(finished.stderr.trim().to_owned());
        }
        panic!(
            "ebb-cbuild posix-programs: {}\n{}{}",
            finished.status, finished.stdout, finished.stderr
        );
    }
    let field = |line: &str, kind: &str| -> Option<(String, String)> {
        let rest = line.strip_prefix(kind)?.strip_prefix(' ')?;
        let (name, rest) = rest.split_once(' ')?;
        Some((name.to_owned(), rest.to_owned()))
    };
    let mut programs = Vec::new();
    for line in finished.stdout.lines() {
        if let Some((name, rest)) = field(line, "program") {
            let ebbflow = PathBuf::from(rest.split(' ').next().unwrap_or_default());
            programs.push(BuiltProgram {
                name,
                ebbflow,
                native_inputs: String::new(),
            });
        } else if let Some((name, inputs)) = field(line, "native") {
            if let Some(program) = programs.iter_mut().find(|program| program.name == name) {
                program.native_inputs = inputs;
            }
        }
    }
    Ok(programs)
}

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

fn run_hosted(program: &BuiltProgram, args: &[&str]) -> Printed {
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

fn run_native(program: &BuiltProgram, args: &[&str]) -> (Printed, String) {
    let mut command = Command::new(EBB);
    command.args(["run", "c-program", "--native", "--timeout", "120"]);
    if program.name == "redzone" {
        // The platform says how many ticks the program took (below).
        command.arg("--verbose");
    }
    command.arg("--");
    if program.name == "files" {
        command.arg(NATIVE_SCRATCH);
    }
    command.args(args);
    let output = command
        .env("EBB_ROOT", root())
        .env("EBB_C_PROGRAM", &program.native_inputs)
        .output()
        .expect("running ebb-cli");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (printed(&program.name, &text, output.status.code()), text)
}

#[test]
fn syscall_group_programs_print_the_same_natively_and_hosted() {
    skip_unless!(Need::Qemu);
    let programs = match prepare() {
        Ok(programs) => programs,
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    let _boot = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    for (name, code) in NATIVE_PROGRAMS {
        let program = programs
            .iter()
            .find(|program| program.name == name)
            .unwrap_or_else(|| panic!("no program {name} was built"));
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
    let exitcode = programs
        .iter()
        .find(|program| program.name == "exitcode")
        .expect("the exitcode program was built");
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
}
