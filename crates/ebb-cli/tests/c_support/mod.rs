//! What the tests of C programs share (issue 18): the programs built by
//! `ebb-cbuild` (through cargo, in its own process group, killed whole
//! past its limit) and parsed from its `program NAME EBBFLOW LINUX` and
//! `native NAME INPUTS` lines, and a native image of one booted with
//! `./ebb run c-program --native`.

#![allow(dead_code)] // each test binary uses its own part

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ebb_testbed::child::run_bounded;

use crate::native_support::{root, EBB};

/// A C program, built three ways.
pub struct Built {
    /// Its name.
    pub name: String,
    /// Linked with musl and the hosted personality.
    pub ebbflow: PathBuf,
    /// Built for Linux (gcc, glibc).
    pub linux: PathBuf,
    /// What a native image links (`EBB_C_PROGRAM`).
    pub native_inputs: String,
}

/// Cargo's target directory: `CARGO_TARGET_DIR` if set, as cargo does.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// `ebb-cbuild COMMAND` (`posix-programs`, `sqlite` or `redis`), bounded by
/// `limit`, after checking for `tools`; the programs it built and all it
/// printed, or `Err(reason)` when the machine cannot build them (a
/// missing tool, or its status 3: apt cannot provide the sources).
pub fn build(
    command: &str,
    tools: &[&str],
    limit: Duration,
) -> Result<(Vec<Built>, String), String> {
    if let Some(tool) = tools.iter().find(|tool| !on_path(tool)) {
        return Err(format!("no {tool}"));
    }
    let target = target_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cargo_run = Command::new(cargo);
    cargo_run
        .args([
            "run",
            "--release",
            "--quiet",
            "-p",
            "ebb-cbuild",
            "--",
            command,
        ])
        .arg("--target-dir")
        .arg(&target)
        .arg("--cache")
        .arg(target.join("debian-src"))
        .arg("--out")
        .arg(target.join("musl"))
        .current_dir(root());
    let finished = run_bounded(&mut cargo_run, limit);
    if finished.status.code() == Some(3) {
        return Err(finished.stderr.trim().to_owned());
    }
    assert!(
        finished.status.success(),
        "ebb-cbuild {command}: {}\n{}{}",
        finished.status,
        finished.stdout,
        finished.stderr
    );
    let mut built: Vec<Built> = Vec::new();
    for line in finished.stdout.lines() {
        let mut words = line.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("program"), Some(name), Some(rest)) => {
                let (ebbflow, linux) = rest.split_once(' ').expect("program NAME EBBFLOW LINUX");
                built.push(Built {
                    name: name.to_owned(),
                    ebbflow: PathBuf::from(ebbflow),
                    linux: PathBuf::from(linux),
                    native_inputs: String::new(),
                });
            }
            (Some("native"), Some(name), Some(inputs)) => {
                if let Some(program) = built.iter_mut().find(|program| program.name == name) {
                    program.native_inputs = inputs.to_owned();
                }
            }
            _ => {}
        }
    }
    assert!(
        built
            .iter()
            .all(|program| !program.native_inputs.is_empty()),
        "every program has its native inputs:\n{}",
        finished.stdout
    );
    Ok((built, finished.stdout))
}

/// The program called `name` of `built`.
pub fn named<'a>(built: &'a [Built], name: &str) -> &'a Built {
    built
        .iter()
        .find(|program| program.name == name)
        .unwrap_or_else(|| panic!("no program {name} was built"))
}

/// `./ebb run c-program --native LAUNCHER... -- ARGS` with `program`
/// linked in: its exit code and everything it printed (the launcher's
/// own timeout bounds it).
pub fn run_native(program: &Built, launcher: &[&str], args: &[&str]) -> (Option<i32>, String) {
    let mut command = Command::new(EBB);
    command.args(["run", "c-program", "--native", "--timeout", "600"]);
    let output = command
        .args(launcher)
        .arg("--")
        .args(args)
        .env("EBB_ROOT", root())
        .env("EBB_C_PROGRAM", &program.native_inputs)
        .output()
        .expect("running ebb-cli");
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code(), console)
}
