//! Issue 18: SQLite, unchanged (Debian's `sqlite3` source package, 0
//! changed lines), runs its own benchmark, `test/speedtest1.c`, to the
//! same results three ways: built for Linux (gcc, glibc), built with
//! Ebbflow's musl as a Linux process (the hosted personality), and as a
//! native image whose database lives in Ebbflow's in-memory file system
//! (`./ebb run c-program --native`). Same results: the same tests, and
//! the same `--verify` hash over every row the tests read. No system call
//! SQLite makes is left unprovided (no `ebb-posix:` line).
//!
//! Needs QEMU, apt's deb-src entries, gcc, make and tclsh (SQLite's
//! amalgamation); without them it is SKIPPED with the reason.

mod native_support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ebb_testbed::child::{run_bounded, Finished};
use ebb_testbed::{skip_unless, Need};
use native_support::{root, BOOT, EBB};

/// musl, the personality and SQLite (the amalgamation and its compile are
/// minutes on two cores; cached after the first time).
const PREPARE_LIMIT: Duration = Duration::from_secs(1500);
/// A speedtest1 run of this size as a process (under a second).
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// speedtest1's relative size: small enough for TCG (about 10 s).
const SIZE: &str = "5";

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// speedtest1 built three ways.
struct Built {
    ebbflow: PathBuf,
    linux: PathBuf,
    native_inputs: String,
}

/// `ebb-cbuild sqlite` (through cargo, bounded); `Err(reason)` when the
/// machine cannot build it.
fn prepare() -> Result<Built, String> {
    let tools = ["apt-get", "dpkg-source", "gcc", "make", "tclsh"];
    if let Some(tool) = tools.into_iter().find(|tool| !on_path(tool)) {
        return Err(format!("no {tool}"));
    }
    let target = target_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .args(["run", "--release", "--quiet", "-p", "ebb-cbuild", "--"])
        .args(["sqlite", "--target-dir"])
        .arg(&target)
        .arg("--cache")
        .arg(target.join("debian-src"))
        .arg("--out")
        .arg(target.join("musl"))
        .current_dir(root());
    let finished = run_bounded(&mut command, PREPARE_LIMIT);
    if finished.status.code() == Some(3) {
        // apt cannot provide the sources (ebb-cbuild's usage).
        return Err(finished.stderr.trim().to_owned());
    }
    assert!(
        finished.status.success(),
        "ebb-cbuild sqlite: {}\n{}{}",
        finished.status,
        finished.stdout,
        finished.stderr
    );
    assert!(
        finished
            .stdout
            .lines()
            .any(|line| line == "changed lines against upstream: 0"),
        "SQLite is built unchanged:\n{}",
        finished.stdout
    );
    let after = |prefix: &str| {
        finished
            .stdout
            .lines()
            .find_map(|line| line.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in:\n{}", finished.stdout))
            .to_owned()
    };
    let programs = after("speedtest1 ");
    let (ebbflow, linux) = programs.split_once(' ').expect("speedtest1 EBBFLOW LINUX");
    Ok(Built {
        ebbflow: PathBuf::from(ebbflow),
        linux: PathBuf::from(linux),
        native_inputs: after("native speedtest1 "),
    })
}

/// What speedtest1 found, without its timings: each test's number and
/// name (` 100 - 2500 INSERTs into table with no index`), and the
/// `Verification Hash` over the rows the tests read.
fn results(output: &str) -> Vec<String> {
    output
        .lines()
        .map(|line| line.trim_end_matches('\r'))
        .filter_map(|line| {
            if line.starts_with("Verification Hash:") {
                return Some(line.trim_end().to_owned());
            }
            let (number, rest) = line.trim_start().split_once(" - ")?;
            number.parse::<u32>().ok()?;
            let name = rest.split("..").next()?;
            Some(format!("{number} - {name}"))
        })
        .collect()
}

fn process(program: &PathBuf, database: &PathBuf) -> Finished {
    let finished = run_bounded(
        Command::new(program)
            .args(["--size", SIZE, "--verify"])
            .arg(database),
        RUN_LIMIT,
    );
    assert!(
        finished.status.success(),
        "{}: {}\n{}{}",
        program.display(),
        finished.status,
        finished.stdout,
        finished.stderr
    );
    finished
}

#[test]
fn speedtest1_gives_the_same_results_on_linux_hosted_and_native() {
    skip_unless!(Need::Qemu);
    let built = match prepare() {
        Ok(built) => built,
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    let scratch = target_dir().join(format!("sqlite/test-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let linux = process(&built.linux, &scratch.join("linux.db"));
    let hosted = process(&built.ebbflow, &scratch.join("hosted.db"));
    std::fs::remove_dir_all(&scratch).expect("removing the scratch directory");

    let expected = results(&linux.stdout);
    assert!(
        expected.len() > 20
            && expected
                .last()
                .is_some_and(|line| line.starts_with("Verification Hash:")),
        "speedtest1 on Linux:\n{}",
        linux.stdout
    );
    assert_eq!(
        results(&hosted.stdout),
        expected,
        "hosted:\n{}",
        hosted.stdout
    );
    assert!(
        !hosted.stderr.contains("ebb-posix:"),
        "hosted: {}",
        hosted.stderr
    );

    let _boot = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let output = Command::new(EBB)
        .args(["run", "c-program", "--native", "--timeout", "600", "--"])
        .args(["--size", SIZE, "--verify", "/tmp/native.db"])
        .env("EBB_ROOT", root())
        .env("EBB_C_PROGRAM", &built.native_inputs)
        .output()
        .expect("running ebb-cli");
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(output.status.code(), Some(0), "natively:\n{console}");
    assert_eq!(results(&console), expected, "natively:\n{console}");
    assert!(!console.contains("ebb-posix:"), "natively:\n{console}");
}
