//! Native memcached as a user runs it: `./ebb run memcached --native
//! --forward PORT:11211 [LAUNCHER OPTIONS] -- [OPTIONS]`, the launcher and
//! QEMU in their own process group, stopped as a whole when dropped (also
//! when a test fails), the console read line by line.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

/// The repository root (where `./ebb` is).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A booted (or booting) native memcached.
pub struct NativeServer {
    child: Child,
    console: Receiver<String>,
    /// The console lines read so far.
    pub seen: Vec<String>,
}

impl Drop for NativeServer {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-TERM", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

impl NativeServer {
    /// Starts `./ebb run memcached --native` with `launcher` options and
    /// memcached's `args`, and waits for the ready line.
    pub fn start(launcher: &[&str], args: &[&str]) -> NativeServer {
        let mut child = Command::new(root().join("ebb"))
            .args(["run", "memcached", "--native"])
            .args(launcher)
            .arg("--")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn()
            .expect("run ./ebb run memcached --native");
        let stdout = child.stdout.take().expect("stdout");
        let (lines, console) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line.replace('\r', "")).is_err() {
                    break;
                }
            }
        });
        let mut server = NativeServer {
            child,
            console,
            seen: Vec::new(),
        };
        server.wait_for("memcached: ready: listening on 0.0.0.0:11211");
        server
    }

    /// Reads the console until a line starts with `prefix`; panics with
    /// the console if the guest ends or stays silent for 10 minutes
    /// (building the image and booting it under TCG on a busy machine).
    pub fn wait_for(&mut self, prefix: &str) {
        loop {
            match self.console.recv_timeout(Duration::from_secs(600)) {
                Ok(line) => {
                    let found = line.starts_with(prefix);
                    self.seen.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => panic!(
                    "{prefix}: not seen on the console:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }
}
