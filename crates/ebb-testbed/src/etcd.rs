//! A private etcd server for a test or a cluster: one member, on free
//! ports, its data in a temporary directory, killed and its directory
//! deleted on drop, so nothing is left behind.
//!
//! It can be stopped and started again on the same ports and data (the
//! recovery tests play etcd going away mid-run), and it can run inside a
//! network namespace (a cluster's, where `./ebb cluster up` runs its
//! frontend).
//!
//! etcd gets SIGKILL when the thread that started it ends
//! (`PR_SET_PDEATHSIG`, prctl(2)): start it from a thread that lives as
//! long as it should.
//!
//! The flags are etcd 3.4's (Debian's `etcd-server`; see `etcd --help`):
//! one member named `ebb` whose initial cluster is itself.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::need::{on_path, Need};

/// The program, and the Debian package `./ebb` installs it from.
pub const ETCD_PROGRAM: &str = "etcd";

/// How long [`Etcd::start`] waits for a new server to answer: etcd 3.4
/// elects its single member within about a second on an idle host; a busy
/// 2-core host needs more.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The ports etcd uses inside a namespace of its own (nothing else listens
/// there): the IANA-registered client and peer ports.
const NAMESPACE_PORTS: (u16, u16) = (2379, 2380);

/// A running (or stopped) private etcd.
pub struct Etcd {
    child: Option<Child>,
    dir: PathBuf,
    host: Ipv4Addr,
    client_port: u16,
    peer_port: u16,
    namespace: Option<String>,
}

impl Etcd {
    /// Starts etcd on 127.0.0.1 with free ports and waits until it
    /// answers.
    ///
    /// # Errors
    ///
    /// No `etcd` on `PATH` (naming the Debian package), no free port, no
    /// temporary directory, or etcd did not answer within
    /// [`READY_TIMEOUT`] (with the end of its log).
    pub fn start() -> Result<Etcd, String> {
        let client_port = crate::free_port()?;
        let mut peer_port = crate::free_port()?;
        while peer_port == client_port {
            peer_port = crate::free_port()?;
        }
        Etcd::start_on(None, Ipv4Addr::LOCALHOST, client_port, peer_port)
    }

    /// Starts etcd inside network namespace `namespace`, listening on
    /// `host` (an address of that namespace, e.g. 127.0.0.1 or the
    /// frontend's) on ports 2379 and 2380, and waits until it answers.
    ///
    /// # Errors
    ///
    /// As [`Etcd::start`], or the namespace cannot be entered.
    pub fn start_in_namespace(namespace: &str, host: Ipv4Addr) -> Result<Etcd, String> {
        let (client_port, peer_port) = NAMESPACE_PORTS;
        Etcd::start_on(Some(namespace.to_owned()), host, client_port, peer_port)
    }

    fn start_on(
        namespace: Option<String>,
        host: Ipv4Addr,
        client_port: u16,
        peer_port: u16,
    ) -> Result<Etcd, String> {
        if !on_path(ETCD_PROGRAM) {
            return Err(missing_etcd());
        }
        let dir = new_temporary_dir()?;
        let mut etcd = Etcd {
            child: None,
            dir,
            host,
            client_port,
            peer_port,
            namespace,
        };
        etcd.restart()?;
        Ok(etcd)
    }

    /// `HOST:PORT` of the client endpoint (what `--etcd` takes).
    pub fn endpoint(&self) -> String {
        format!("{}:{}", self.host, self.client_port)
    }

    /// The client endpoint's address.
    pub fn client_addr(&self) -> SocketAddr {
        SocketAddr::from((self.host, self.client_port))
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The temporary directory holding its data and log (deleted on drop).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops it (SIGKILL, as a crash would), keeping its data: clients get
    /// refused connections until [`Etcd::restart`].
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports and data (after [`Etcd::stop`];
    /// a running one is stopped first) and waits until it answers.
    ///
    /// # Errors
    ///
    /// It could not be started, or did not answer within
    /// [`READY_TIMEOUT`] (with the end of its log).
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let log_path = self.dir.join("etcd.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let log_too = log
            .try_clone()
            .map_err(|e| format!("cannot duplicate {}: {e}", log_path.display()))?;
        let mut command = match &self.namespace {
            Some(namespace) => {
                let mut command = Command::new("ip");
                command.args(["netns", "exec", namespace, ETCD_PROGRAM]);
                command
            }
            None => Command::new(ETCD_PROGRAM),
        };
        let client_url = format!("http://{}:{}", self.host, self.client_port);
        let peer_url = format!("http://{}:{}", self.host, self.peer_port);
        command
            .args(["--name", "ebb", "--data-dir"])
            .arg(self.dir.join("data"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("ebb={peer_url}")])
            .args(["--log-level", "warn", "--logger", "zap"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_too);
        // SAFETY: the hook runs in the forked child before exec and does
        // only what `die_with_parent` says, which is async-signal-safe.
        unsafe {
            command.pre_exec(die_with_parent);
        }
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {ETCD_PROGRAM}: {e}"))?;
        self.child = Some(child);
        self.wait_until_ready()
    }

    /// Polls `GET /health` until etcd says it is healthy (it has a leader
    /// and serves), it exits, or [`READY_TIMEOUT`] passes.
    fn wait_until_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(format!(
                        "etcd at {} exited at start ({status}); its log ends:\n{}",
                        self.endpoint(),
                        self.log_tail()
                    ));
                }
            }
            let addr = self.client_addr();
            let healthy = match &self.namespace {
                Some(namespace) => {
                    crate::netns::run_inside_named(namespace, || is_healthy(addr)).unwrap_or(false)
                }
                None => is_healthy(addr),
            };
            if healthy {
                return Ok(());
            }
            if Instant::now() >= deadline {
                self.stop();
                return Err(format!(
                    "etcd at {} did not answer within {} s; its log ends:\n{}",
                    self.endpoint(),
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Asks the kernel to SIGKILL this (forked) process when the thread that
/// started it ends, so a frontend killed with SIGKILL leaves no etcd
/// behind (prctl(2) `PR_SET_PDEATHSIG`; kept across exec).
fn die_with_parent() -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes two integers, touches no
    // memory of ours, and is async-signal-safe.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Why etcd cannot be started: the program is missing.
fn missing_etcd() -> String {
    let package = Need::Etcd
        .tool()
        .map_or("etcd-server", |(_, package)| package);
    format!("no {ETCD_PROGRAM} on PATH: install the Debian package {package} (./ebb does)")
}

/// A new, empty directory under the system's temporary directory,
/// `ebb-etcd-PID-N`; first deletes those of processes that are gone (a
/// frontend killed with SIGKILL runs no clean-up: its etcd dies with it,
/// its directory is left for this sweep).
fn new_temporary_dir() -> Result<PathBuf, String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir();
    remove_stale_dirs_in(&base);
    for _ in 0..100 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("ebb-etcd-{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
    }
    Err(format!(
        "cannot create a new ebb-etcd directory in {}",
        base.display()
    ))
}

/// Deletes the data directories of etcds started by processes that are
/// gone (`./ebb cluster down` after a frontend killed with SIGKILL; every
/// launch does it too).
pub fn remove_stale_dirs() {
    remove_stale_dirs_in(&std::env::temp_dir());
}

/// What the etcds this process started left behind, described: running
/// processes whose command line names one of its data directories
/// (`ebb-etcd-PID-N`), and those directories. Empty once every one was
/// stopped and its directory deleted (tests check that they leave none).
pub fn left_by_this_process() -> Vec<String> {
    let ours = format!("ebb-etcd-{}-", std::process::id());
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&ours) {
            left.push(format!(
                "etcd process {} is running",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    let base = std::env::temp_dir();
    for entry in std::fs::read_dir(&base).into_iter().flatten().flatten() {
        if entry.file_name().to_string_lossy().starts_with(&ours) {
            left.push(format!("{} is left", entry.path().display()));
        }
    }
    left
}

/// Deletes the `ebb-etcd-PID-N` directories in `base` whose process is
/// gone (a live process with that id keeps them: never someone else's).
fn remove_stale_dirs_in(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("ebb-etcd-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether etcd at `addr` answers `GET /health` with `"health":"true"`
/// (etcd serves it on the client URL; bounded by short timeouts).
fn is_healthy(addr: SocketAddr) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).contains("\"health\":\"true\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_restarts_and_leaves_nothing() {
        if let Err(skip) = crate::require(&[Need::Etcd]) {
            crate::skip(crate::function_name!(), &skip.reason);
            return;
        }
        let mut etcd = Etcd::start().expect("etcd starts");
        let dir = etcd.dir().to_owned();
        let pid = etcd.pid().expect("running");
        assert!(is_healthy(etcd.client_addr()));
        etcd.stop();
        assert!(!is_healthy(etcd.client_addr()));
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        etcd.restart().expect("etcd restarts");
        assert!(is_healthy(etcd.client_addr()));
        let pid = etcd.pid().expect("running");
        drop(etcd);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert!(!dir.exists(), "{} is left", dir.display());
    }

    #[test]
    fn directories_of_gone_processes_are_swept_and_others_kept() {
        let base = std::env::temp_dir().join(format!("ebb-etcd-sweep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        // No process has an id above the kernel's pid_max (at most 2^22).
        let gone = base.join("ebb-etcd-4194305-0");
        let alive = base.join(format!("ebb-etcd-{}-0", std::process::id()));
        let other = base.join("ebb-etcd-x");
        for dir in [&gone, &alive, &other] {
            std::fs::create_dir_all(dir.join("data")).unwrap();
        }
        remove_stale_dirs_in(&base);
        assert!(!gone.exists());
        assert!(alive.exists() && other.exists());
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_missing_etcd_is_named_with_its_package() {
        assert!(missing_etcd().contains("etcd-server"), "{}", missing_etcd());
    }
}
