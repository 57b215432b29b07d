//! What the tests that build C with `ebb-cbuild` share: where cargo's
//! target directory is, musl's source fetched in bounded time (or the
//! reason to skip), and (from `ebb-testbed`) child processes run in their
//! own process group, killed whole when they outlive their limit.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

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

// Each test binary uses its own part.
#[allow(unused_imports)]
pub use ebb_testbed::child::{run_bounded, Finished};

/// A path `ebb-cbuild` printed as `LABEL PATH`.
pub fn printed_path(output: &str, label: &str) -> PathBuf {
    let prefix = format!("{label} ");
    output
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no {label} line in:\n{output}"))
}
