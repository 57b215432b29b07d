//! When a booted node counts as ready: a trait, since the answer belongs
//! to the layer above.
//!
//! **The hook.** Issue 16 says `allocate` resolves when the node has
//! announced itself to the frontend over the Messenger: that is
//! [`crate::Announced`] (waiting on `ebb_messenger::Frontend::when_announced`),
//! which the frontend runtime ([`crate::frontend`]) hands to
//! [`crate::NodeAllocator::new`]. Nodes of applications that take no boot
//! contract (memcached, hello) use [`ConsoleLine`]: the node is ready when
//! its console shows a line (`APP: ready:`, the line every Ebbflow
//! application prints once it serves, see `ebb_app::ready`). The node's
//! side of the announcement, its boot contract, comes through the other
//! hook, [`crate::BootContract`].

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use ebb_core::NodeId;

/// What a [`Readiness`] may look at while a node boots.
pub struct ReadyProbe<'a> {
    /// The node.
    pub id: NodeId,
    /// Its address on the cluster's network.
    pub address: Ipv4Addr,
    /// Its console log.
    pub console_log: &'a Path,
    /// Whether its VM has ended (then it will never be ready).
    pub ended: &'a (dyn Fn() -> bool + Sync),
}

/// Why a node is not ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReady {
    /// The deadline passed.
    TimedOut,
    /// The node's VM ended first.
    Ended,
    /// The frontend forgot the node (it was stopped) before it was ready.
    Forgotten,
}

/// Decides when a booting node is ready.
pub trait Readiness: Send + Sync {
    /// What is awaited, for messages (`the console line "echo: ready:"`).
    fn awaited(&self) -> String;

    /// Blocks until the node is ready, its VM ends, or `deadline` passes.
    fn wait_ready(&self, node: &ReadyProbe<'_>, deadline: Instant) -> Result<(), NotReady>;
}

/// Ready when a console line contains `needle` (the stand-in until the
/// Messenger's announcement: see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleLine {
    /// The text to find, e.g. `echo: ready:`.
    pub needle: String,
}

impl ConsoleLine {
    /// Ready on the line application `app` prints once it serves.
    pub fn app_ready(app: &str) -> ConsoleLine {
        ConsoleLine {
            needle: format!("{app}: ready:"),
        }
    }
}

/// How often the console log is read while waiting.
const POLL: Duration = Duration::from_millis(25);

impl Readiness for ConsoleLine {
    fn awaited(&self) -> String {
        format!("the console line \"{}\"", self.needle)
    }

    fn wait_ready(&self, node: &ReadyProbe<'_>, deadline: Instant) -> Result<(), NotReady> {
        loop {
            // Read before checking for the end: a node that printed its
            // line and then exited was ready.
            let console = std::fs::read(node.console_log).unwrap_or_default();
            if String::from_utf8_lossy(&console).contains(self.needle.as_str()) {
                return Ok(());
            }
            if (node.ended)() {
                return Err(NotReady::Ended);
            }
            if Instant::now() >= deadline {
                return Err(NotReady::TimedOut);
            }
            std::thread::sleep(POLL);
        }
    }
}

/// The last `lines` lines of a console log (carriage returns removed),
/// or a word that there is none.
pub fn console_tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) if !bytes.is_empty() => {
            let text = String::from_utf8_lossy(&bytes).replace('\r', "");
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Ok(_) => "(the console is empty)".to_owned(),
        Err(e) => format!("(no console log at {}: {e})", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_log(tag: &str, text: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("ebb-cluster-{tag}-{}", std::process::id()));
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn a_console_line_makes_the_node_ready_and_its_absence_times_out_or_ends() {
        let path = temp_log(
            "ready",
            "boot\r\necho: ready: TCP 7007 (1 core, native)\r\n",
        );
        let alive = || false;
        let probe = ReadyProbe {
            id: NodeId(1),
            address: Ipv4Addr::new(10, 96, 0, 2),
            console_log: &path,
            ended: &alive,
        };
        let soon = || Instant::now() + Duration::from_millis(200);
        assert_eq!(
            ConsoleLine::app_ready("echo").wait_ready(&probe, soon()),
            Ok(())
        );
        assert_eq!(
            ConsoleLine::app_ready("hello").wait_ready(&probe, soon()),
            Err(NotReady::TimedOut)
        );
        let dead = || true;
        let probe = ReadyProbe {
            ended: &dead,
            ..probe
        };
        assert_eq!(
            ConsoleLine::app_ready("hello").wait_ready(&probe, soon()),
            Err(NotReady::Ended)
        );
        assert_eq!(
            ConsoleLine::app_ready("hello").awaited(),
            "the console line \"hello: ready:\""
        );
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_tail_is_the_last_lines() {
        let path = temp_log("tail", "a\r\nb\nc\nd\n");
        assert_eq!(console_tail(&path, 2), "c\nd");
        assert_eq!(console_tail(&path, 10), "a\nb\nc\nd");
        let _ = std::fs::remove_file(&path);
        assert!(console_tail(&path, 2).starts_with("(no console log at"));
    }
}
