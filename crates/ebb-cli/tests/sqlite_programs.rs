//! Issue 18: SQLite, unchanged (Debian's `sqlite3` source package, 0
//! changed lines), gives the same results three ways: built for Linux
//! (gcc, glibc), built with Ebbflow's musl as a Linux process (the hosted
//! personality), and as a native image whose database lives in Ebbflow's
//! in-memory file system (`./ebb run c-program --native`):
//! - its own benchmark, `test/speedtest1.c`: the same tests and the same
//!   `--verify` hash over every row the tests read;
//! - the key-value load `apps/sqlite-kv` (50 % reads and 100 % reads):
//!   the same database checksum and the same checksum of what was read.
//!
//! No system call SQLite makes is left unprovided (no `ebb-posix:` line).
//!
//! Needs QEMU, apt's deb-src entries, gcc, make and tclsh (SQLite's
//! amalgamation); without them it is SKIPPED with the reason.

mod c_support;
mod native_support;

use std::path::PathBuf;
use std::time::Duration;

use c_support::{named, target_dir, Built};
use ebb_testbed::child::{run_bounded, Finished};
use ebb_testbed::{skip_unless, Need};
use native_support::BOOT;

/// musl, the personality and SQLite (the amalgamation and its compile are
/// minutes on two cores; cached after the first time).
const PREPARE_LIMIT: Duration = Duration::from_secs(1500);
/// A speedtest1 run of this size as a process (under a second).
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// speedtest1's relative size: small enough for TCG (about 10 s).
const SIZE: &str = "5";

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

fn process(program: &PathBuf, args: &[&str], database: &PathBuf) -> Finished {
    let finished = run_bounded(
        std::process::Command::new(program).args(args).arg(database),
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

/// The native image's run of `built` with `args`: its exit code and
/// console.
fn native(built: &Built, args: &[&str]) -> (Option<i32>, String) {
    c_support::run_native(built, &[], args)
}

/// sqlite-kv's checksum line (the rest are timings).
fn checksums(output: &str) -> Vec<String> {
    output
        .lines()
        .map(|line| line.trim_end_matches('\r'))
        .filter(|line| line.starts_with("sqlite-kv: rows "))
        .map(str::to_owned)
        .collect()
}

/// Where the hosted runs keep their databases: tmpfs where there is one
/// (as the Linux baseline does), so fsync costs no disk.
fn scratch() -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        target_dir()
    };
    base.join(format!("ebb-sqlite-test-{}", std::process::id()))
}

/// `built`'s hosted run and its native run with `native_args` print
/// `expected` as `extract` reads it, with no log line of the personality,
/// and the native one exits 0.
fn assert_same_hosted_and_native(
    built: &Built,
    expected: &[String],
    extract: fn(&str) -> Vec<String>,
    hosted: &Finished,
    native_args: &[&str],
) {
    let name = &built.name;
    assert_eq!(
        extract(&hosted.stdout),
        expected,
        "{name} hosted:\n{}",
        hosted.stdout
    );
    assert!(
        !hosted.stderr.contains("ebb-posix:"),
        "{name} hosted: {}",
        hosted.stderr
    );
    let (code, console) = native(built, native_args);
    assert_eq!(code, Some(0), "{name} natively:\n{console}");
    assert_eq!(extract(&console), expected, "{name} natively:\n{console}");
    assert!(
        !console.contains("ebb-posix:"),
        "{name} natively:\n{console}"
    );
}

#[test]
fn sqlite_programs_give_the_same_results_on_linux_hosted_and_native() {
    skip_unless!(Need::Qemu);
    let tools = ["apt-get", "dpkg-source", "gcc", "make", "tclsh"];
    let programs = match c_support::build("sqlite", &tools, PREPARE_LIMIT) {
        Ok((programs, printed)) => {
            assert!(
                printed
                    .lines()
                    .any(|line| line == "changed lines against upstream: 0"),
                "SQLite is built unchanged:\n{printed}"
            );
            programs
        }
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    let scratch = scratch();
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let _boot = BOOT.lock().unwrap_or_else(|e| e.into_inner());

    // speedtest1.
    let speedtest = ["--size", SIZE, "--verify"];
    let built = named(&programs, "speedtest1");
    let linux = process(
        &built.linux,
        &speedtest,
        &scratch.join("speedtest-linux.db"),
    );
    let hosted = process(
        &built.ebbflow,
        &speedtest,
        &scratch.join("speedtest-hosted.db"),
    );
    let expected = results(&linux.stdout);
    assert!(
        expected.len() > 20
            && expected
                .last()
                .is_some_and(|line| line.starts_with("Verification Hash:")),
        "speedtest1 on Linux:\n{}",
        linux.stdout
    );
    let native_args = [&speedtest[..], &["/tmp/speedtest.db"]].concat();
    assert_same_hosted_and_native(built, &expected, results, &hosted, &native_args);

    // sqlite-kv, both mixes.
    let built = named(&programs, "sqlite-kv");
    for reads in ["50", "100"] {
        let load = [
            "--records",
            "2000",
            "--operations",
            "2000",
            "--runs",
            "2",
            "--reads",
            reads,
        ];
        let database = |side: &str| scratch.join(format!("kv-{reads}-{side}.db"));
        let linux = process(&built.linux, &load, &database("linux"));
        let hosted = process(&built.ebbflow, &load, &database("hosted"));
        let expected = checksums(&linux.stdout);
        assert_eq!(expected.len(), 1, "sqlite-kv on Linux:\n{}", linux.stdout);
        let native_args = [&load[..], &["/tmp/kv.db"]].concat();
        assert_same_hosted_and_native(built, &expected, checksums, &hosted, &native_args);
    }
    std::fs::remove_dir_all(&scratch).expect("removing the scratch directory");
}
