//! Our memcached on the user-space stack (`--tap`), in a network namespace
//! of the test's own with a TAP device whose kernel side is 10.77.9.1/24
//! (QEMU-NOTES: TAP devices and private addresses only inside a namespace
//! the test creates and deletes). The server is killed and the namespace
//! deleted on drop, also when the test fails. Needs root and
//! `/dev/net/tun`; `ip` comes from Debian's `iproute2` (`./ebb test`).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};

/// The TAP device in the namespace.
pub const TAP: &str = "ebb0";
/// The kernel's side of the link.
pub const KERNEL_ADDR: &str = "10.77.9.1/24";
/// Our stack's address.
pub const STACK_IP: &str = "10.77.9.2";

/// Our memcached on the user-space stack at [`STACK_IP`]:11211, inside
/// the namespace [`UserStackServer::namespace`].
pub struct UserStackServer {
    /// The network namespace's name.
    pub namespace: String,
    server: Option<Child>,
    _tap: TapDevice,
    _namespace: NetNamespace,
}

impl UserStackServer {
    /// Creates the namespace and starts `memcached` (our binary) in it on
    /// the user-space stack; returns once it listens.
    pub fn start(memcached: &str) -> Self {
        let namespace = NetNamespace::for_this_process("mc").expect("namespace");
        let config = TapConfig::from_cidr(TAP, KERNEL_ADDR).expect("KERNEL_ADDR");
        let tap = TapDevice::create(&namespace, &config).expect("tap");
        // From here on, drop deletes it.
        let mut made = UserStackServer {
            namespace: namespace.name().to_owned(),
            server: None,
            _tap: tap,
            _namespace: namespace,
        };
        let ns = made.namespace.as_str();
        let stack_addr = format!("{STACK_IP}/24");
        let mut server = Command::new("ip")
            .args(["netns", "exec", ns, memcached])
            .args(["--tap", TAP, "--tap-ip", &stack_addr, "--no-pin", "-v"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {memcached}: {error}"));
        // The ready line is on standard output.
        let stdout = server.stdout.take().expect("piped stdout");
        made.server = Some(server);
        let (sender, listening) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("  | {line}");
                if line.contains("memcached: ready: listening on") {
                    let _ = sender.send(());
                }
            }
        });
        listening
            .recv_timeout(Duration::from_secs(20))
            .expect("memcached on the user-space stack did not listen within 20 s");
        made
    }

    /// Runs `work` on a thread inside the namespace (threads it starts
    /// are inside too): clients of the server.
    pub fn run_inside<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self._namespace
            .run_inside(work)
            .unwrap_or_else(|error| panic!("{error}"))
    }
}

impl Drop for UserStackServer {
    fn drop(&mut self) {
        if let Some(server) = &mut self.server {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}
