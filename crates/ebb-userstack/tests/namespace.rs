//! The user-space stack over a real TAP device, against the Linux kernel as
//! the peer: each test makes its own network namespace with the TAP device
//! and the kernel-side address in it, runs `userstack-udp-echo` (an
//! ebb-net application on our stack) inside it with `ip netns exec`, and
//! deletes everything afterwards, also when it fails (see QEMU-NOTES: TAP
//! and private addresses only inside a namespace of the test's own).
//!
//! Needs root and `/dev/net/tun`; without them the tests say why and pass.
//! With them, nothing is skipped: a missing tool (`ip`, `ping`, `dnsmasq`,
//! installed by `./ebb test`) fails the test.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

const ECHO: &str = env!("CARGO_BIN_EXE_userstack-udp-echo");

/// Why these tests cannot run here, if they cannot.
fn unable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun");
    }
    None
}

macro_rules! require_root_and_tun {
    () => {
        if let Some(reason) = unable() {
            eprintln!("SKIPPED: the TAP namespace tests need root and /dev/net/tun ({reason})");
            return;
        }
    };
}

fn run(args: &[&str]) {
    let output = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|error| panic!("running {args:?}: {error}"));
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A network namespace with a TAP device `tap` whose kernel side has
/// `kernel_addr`; the processes started in it are killed and the namespace
/// deleted on drop.
struct Namespace {
    name: String,
    children: Vec<Child>,
}

impl Namespace {
    fn new(tap: &str, kernel_addr: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "ebbtest-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run(&["ip", "netns", "add", &name]);
        // From here on, drop deletes it.
        let namespace = Namespace {
            name,
            children: Vec::new(),
        };
        let ns = namespace.name.as_str();
        run(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        run(&["ip", "-n", ns, "tuntap", "add", "dev", tap, "mode", "tap"]);
        run(&["ip", "-n", ns, "addr", "add", kernel_addr, "dev", tap]);
        run(&["ip", "-n", ns, "link", "set", tap, "up"]);
        namespace
    }

    /// Starts `program args` inside the namespace; its stderr lines come
    /// out of the receiver.
    fn spawn(&mut self, program: &str, args: &[&str]) -> Lines {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("starting {program}: {error}"));
        let stderr = child.stderr.take().expect("piped stderr");
        self.children.push(child);
        let (sender, receiver) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("  | {line}");
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Lines {
            receiver,
            seen: Vec::new(),
        }
    }

    /// Runs `program args` inside the namespace to completion; its stdout.
    fn exec(&self, program: &str, args: &[&str]) -> (bool, String) {
        let output = Command::new("ip")
            .args(["netns", "exec", &self.name, program])
            .args(args)
            .output()
            .unwrap_or_else(|error| panic!("running {program}: {error}"));
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    }

    /// Runs `body` on a thread that has entered the namespace (setns
    /// changes only the calling thread's network namespace).
    fn inside<R: Send + 'static>(&self, body: impl FnOnce() -> R + Send + 'static) -> R {
        let path = format!("/var/run/netns/{}", self.name);
        thread::spawn(move || {
            let file = File::open(&path).unwrap_or_else(|error| panic!("{path}: {error}"));
            // SAFETY: setns takes a namespace file descriptor we hold open;
            // it switches only this thread's network namespace.
            let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(entered, 0, "setns: {}", std::io::Error::last_os_error());
            body()
        })
        .join()
        .expect("the thread inside the namespace panicked")
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A child's stderr lines, those already seen kept.
struct Lines {
    receiver: Receiver<String>,
    seen: Vec<String>,
}

/// Waits for a line containing `needle` (or finds it among those already
/// seen); returns it.
fn wait_for(lines: &mut Lines, needle: &str, limit: Duration) -> String {
    if let Some(line) = lines.seen.iter().find(|line| line.contains(needle)) {
        return line.clone();
    }
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.receiver.recv_timeout(left) {
            Ok(line) => {
                lines.seen.push(line.clone());
                if line.contains(needle) {
                    return line;
                }
            }
            Err(_) => panic!("no line with '{needle}' within {limit:?}"),
        }
    }
}

/// Starts the echo server on our stack over `tap` with `extra` options.
fn start_echo(ns: &mut Namespace, tap: &str, extra: &[&str]) -> Lines {
    let mut args = vec!["--cores", "1", "--no-pin", "--tap", tap, "--udp-port", "7"];
    args.extend_from_slice(extra);
    let mut lines = ns.spawn(ECHO, &args);
    wait_for(&mut lines, "UDP 0.0.0.0:7", Duration::from_secs(20));
    lines
}

fn ping_three(ns: &Namespace, addr: &str) {
    let (ok, out) = ns.exec("ping", &["-c", "3", "-W", "5", addr]);
    assert!(ok, "ping {addr} failed:\n{out}");
    assert!(
        out.contains("3 packets transmitted, 3 received"),
        "ping {addr}:\n{out}"
    );
}

#[test]
fn the_kernel_pings_the_stack() {
    require_root_and_tun!();
    let mut ns = Namespace::new("ebb0", "10.77.0.1/24");
    let mut lines = start_echo(&mut ns, "ebb0", &["--tap-ip", "10.77.0.2/24"]);
    wait_for(
        &mut lines,
        "has address 10.77.0.2/24",
        Duration::from_secs(5),
    );
    ping_three(&ns, "10.77.0.2");
}

#[test]
fn udp_echo_with_a_kernel_client() {
    require_root_and_tun!();
    let mut ns = Namespace::new("ebb0", "10.77.1.1/24");
    let _lines = start_echo(&mut ns, "ebb0", &["--tap-ip", "10.77.1.2/24"]);
    let echoed = ns.inside(|| {
        let socket = UdpSocket::bind("10.77.1.1:0").expect("bind in the namespace");
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let server = SocketAddr::from((Ipv4Addr::new(10, 77, 1, 2), 7));
        let mut echoed = 0;
        let mut reply = vec![0u8; 2048];
        // Sizes from one byte to the most an MTU of 1500 carries.
        for (round, size) in [1usize, 2, 17, 100, 512, 1000, 1400, 1472]
            .into_iter()
            .enumerate()
        {
            let message: Vec<u8> = (0..size)
                .map(|i| (i * 7 + round).to_le_bytes()[0])
                .collect();
            socket.send_to(&message, server).expect("send");
            let (len, from) = socket.recv_from(&mut reply).expect("an echo");
            assert_eq!(from, server);
            assert_eq!(&reply[..len], &message[..], "echo of {size} bytes differs");
            echoed += 1;
        }
        echoed
    });
    assert_eq!(echoed, 8);
}

#[test]
fn dhcp_from_dnsmasq() {
    require_root_and_tun!();
    let mut ns = Namespace::new("ebb1", "10.78.0.1/24");
    let leases = std::env::temp_dir().join(format!("{}.leases", ns.name));
    let leasefile = format!("--dhcp-leasefile={}", leases.display());
    let mut dnsmasq = ns.spawn(
        "dnsmasq",
        &[
            "--no-daemon",
            "--conf-file=/dev/null",
            "--port=0",
            "--interface=ebb1",
            "--bind-interfaces",
            "--dhcp-range=10.78.0.50,10.78.0.60,255.255.255.0,2m",
            &leasefile,
            "--pid-file=",
            "--user=root",
            "--log-facility=-",
            "--log-dhcp",
        ],
    );
    wait_for(&mut dnsmasq, "DHCP, sockets bound", Duration::from_secs(10));
    let mut lines = start_echo(&mut ns, "ebb1", &[]);
    let line = wait_for(&mut lines, "has address", Duration::from_secs(30));
    assert!(line.contains("(DHCP)"), "{line}");
    assert!(line.contains("gateway 10.78.0.1"), "{line}");
    let addr = line
        .split_whitespace()
        .find_map(|word| word.trim_end_matches(',').strip_suffix("/24"))
        .expect("an address with /24")
        .to_string();
    let octet: u8 = addr
        .strip_prefix("10.78.0.")
        .and_then(|last| last.parse().ok())
        .unwrap_or_else(|| panic!("{addr} is not from the range"));
    assert!((50..=60).contains(&octet), "{addr} is outside the range");
    wait_for(
        &mut dnsmasq,
        &format!("DHCPACK(ebb1) {addr}"),
        Duration::from_secs(5),
    );
    ping_three(&ns, &addr);
    let _ = std::fs::remove_file(leases);
}

#[test]
fn a_burst_of_datagrams_is_echoed_in_full() {
    require_root_and_tun!();
    let mut ns = Namespace::new("ebb0", "10.77.2.1/24");
    // One frame per poll: whenever two frames wait, the second must be
    // read by the poll the first one queues, not by a new arrival's.
    let _lines = start_echo(
        &mut ns,
        "ebb0",
        &["--tap-ip", "10.77.2.2/24", "--tap-batch", "1"],
    );
    const BURST: u16 = 300;
    let received = ns.inside(|| {
        let socket = UdpSocket::bind("10.77.2.1:0").expect("bind in the namespace");
        let server = SocketAddr::from((Ipv4Addr::new(10, 77, 2, 2), 7));
        // Resolve ARP both ways first, so the burst meets a warm path.
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        socket.send_to(b"warm", server).expect("send");
        let mut reply = [0u8; 64];
        socket.recv_from(&mut reply).expect("the warm-up echo");
        let reader = socket.try_clone().expect("clone");
        let collect = thread::spawn(move || {
            let mut seen = vec![false; usize::from(BURST)];
            let mut buffer = [0u8; 64];
            while let Ok((len, _)) = reader.recv_from(&mut buffer) {
                if len == 2 {
                    seen[usize::from(u16::from_be_bytes([buffer[0], buffer[1]]))] = true;
                }
                if seen.iter().all(|&seen| seen) {
                    break;
                }
            }
            seen.iter().filter(|&&seen| seen).count()
        });
        for i in 0..BURST {
            socket.send_to(&i.to_be_bytes(), server).expect("send");
        }
        collect.join().expect("the reader")
    });
    assert_eq!(received, usize::from(BURST));
}

#[test]
fn a_missing_tap_device_is_not_created() {
    require_root_and_tun!();
    let ns = Namespace::new("ebb0", "10.77.3.1/24");
    let (kind, message) = ns.inside(|| {
        let error = ebb_userstack::TapFile::open("ebb-typo").expect_err("no such device");
        (error.kind(), error.to_string())
    });
    assert_eq!(kind, std::io::ErrorKind::NotFound);
    assert!(message.contains("ip netns exec"), "{message}");
    let (_, links) = ns.exec("ip", &["-o", "link", "show"]);
    assert!(!links.contains("ebb-typo"), "{links}");
    let attached = ns.inside(|| ebb_userstack::TapFile::open("ebb0").map(|_| ()));
    assert!(attached.is_ok(), "{attached:?}");
}
