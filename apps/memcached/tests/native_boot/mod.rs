//! Native memcached as a user runs it: `./ebb run memcached --native
//! --forward PORT:11211 [LAUNCHER OPTIONS] -- [OPTIONS]`, stopped with
//! SIGTERM when dropped (also when a test fails: the launcher quits QEMU
//! through QMP and removes what it made), the console read by
//! `ebb_testbed::lines`. The launcher stays in the test's process group,
//! so a signal that stops the test (Ctrl-C, or `./ebb test` stopped)
//! stops it too; in a group of its own it outlived a killed test with its
//! guest running.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ebb_testbed::lines::Lines;

/// The repository root (where `./ebb` is).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A booted native memcached.
pub struct NativeServer {
    child: Child,
    /// Its console.
    pub console: Lines,
}

impl Drop for NativeServer {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

impl NativeServer {
    /// Starts `./ebb run memcached --native` with `launcher` options and
    /// memcached's `args`, and waits (10 minutes at most: building the
    /// image and booting it under TCG on a busy machine) for the ready line.
    pub fn start(launcher: &[&str], args: &[&str]) -> NativeServer {
        let mut child = Command::new(root().join("ebb"))
            .args(["run", "memcached", "--native"])
            .args(launcher)
            .arg("--")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run ./ebb run memcached --native");
        let console = Lines::spawn(child.stdout.take().expect("stdout"), None);
        let mut server = NativeServer { child, console };
        if let Err(why) = server.console.wait_for(
            "memcached: ready: listening on 0.0.0.0:11211",
            Duration::from_secs(600),
        ) {
            panic!("native memcached did not start: {why}");
        }
        server
    }
}
