//! `./ebb run APP --native ...` started as a user starts it, for the tests
//! that boot a guest: the launcher process, stopped with SIGTERM if a test
//! fails early, and its output as lines.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

/// The launcher (and QEMU under it), stopped if the test fails early.
pub struct Launcher(pub Child);

impl Drop for Launcher {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .status();
            let _ = self.0.wait();
        }
    }
}

/// Runs `ebb-cli` with `args` in this repository, and the lines of its
/// standard output and error (carriage returns removed) as they come.
pub fn launch(args: &[&str]) -> (Launcher, mpsc::Receiver<String>) {
    let child = Command::new(env!("CARGO_BIN_EXE_ebb-cli"))
        .args(args)
        .env(
            "EBB_ROOT",
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ebb-cli");
    let mut launcher = Launcher(child);
    let (lines, output) = mpsc::channel();
    for stream in [
        Box::new(launcher.0.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
        Box::new(launcher.0.stderr.take().expect("stderr")),
    ] {
        let lines = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = lines.send(line.replace('\r', ""));
            }
        });
    }
    (launcher, output)
}
