//! Network namespaces and TAP devices for guests on TAP (QEMU-NOTES.md:
//! every TAP device, the guest using it and its clients live in a namespace
//! the benchmark creates and deletes itself).
//!
//! [`NetNamespace`] creates `ebb-PID-TAG` with `ip netns add` and deletes it
//! on drop (also when a benchmark fails or panics); namespaces left by a
//! process that was killed are deleted by the next [`NetNamespace::create`].
//! [`TapDevice`] is a TAP interface inside one, with the host-side address
//! and a permanent neighbour entry for the guest (no ARP-retry delays at
//! start-up, see BENCH-NOTES.md). [`NetNamespace::run_inside`] runs a
//! closure on a thread that entered the namespace, so that the sockets it
//! opens (a probe, a load generator) live there.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;

/// Where `ip netns` keeps its namespaces.
const NETNS_DIR: &str = "/run/netns";
/// The prefix of the namespaces this module creates.
const PREFIX: &str = "ebb-";

/// Runs `ip ARGS...`, returning stdout or an error with stderr.
fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "ip {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A network namespace owned by this process; deleted on drop.
#[derive(Debug)]
pub struct NetNamespace {
    name: String,
}

impl NetNamespace {
    /// Creates `ebb-PID-TAG` (`tag`: letters, digits, `-`) with its
    /// loopback up, after deleting namespaces left by dead processes.
    pub fn create(tag: &str) -> Result<NetNamespace, String> {
        if tag.is_empty() || !tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(format!(
                "namespace tag '{tag}' must be letters, digits and -"
            ));
        }
        remove_stale();
        let name = format!("{PREFIX}{}-{tag}", std::process::id());
        ip(&["netns", "add", &name]).map_err(|e| format!("{e} (TAP runs need root)"))?;
        let namespace = NetNamespace { name };
        namespace.exec(&["ip", "link", "set", "lo", "up"])?;
        Ok(namespace)
    }

    /// The namespace's name, for `ip netns exec NAME`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `program args...` inside the namespace; returns its stdout.
    pub fn exec(&self, command: &[&str]) -> Result<String, String> {
        let mut args = vec!["netns", "exec", &self.name];
        args.extend_from_slice(command);
        ip(&args)
    }

    /// Runs `work` on a new thread that has entered the namespace (setns(2)
    /// changes only the calling thread's network namespace), and returns its
    /// result.
    pub fn run_inside<R: Send>(&self, work: impl FnOnce() -> R + Send) -> Result<R, String> {
        let path = format!("{NETNS_DIR}/{}", self.name);
        let file = std::fs::File::open(&path).map_err(|e| format!("cannot open {path}: {e}"))?;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    // SAFETY: setns(2) on a descriptor we opened and keep
                    // open; it only switches this new thread's network
                    // namespace, which no other thread shares.
                    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                    if rc != 0 {
                        return Err(format!(
                            "setns into {path}: {}",
                            std::io::Error::last_os_error()
                        ));
                    }
                    Ok(work())
                })
                .join()
                .map_err(|_| format!("the work inside {path} panicked"))?
        })
    }
}

impl Drop for NetNamespace {
    fn drop(&mut self) {
        // Deleting the namespace also removes the interfaces inside it.
        if let Err(e) = ip(&["netns", "del", &self.name]) {
            eprintln!("warning: {e}");
        }
    }
}

/// The process id in an `ebb-PID-TAG` name.
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

/// A TAP interface in a [`NetNamespace`], up, with the host side's address
/// and a permanent neighbour entry for the guest; removed on drop.
#[derive(Debug)]
pub struct TapDevice<'ns> {
    namespace: &'ns NetNamespace,
    ifname: String,
    host: Ipv4Addr,
    guest: Ipv4Addr,
}

/// How to set up a [`TapDevice`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapConfig {
    /// Interface name (at most 15 bytes).
    pub ifname: String,
    /// The host side's address.
    pub host: Ipv4Addr,
    /// The guest's address.
    pub guest: Ipv4Addr,
    /// The prefix length of the link's subnet.
    pub prefix_len: u8,
    /// The guest NIC's MAC address, for the neighbour entry.
    pub guest_mac: String,
    /// Queue pairs; more than one creates a multi-queue TAP.
    pub queues: u16,
}

impl TapConfig {
    /// `ebbtap0`, host 192.168.77.1/24, guest 192.168.77.2 (private
    /// addresses: only ever inside a namespace), one queue.
    pub fn new(guest_mac: &str) -> Self {
        TapConfig {
            ifname: "ebbtap0".to_owned(),
            host: Ipv4Addr::new(192, 168, 77, 1),
            guest: Ipv4Addr::new(192, 168, 77, 2),
            prefix_len: 24,
            guest_mac: guest_mac.to_owned(),
            queues: 1,
        }
    }

    /// The `ip` commands (inside the namespace) that set the device up.
    pub fn setup_commands(&self) -> Vec<Vec<String>> {
        let mut add = vec!["ip", "tuntap", "add", "dev", &self.ifname, "mode", "tap"];
        if self.queues > 1 {
            add.push("multi_queue");
        }
        let owned = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let host = format!("{}/{}", self.host, self.prefix_len);
        let guest = self.guest.to_string();
        vec![
            owned(&add),
            owned(&["ip", "addr", "add", &host, "dev", &self.ifname]),
            owned(&["ip", "link", "set", &self.ifname, "up"]),
            owned(&[
                "ip",
                "neigh",
                "replace",
                &guest,
                "lladdr",
                &self.guest_mac,
                "dev",
                &self.ifname,
                "nud",
                "permanent",
            ]),
        ]
    }
}

impl<'ns> TapDevice<'ns> {
    /// Creates the device described by `config` inside `namespace`.
    pub fn create(namespace: &'ns NetNamespace, config: &TapConfig) -> Result<Self, String> {
        if config.ifname.is_empty() || config.ifname.len() > 15 {
            return Err(format!(
                "interface name '{}' must be 1 to 15 bytes",
                config.ifname
            ));
        }
        let mut commands = config.setup_commands().into_iter();
        let first = commands.next().expect("tuntap add");
        let first: Vec<&str> = first.iter().map(String::as_str).collect();
        namespace.exec(&first)?;
        let device = TapDevice {
            namespace,
            ifname: config.ifname.clone(),
            host: config.host,
            guest: config.guest,
        };
        for command in commands {
            let words: Vec<&str> = command.iter().map(String::as_str).collect();
            namespace.exec(&words)?;
        }
        Ok(device)
    }

    /// The interface name, for QEMU's `-netdev tap,ifname=`.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The host side's address.
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    /// The guest's address.
    pub fn guest(&self) -> Ipv4Addr {
        self.guest
    }
}

impl Drop for TapDevice<'_> {
    fn drop(&mut self) {
        let _ = self.namespace.exec(&["ip", "link", "del", &self.ifname]);
    }
}

/// Whether this process can create namespaces and TAP devices (root).
pub fn can_use_tap() -> bool {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    euid == 0 && std::path::Path::new("/dev/net/tun").exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pids_are_read_from_names() {
        assert_eq!(owner_pid("ebb-1234-linux"), Some(1234));
        assert_eq!(owner_pid("ebb-x-linux"), None);
        assert_eq!(owner_pid("other-1234"), None);
    }

    #[test]
    fn tap_setup_adds_address_and_permanent_neighbour() {
        let mut config = TapConfig::new("52:54:00:eb:b0:01");
        let single: Vec<String> = config
            .setup_commands()
            .into_iter()
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            single,
            [
                "ip tuntap add dev ebbtap0 mode tap",
                "ip addr add 192.168.77.1/24 dev ebbtap0",
                "ip link set ebbtap0 up",
                "ip neigh replace 192.168.77.2 lladdr 52:54:00:eb:b0:01 dev ebbtap0 nud permanent",
            ]
        );
        config.queues = 4;
        assert!(config.setup_commands()[0]
            .join(" ")
            .ends_with("mode tap multi_queue"));
    }

    /// Creates a namespace with a TAP device, checks a socket opened by
    /// `run_inside` sees it, and that everything is gone afterwards.
    #[test]
    fn namespace_and_tap_are_created_and_removed() {
        if !can_use_tap() {
            eprintln!("skipped: needs root and /dev/net/tun");
            return;
        }
        let name;
        {
            let namespace = NetNamespace::create("unit").expect("namespace");
            name = namespace.name().to_owned();
            let tap =
                TapDevice::create(&namespace, &TapConfig::new("52:54:00:eb:b0:09")).expect("tap");
            let links = namespace
                .exec(&["ip", "-o", "addr", "show", "dev", tap.ifname()])
                .expect("addr");
            assert!(links.contains("192.168.77.1/24"), "{links}");
            // A listener on the host address can only bind inside the namespace.
            let host = tap.host();
            let bound = namespace
                .run_inside(move || std::net::TcpListener::bind((host, 0)).is_ok())
                .expect("run inside");
            assert!(bound);
            assert!(
                std::net::TcpListener::bind((host, 0)).is_err(),
                "not outside"
            );
        }
        assert!(
            !std::path::Path::new(NETNS_DIR).join(&name).exists(),
            "{name} deleted"
        );
    }
}
