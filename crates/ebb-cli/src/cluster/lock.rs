//! One cluster per checkout: `./ebb cluster up` holds an exclusive
//! `flock(2)` on `target/cluster/lock` for its whole life.
//!
//! Checking the state file and then writing it is not enough: two `up`s
//! started together both find no cluster, and then overwrite the same
//! state file and console logs (one cluster's "ready" line could satisfy
//! the other's readiness). The kernel releases a `flock` when its holder
//! ends, however it ends (SIGKILL included), so a lock never outlives its
//! cluster, and it is not inherited by QEMU (Rust opens files close-on-exec).
//! The holder writes its process id into the file, for the second `up`'s
//! error.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock, held until dropped.
#[derive(Debug)]
pub struct ClusterLock {
    _file: File,
}

/// The lock file in the cluster directory `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join("lock")
}

impl ClusterLock {
    /// Takes the lock of the cluster directory `dir`, or says who holds it.
    pub fn acquire(dir: &Path) -> Result<ClusterLock, String> {
        let path = path(dir);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    "another process".to_owned()
                } else {
                    format!("process {holder}")
                };
                return Err(format!(
                    "another ./ebb cluster up ({holder}) runs a cluster from this checkout \
                     (it holds {}); one cluster runs per checkout: stop it first with \
                     ./ebb cluster down",
                    path.display()
                ));
            }
            Err(e) => return Err(format!("cannot lock {}: {e}", path.display())),
        }
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        written.map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(ClusterLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_named_until_it_lets_go() {
        let dir = std::env::temp_dir().join(format!("ebb-cluster-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let first = ClusterLock::acquire(&dir).expect("the first up locks");
        // flock(2) locks belong to the open file, so a second open in the
        // same process conflicts as a second `up` would.
        let err = ClusterLock::acquire(&dir).expect_err("a second up is refused");
        let me = format!("another ./ebb cluster up (process {})", std::process::id());
        assert!(err.contains(&me), "{err}");
        assert!(err.contains("./ebb cluster down"), "{err}");
        drop(first);
        // Free once the first lets go. (Another test of this binary that
        // forks at that instant holds a copy of the descriptor until its
        // child execs, which closes it: hence the retries.)
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while let Err(e) = ClusterLock::acquire(&dir) {
            assert!(std::time::Instant::now() < deadline, "{e}");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
