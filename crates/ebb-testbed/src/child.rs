//! A child process that a test started and that must not outlive it.

use std::process::Child;

/// Kills and reaps its child when dropped (a test that fails or ends
/// leaves no process behind).
pub struct KilledOnDrop(pub Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
