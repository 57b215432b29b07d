//! Issue 18, hosted: the syscall-group programs of
//! `crates/ebb-posix/programs`, built with Ebbflow's musl and the hosted
//! POSIX personality (`ebb-posix-hosted`), print exactly what the same
//! sources print built for Linux (gcc, glibc), and exit the same way;
//! threads (mutexes, condition variables, TLS, a detached thread that
//! unmaps its own stack) run through `__ebb_clone`; and a call the
//! personality does not provide is `ENOSYS` with one log line per call
//! number, after which the program goes on.
//!
//! Needs what `musl_build.rs` needs (apt with deb-src entries, gcc,
//! make) and the `x86_64-unknown-none` Rust target (`./ebb` installs
//! it); without them it is SKIPPED with the reason.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::{fetch_musl, missing, run_bounded, target_dir, workspace, Finished};

/// musl (cached after the first build), the personality and six small
/// programs built twice, on a loaded two-core machine.
const BUILD_LIMIT: Duration = Duration::from_secs(600);
/// One program's run: the slowest sleeps 40 ms and counts to 400000.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// Each program: built with Ebbflow, built for Linux.
struct Programs(Vec<(String, PathBuf, PathBuf)>);

impl Programs {
    fn get(&self, name: &str) -> (&Path, &Path) {
        let (_, ebbflow, linux) = self
            .0
            .iter()
            .find(|(found, _, _)| found == name)
            .unwrap_or_else(|| panic!("no program {name} was built"));
        (ebbflow, linux)
    }
}

/// Builds the programs with `ebb-cbuild posix-programs`, or says why the
/// test cannot run.
fn build() -> Result<Programs, String> {
    if let Some(reason) = missing(&["apt-get", "dpkg-source", "gcc", "make"]) {
        return Err(reason);
    }
    let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output();
    let has_target = sysroot.is_ok_and(|out| {
        let root = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Path::new(&root)
            .join("lib/rustlib/x86_64-unknown-none")
            .is_dir()
    });
    if !has_target {
        return Err("the Rust target x86_64-unknown-none is not installed".to_owned());
    }
    fetch_musl()?;
    let target = target_dir();
    let mut command = Command::new(env!("CARGO_BIN_EXE_ebb-cbuild"));
    command
        .args(["posix-programs", "--cache"])
        .arg(target.join("debian-src"))
        .arg("--out")
        .arg(target.join("musl"))
        .arg("--target-dir")
        .arg(&target)
        .current_dir(workspace());
    let finished = run_bounded(&mut command, BUILD_LIMIT);
    assert!(
        finished.status.success(),
        "ebb-cbuild posix-programs: {}\n{}{}",
        finished.status,
        finished.stdout,
        finished.stderr
    );
    let programs = finished
        .stdout
        .lines()
        .filter_map(|line| line.strip_prefix("program "))
        .map(|rest| {
            let mut fields = rest.split(' ');
            let mut next = || {
                fields
                    .next()
                    .expect("program NAME EBBFLOW LINUX")
                    .to_owned()
            };
            (next(), PathBuf::from(next()), PathBuf::from(next()))
        })
        .collect();
    Ok(Programs(programs))
}

fn run(program: &Path, args: &[&Path]) -> Finished {
    run_bounded(Command::new(program).args(args), RUN_LIMIT)
}

/// The same output and exit code from both builds, and nothing on the
/// Ebbflow build's standard error.
fn assert_same(name: &str, ours: &Finished, linux: &Finished, exit_code: i32) {
    assert_eq!(ours.stdout, linux.stdout, "{name}: standard output differs");
    assert!(!ours.stdout.contains("FAILED"), "{name}:\n{}", ours.stdout);
    assert_eq!(
        ours.status.code(),
        Some(exit_code),
        "{name}: {}",
        ours.stderr
    );
    assert_eq!(linux.status.code(), Some(exit_code), "{name} on Linux");
    assert_eq!(ours.stderr, "", "{name}: standard error");
}

#[test]
fn syscall_group_programs_print_what_they_print_on_linux() {
    let programs = match build() {
        Ok(programs) => programs,
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    for (name, exit_code) in [
        ("memory", 0),
        ("time", 0),
        ("process", 7),
        ("threads", 0),
        ("redzone", 0),
        ("signals", 0),
        ("events", 0),
        ("math", 0),
    ] {
        let (ebbflow, linux) = programs.get(name);
        assert_same(name, &run(ebbflow, &[]), &run(linux, &[]), exit_code);
    }

    // files works in an empty directory of its own, once per build.
    let (ebbflow, linux) = programs.get("files");
    let scratch = target_dir().join(format!("posix-programs/files-{}", std::process::id()));
    let (ours_dir, linux_dir) = (scratch.join("ebbflow"), scratch.join("linux"));
    for dir in [&ours_dir, &linux_dir] {
        std::fs::create_dir_all(dir).expect("a scratch directory");
    }
    let (ours, reference) = (run(ebbflow, &[&ours_dir]), run(linux, &[&linux_dir]));
    std::fs::remove_dir_all(&scratch).expect("removing the scratch directories");
    assert_same("files", &ours, &reference, 0);
    assert!(ours.stdout.contains("files: the directory holds: nothing"));

    // An unknown call: ENOSYS each time, one log line per number, and on.
    let unknown = run(programs.get("unknown").0, &[]);
    assert_eq!(
        unknown.stdout,
        "unknown: acct: ENOSYS\nunknown: acct again: ENOSYS\nunknown: call 9999: ENOSYS\nunknown: the program went on\n"
    );
    assert_eq!(
        unknown.stderr,
        "ebb-posix: system call 163 (acct) is not provided: ENOSYS (said once per call)\n\
         ebb-posix: system call 9999 (not an x86_64 Linux call) is not provided: ENOSYS (said once)\n"
    );
    assert_eq!(unknown.status.code(), Some(0));
}
