//! What the tests that build C with `ebb-cbuild` share: where cargo's
//! target directory is, musl's source fetched in bounded time (or the
//! reason to skip), and child processes run in their own process group,
//! killed whole when they outlive their limit.

#![allow(dead_code)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ebb_cbuild::debian_source::{self, SourceError, SourceTree};

/// apt-get source: listing, download (1 MB) and unpacking.
pub const FETCH_LIMIT: Duration = Duration::from_secs(300);

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Cargo's target directory: `CARGO_TARGET_DIR` if set, as cargo does.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from)
}

/// Whether `program` is on the path.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The first of `programs` not on the path, as a reason to skip.
pub fn missing(programs: &[&str]) -> Option<String> {
    programs
        .iter()
        .find(|program| !on_path(program))
        .map(|program| format!("no {program}"))
}

/// Fetches musl's source, bounded in time; `Err(reason)` when apt cannot
/// (no deb-src entry, no network): the test is then skipped.
pub fn fetch_musl() -> Result<SourceTree, String> {
    let cache = target_dir().join("debian-src");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(debian_source::fetch("musl", &cache));
    });
    match receiver.recv_timeout(FETCH_LIMIT) {
        Ok(Ok(tree)) => Ok(tree),
        Ok(Err(error @ (SourceError::NoDebSrc(_) | SourceError::Download { .. }))) => {
            Err(error.to_string())
        }
        Ok(Err(other)) => panic!("fetching musl: {other}"),
        Err(_) => panic!("fetching musl took more than {FETCH_LIMIT:?}"),
    }
}

/// How a bounded run ended.
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// What it wrote to stdout.
    pub stdout: String,
    /// What it wrote to stderr.
    pub stderr: String,
}

/// Runs `command` in its own process group with stdout and stderr
/// captured; kills the whole group (make and compilers included) and
/// panics if it outlives `limit`.
pub fn run_bounded(command: &mut Command, limit: Duration) -> Finished {
    let described = format!("{command:?}");
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {described}: {e}"));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = reader(Box::new(child.stdout.take().expect("piped")));
    let stderr = reader(Box::new(child.stderr.take().expect("piped")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break status;
        }
        if started.elapsed() > limit {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
            panic!("{described} took more than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Finished {
        status,
        stdout: stdout.join().expect("reading stdout"),
        stderr: stderr.join().expect("reading stderr"),
    }
}

/// A path `ebb-cbuild` printed as `LABEL PATH`.
pub fn printed_path(output: &str, label: &str) -> PathBuf {
    let prefix = format!("{label} ");
    output
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no {label} line in:\n{output}"))
}
