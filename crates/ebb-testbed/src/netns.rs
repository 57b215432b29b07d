//! Network namespaces (QEMU-NOTES: every TAP device, the guest using it
//! and its clients live in a namespace we create and delete ourselves).
//!
//! [`NetNamespace`] runs `ip netns add` and deletes the namespace on drop
//! (with every interface inside it), also when a test fails or a benchmark
//! returns early; processes started with [`NetNamespace::spawn`] are
//! killed first. [`NetNamespace::for_this_process`] names it
//! `ebb-PID-TAG-N` and first deletes such namespaces whose process is gone
//! (a run that was killed). [`NetNamespace::run_inside`] runs a closure on
//! a thread that entered the namespace, so the sockets it opens (a probe,
//! a load generator) live there.

use std::io;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Where `ip netns` keeps its namespaces.
pub const NETNS_DIR: &str = "/run/netns";
/// The prefix of the namespaces [`NetNamespace::for_this_process`] names.
const PREFIX: &str = "ebb-";

/// Runs `ip ARGS...`; its stdout, or an error with its stderr.
pub fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` ({e}): ./ebb installs Debian's iproute2"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A network namespace owned by this process; deleted on drop.
#[derive(Debug)]
pub struct NetNamespace {
    name: String,
    /// Who says "deleted namespace X" on drop (e.g. `ebb`), if anyone.
    announce: Option<String>,
    children: Mutex<Vec<Child>>,
}

impl NetNamespace {
    /// Creates namespace `name` with its loopback up.
    pub fn create(name: &str) -> Result<NetNamespace, String> {
        if name.is_empty() || name.contains('/') {
            return Err(format!("'{name}' cannot name a network namespace"));
        }
        ip(&["netns", "add", name]).map_err(|e| format!("{e} (namespaces need root)"))?;
        // From here on, drop deletes it.
        let namespace = NetNamespace {
            name: name.to_owned(),
            announce: None,
            children: Mutex::new(Vec::new()),
        };
        namespace.ip(&["link", "set", "lo", "up"])?;
        Ok(namespace)
    }

    /// Creates `ebb-PID-TAG-N` (`tag`: letters, digits and `-`; `N` counts
    /// this process's namespaces), after deleting the `ebb-PID-*`
    /// namespaces of processes that are gone.
    pub fn for_this_process(tag: &str) -> Result<NetNamespace, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        if tag.is_empty() || !tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(format!(
                "namespace tag '{tag}' must be letters, digits and -"
            ));
        }
        remove_stale();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        NetNamespace::create(&format!("{PREFIX}{}-{tag}-{n}", std::process::id()))
    }

    /// Says `WHO: deleted namespace NAME` (or how to delete it by hand)
    /// when dropped: for namespaces a user sees.
    #[must_use]
    pub fn announce_deletion(mut self, who: &str) -> Self {
        self.announce = Some(who.to_owned());
        self
    }

    /// The namespace's name, for `ip netns exec NAME`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME ARGS...`; its stdout.
    pub fn ip(&self, args: &[&str]) -> Result<String, String> {
        let mut words = vec!["-n", self.name.as_str()];
        words.extend_from_slice(args);
        ip(&words)
    }

    /// `ip netns exec NAME PROGRAM`: add arguments and run it. The program
    /// execs in place of `ip`, so the child's process id is the program's.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command.args(["netns", "exec", &self.name]).arg(program);
        command
    }

    /// Runs `program args...` inside the namespace to completion; its
    /// stdout, or an error with its stderr.
    pub fn exec(&self, command: &[&str]) -> Result<String, String> {
        let mut args = vec!["netns", "exec", &self.name];
        args.extend_from_slice(command);
        ip(&args)
    }

    /// Starts `command` (made with [`NetNamespace::command`]) and keeps it:
    /// it is killed before the namespace is deleted. Returns its stdout and
    /// stderr when they were piped.
    pub fn spawn(
        &self,
        command: &mut Command,
    ) -> io::Result<(
        Option<std::process::ChildStdout>,
        Option<std::process::ChildStderr>,
    )> {
        let mut child = command.stdin(Stdio::null()).spawn()?;
        let streams = (child.stdout.take(), child.stderr.take());
        self.children
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(child);
        Ok(streams)
    }

    /// Runs `work` on a new thread that has entered the namespace (setns(2)
    /// changes only the calling thread's network namespace); its result.
    pub fn run_inside<R: Send>(&self, work: impl FnOnce() -> R + Send) -> Result<R, String> {
        run_inside_named(&self.name, work)
    }
}

/// [`NetNamespace::run_inside`] for a namespace another process made
/// (`./ebb run --net tap`'s, named in its output).
pub fn run_inside_named<R: Send>(name: &str, work: impl FnOnce() -> R + Send) -> Result<R, String> {
    let path = format!("{NETNS_DIR}/{name}");
    let file = std::fs::File::open(&path).map_err(|e| format!("cannot open {path}: {e}"))?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: setns(2) takes a namespace descriptor we opened
                // and keep open for the call; it switches only this new
                // thread's network namespace, which no other thread shares.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                if rc != 0 {
                    return Err(format!("setns into {path}: {}", io::Error::last_os_error()));
                }
                Ok(work())
            })
            .join()
            .map_err(|_| format!("the work inside {path} panicked"))?
    })
}

impl Drop for NetNamespace {
    fn drop(&mut self) {
        let children = self
            .children
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for child in children.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Deleting the namespace also removes the interfaces inside it.
        let deleted = ip(&["netns", "del", &self.name]);
        match (&self.announce, deleted) {
            (Some(who), Ok(_)) => eprintln!("{who}: deleted namespace {}", self.name),
            (Some(who), Err(_)) => eprintln!(
                "{who}: could not delete namespace {0}: run `ip netns del {0}`",
                self.name
            ),
            (None, Err(e)) => eprintln!("warning: {e}"),
            (None, Ok(_)) => {}
        }
    }
}

/// Whether a namespace called `name` exists.
pub fn exists(name: &str) -> bool {
    std::path::Path::new(NETNS_DIR).join(name).exists()
}

/// The inode of namespace `name` (what `/proc/PID/ns/net` links to as
/// `net:[INODE]`), while it exists: it names the namespace also after
/// its name is deleted.
pub fn inode(name: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(std::path::Path::new(NETNS_DIR).join(name))
        .ok()
        .map(|metadata| metadata.ino())
}

/// The processes still in the network namespace with inode `inode` (a
/// namespace whose name was deleted lives on while a process is in it,
/// and with it its devices).
pub fn holders(inode: u64) -> Vec<u32> {
    let wanted = format!("net:[{inode}]");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|link| link.to_string_lossy() == wanted)
        })
        .collect()
}

/// The process id in an `ebb-PID-TAG...` name.
fn owner_pid(name: &str) -> Option<u32> {
    name.strip_prefix(PREFIX)?.split('-').next()?.parse().ok()
}

/// Deletes `ebb-PID-*` namespaces whose process is gone.
fn remove_stale() {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = owner_pid(&name) {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = ip(&["netns", "del", &name]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_are_read_from_names() {
        assert_eq!(owner_pid("ebb-1234-linux-0"), Some(1234));
        assert_eq!(owner_pid("ebb-memcached-1234"), None);
        assert_eq!(owner_pid("other-1234"), None);
    }

    #[test]
    fn bad_names_and_tags_are_refused_before_anything_runs() {
        assert!(
            matches!(NetNamespace::create("a/b"), Err(e) if e.contains("cannot name a network namespace"))
        );
        assert!(
            matches!(NetNamespace::create(""), Err(e) if e.contains("cannot name a network namespace"))
        );
        let err = NetNamespace::for_this_process("a b").expect_err("bad tag");
        assert!(err.contains("letters, digits"), "{err}");
    }
}
