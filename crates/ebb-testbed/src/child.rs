//! A child process that a test started and that must not outlive it.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Kills and reaps its child when dropped (a test that fails or ends
/// leaves no process behind).
pub struct KilledOnDrop(pub Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Ends its child in order when dropped: SIGTERM, up to `grace` for it to
/// end (a cluster frontend stops its nodes and deletes its namespace
/// then), and only then SIGKILL; reaped either way. For a test whose
/// child owns things a SIGKILL would leave behind.
pub struct TerminatedOnDrop {
    /// The child.
    pub child: Child,
    /// How long it has after SIGTERM.
    pub grace: std::time::Duration,
}

impl Drop for TerminatedOnDrop {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let pid = libc::pid_t::try_from(self.child.id()).unwrap_or(libc::pid_t::MAX);
            // SAFETY: kill(2) with the pid of our own unreaped child (it
            // cannot be reused before we wait) touches no memory.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let deadline = std::time::Instant::now() + self.grace;
            while std::time::Instant::now() < deadline {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a [`run_bounded`] run ended.
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// What it wrote to stdout.
    pub stdout: String,
    /// What it wrote to stderr.
    pub stderr: String,
}

/// Runs `command` in its own process group with stdout and stderr
/// captured; kills the whole group (a build's make and compilers too)
/// and panics if it outlives `limit`.
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
            let group = libc::pid_t::try_from(child.id()).unwrap_or(libc::pid_t::MAX);
            // SAFETY: kill(2) of the process group our unreaped child
            // leads (its id cannot be reused before we wait) touches no
            // memory.
            unsafe { libc::kill(-group, libc::SIGKILL) };
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    fn gone(pid: u32) -> bool {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    }

    #[test]
    fn a_child_is_asked_to_end_first_and_killed_only_when_it_does_not() {
        // Ends on SIGTERM: long before the grace is over.
        let polite = Command::new("sleep").arg("60").spawn().expect("sleep");
        let pid = polite.id();
        let started = Instant::now();
        drop(TerminatedOnDrop {
            child: polite,
            grace: Duration::from_secs(20),
        });
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(gone(pid));
        // Ignores SIGTERM (an ignored signal stays ignored across exec):
        // killed once the grace is over.
        let stubborn = Command::new("sh")
            .args(["-c", "trap '' TERM; exec sleep 60"])
            .spawn()
            .expect("sh");
        let pid = stubborn.id();
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        drop(TerminatedOnDrop {
            child: stubborn,
            grace: Duration::from_millis(500),
        });
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(500), "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert!(gone(pid));
    }

    #[test]
    fn a_bounded_run_captures_both_streams_and_the_status() {
        let finished = run_bounded(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        );
        assert_eq!(finished.status.code(), Some(3));
        assert_eq!(
            (finished.stdout.as_str(), finished.stderr.as_str()),
            ("out\n", "err\n")
        );
    }

    #[test]
    #[should_panic(expected = "took more than")]
    fn a_run_past_its_limit_is_killed_with_its_group() {
        run_bounded(
            Command::new("sh").args(["-c", "sleep 30 & sleep 30"]),
            Duration::from_millis(200),
        );
    }
}
