//! The hosted half of `./ebb bench redis-vm` (`ratio_hosted`): our Redis
//! on Ebbflow's user-space stack against stock Redis on kernel TCP, in the
//! benchmark's namespace, over its TAP device, after the guests are done
//! with it.
//!
//! - **Ours**: `redis-server-userstack` (what `./ebb run redis
//!   --userstack` runs: the same Redis objects, linked with
//!   `ebb-posix-userstack`) attaches to the bench's TAP device and takes
//!   the guests' address and MAC (the kernel's side keeps a permanent
//!   neighbour entry for them). The client's packets cross the TAP device
//!   into our process; our replies cross it back.
//! - **Stock**: Debian's Redis 7.0.15 (`redis-tools`' binary, which is
//!   the server when called `redis-server`; the same binary the Linux
//!   guest runs) on the kernel's side address of the same TAP device. The
//!   kernel reaches its own address over loopback, so stock's packets do
//!   not cross the TAP device: the baseline `./ebb bench tcp` uses for
//!   memcached, and the one a Linux user would have (kernel TCP, no TAP
//!   in the way).
//!
//! Both run pinned to [`QEMU_CPU`] at nice [`NICE`] with the client on
//! [`CLIENT_CPU`], without persistence and with protected mode off.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::vm::{CLIENT_CPU, NICE, QEMU_CPU};

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// Ours on the user-space stack.
    Ours,
    /// Stock Redis on kernel TCP.
    Stock,
}

impl Which {
    /// Its name in keys and output.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Which::Ours => "ours",
            Which::Stock => "stock",
        }
    }
}

/// Debian's `redis-tools` ships the server as `redis-check-rdb` (one
/// binary; Redis picks its part by the name it is called with).
pub const DEBIAN_REDIS: &str = "/usr/bin/redis-check-rdb";

/// How long a server may take to answer its first PING.
const START_LIMIT: Duration = Duration::from_secs(30);

/// A server running in the namespace, killed when dropped.
pub struct Running {
    child: Child,
    /// Where it listens.
    pub addr: Ipv4Addr,
    /// Its port.
    pub port: u16,
    log: PathBuf,
}

impl Running {
    /// The server's process id (`ip netns exec`, `taskset` and `nice`
    /// exec, so it is the child's).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last lines of its output.
    #[must_use]
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// What to start: the server's binary, and for ours the TAP device, the
/// address with its prefix length and the MAC it takes.
pub struct Start<'a> {
    /// Ours or stock.
    pub which: Which,
    /// The executable (for stock, a link named `redis-server` to
    /// [`DEBIAN_REDIS`]: see [`stock_binary`]).
    pub binary: &'a Path,
    /// The namespace's name.
    pub namespace: &'a str,
    /// The address it serves on.
    pub addr: Ipv4Addr,
    /// Ours: the TAP device, the prefix length and the MAC.
    pub tap: Option<(&'a str, u8, &'a str)>,
}

/// The server's command line: in the namespace, pinned and niced, port
/// 6379, in memory only, protected mode off.
#[must_use]
pub fn command(start: &Start<'_>) -> Command {
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", start.namespace])
        .args(["taskset", "-c", &QEMU_CPU.to_string()])
        .args(["nice", "-n", &NICE.to_string()])
        .arg(start.binary)
        .args(["--port", "6379", "--save", "", "--appendonly", "no"])
        .args(["--protected-mode", "no", "--daemonize", "no"]);
    match start.tap {
        Some((tap, prefix_len, mac)) => {
            command
                .env("EBB_USERSTACK_TAP", tap)
                .env("EBB_USERSTACK_IP", format!("{}/{prefix_len}", start.addr))
                .env("EBB_USERSTACK_MAC", mac);
        }
        None => {
            command.args(["--bind", &start.addr.to_string()]);
        }
    }
    command
}

/// Starts the server and waits for its first PONG (`redis-cli` in the
/// namespace).
///
/// # Errors
///
/// It cannot start, or it ends or stays silent for [`START_LIMIT`]: the
/// message holds its output.
pub fn start(start: &Start<'_>) -> Result<Running, String> {
    let log = std::env::temp_dir().join(format!(
        "ebb-bench-redis-{}-{}.log",
        start.which.name(),
        std::process::id()
    ));
    let file = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let child = command(start)
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", start.binary.display()))?;
    let mut running = Running {
        child,
        addr: start.addr,
        port: 6379,
        log,
    };
    let began = Instant::now();
    loop {
        let pong = Command::new("ip")
            .args(["netns", "exec", start.namespace, "timeout", "5"])
            .args([
                "redis-cli",
                "-h",
                &start.addr.to_string(),
                "-p",
                "6379",
                "PING",
            ])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "PONG")
            .unwrap_or(false);
        if pong {
            return Ok(running);
        }
        if let Ok(Some(status)) = running.child.try_wait() {
            return Err(format!(
                "{} Redis ended ({status}) before it answered:\n{}",
                start.which.name(),
                running.log_tail()
            ));
        }
        if began.elapsed() > START_LIMIT {
            return Err(format!(
                "{} Redis did not answer PING within {} s:\n{}",
                start.which.name(),
                START_LIMIT.as_secs(),
                running.log_tail()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A link named `redis-server` to [`DEBIAN_REDIS`] in `dir`, so that the
/// binary runs as the server.
///
/// # Errors
///
/// No `redis-tools` installed, or the link cannot be made.
pub fn stock_binary(dir: &Path) -> Result<PathBuf, String> {
    if !Path::new(DEBIAN_REDIS).is_file() {
        return Err(format!(
            "{DEBIAN_REDIS} is missing: Debian's redis-tools (./ebb installs it) holds stock Redis"
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let link = dir.join("redis-server");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(DEBIAN_REDIS, &link)
        .map_err(|e| format!("linking {} to {DEBIAN_REDIS}: {e}", link.display()))?;
    Ok(link)
}

/// How the two servers run, for the report's command lines.
#[must_use]
pub fn describe() -> String {
    format!(
        "hosted: ours (redis-server-userstack on the bench's TAP device at the guests' address and MAC) and stock ({DEBIAN_REDIS} as redis-server --bind on the kernel's side address), each pinned to CPU {QEMU_CPU} at nice {NICE}, redis-benchmark on CPU {CLIENT_CPU}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(command: &Command) -> Vec<String> {
        std::iter::once(command.get_program())
            .chain(command.get_args())
            .map(|word| word.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn ours_takes_the_tap_in_its_environment_and_stock_binds_the_kernels_address() {
        let namespace = "ebb-test-ns";
        let ours = command(&Start {
            which: Which::Ours,
            binary: Path::new("/t/redis-server-userstack"),
            namespace,
            addr: Ipv4Addr::new(192, 168, 77, 2),
            tap: Some(("tap0", 24, "52:54:00:12:34:56")),
        });
        let ours_words = words(&ours).join(" ");
        assert!(
            ours_words.starts_with("ip netns exec ebb-test-ns taskset -c 1 nice -n -10 /t/redis-server-userstack --port 6379"),
            "{ours_words}"
        );
        assert!(!ours_words.contains("--bind"));
        let env: Vec<String> = ours
            .get_envs()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    k.to_string_lossy(),
                    v.unwrap_or_default().to_string_lossy()
                )
            })
            .collect();
        assert!(
            env.contains(&"EBB_USERSTACK_IP=192.168.77.2/24".to_owned()),
            "{env:?}"
        );
        assert!(env.contains(&"EBB_USERSTACK_MAC=52:54:00:12:34:56".to_owned()));
        let stock = command(&Start {
            which: Which::Stock,
            binary: Path::new("/t/redis-server"),
            namespace,
            addr: Ipv4Addr::new(192, 168, 77, 1),
            tap: None,
        });
        assert!(words(&stock).join(" ").ends_with("--bind 192.168.77.1"));
        assert_eq!(stock.get_envs().count(), 0);
    }
}
