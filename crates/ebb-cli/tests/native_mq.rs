//! Multi-queue virtio-net end to end: native memcached on 4 vCPUs (q35,
//! TCG) over a multi-queue TAP device (`queues=4`, `mq=on`) in a network
//! namespace of the test's own. The guest sets up four queue pairs, one
//! stack per core; libmemcached's `memccapable` must pass from inside the
//! namespace, then 64 more connections (64 source ports, so the kernel's
//! flow hash spreads them over the TAP queues) each ask `version`; then
//! `shutdown` (memcached `-A`) ends the guest, which prints each queue's
//! counters, and every queue must have received, sent and been
//! interrupted; the verbose dump must show MQ with the checksum offloads
//! working across the pairs and adaptive polling per queue. The same with `net=dhcp` (dnsmasq in the namespace; core
//! 0's lease must reach every stack). And with fewer queues than cores (QEMU user networking,
//! one queue, 2 cores), memcached still listens on every core and serves
//! from core 0's queue.
//!
//! The TAP tests need root and `/dev/net/tun`; without them they are
//! skipped (`ebb_testbed::skip_unless!`). With them nothing is skipped: a missing `ip`, `qemu-system-x86_64`
//! or `memccapable` (which `./ebb test` installs) fails it. The namespace
//! is deleted on drop, also when the test fails (QEMU-NOTES: TAP devices
//! and private addresses only inside a namespace the test creates).

mod native_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{skip_unless, Need};
use native_support::{free_port, Guest, BOOT, EBB};

const TAP: &str = "mqtap0";
const GUEST_MAC: &str = "52:54:00:eb:00:29";
const QUEUES: usize = 4;
const CONNECTIONS: usize = 64;

/// A namespace with a multi-queue TAP device whose kernel side is
/// `subnet.1/24` (the testbed deletes both on drop), and the DHCP server,
/// if any, stopped on drop.
struct Namespace {
    name: String,
    dnsmasq: Option<Child>,
    _tap: TapDevice,
    _namespace: NetNamespace,
}

impl Namespace {
    fn new(subnet: &str) -> Self {
        let namespace = NetNamespace::for_this_process("mq").expect("namespace");
        // The kernel never asks ARP for the guest (QEMU-NOTES).
        let config = TapConfig::new(TAP, format!("{subnet}.1").parse().expect("subnet"), 24)
            .with_guest(format!("{subnet}.2").parse().expect("subnet"), GUEST_MAC)
            .with_queues(u16::try_from(QUEUES).expect("queues"));
        let tap = TapDevice::create(&namespace, &config).expect("tap");
        Namespace {
            name: namespace.name().to_owned(),
            dnsmasq: None,
            _tap: tap,
            _namespace: namespace,
        }
    }

    /// Starts dnsmasq in the namespace, handing the guest `subnet.2`.
    fn serve_dhcp(&mut self, subnet: &str) {
        let leases = std::env::temp_dir().join(format!("{}.leases", self.name));
        let mut dnsmasq = Command::new("ip")
            .args(["netns", "exec", &self.name, "dnsmasq", "--no-daemon"])
            .args(["--conf-file=/dev/null", "--port=0", "--bind-interfaces"])
            .arg(format!("--interface={TAP}"))
            .arg(format!(
                "--dhcp-range={subnet}.2,{subnet}.2,255.255.255.0,2m"
            ))
            .arg(format!("--dhcp-host={GUEST_MAC},{subnet}.2"))
            .arg(format!("--dhcp-leasefile={}", leases.display()))
            .args(["--pid-file=", "--user=root", "--log-facility=-"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("starting dnsmasq (./ebb test installs it): {error}"));
        let stderr = dnsmasq.stderr.take().expect("piped stderr");
        self.dnsmasq = Some(dnsmasq);
        let (bound, wait) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("DHCP, sockets bound") {
                    let _ = bound.send(());
                }
            }
        });
        wait.recv_timeout(Duration::from_secs(20))
            .expect("dnsmasq did not bind its DHCP socket within 20 s");
    }

    /// Runs `bash -c script` (bash: for `/dev/tcp`) inside the namespace with a time limit; returns
    /// whether it succeeded and its output (stdout and stderr).
    fn sh(&self, script: &str, args: &[&str]) -> (bool, String) {
        let output = Command::new("timeout")
            .args(["120", "ip", "netns", "exec", &self.name, "bash", "-c"])
            .arg(format!("exec 2>&1; {script}"))
            .arg("bash")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|error| panic!("running a command in {}: {error}", self.name));
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if let Some(dnsmasq) = &mut self.dnsmasq {
            let _ = dnsmasq.kill();
            let _ = dnsmasq.wait();
            let leases = std::env::temp_dir().join(format!("{}.leases", self.name));
            let _ = std::fs::remove_file(leases);
        }
    }
}

/// `(rx_packets, tx_packets, interrupts)` of queue `queue` from the
/// guest's exit report.
fn counters(console: &str, queue: usize) -> Option<(u64, u64, u64)> {
    let prefix = format!("virtio-net queue {queue}: ");
    let line = console.lines().find_map(|l| l.strip_prefix(&prefix))?;
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(name)?.strip_prefix('='))
            .and_then(|value| value.parse().ok())
    };
    Some((
        field("rx_packets")?,
        field("tx_packets")?,
        field("interrupts")?,
    ))
}

/// The counter `key` of `queue` (`rxN`/`txN`) in the verbose feature and
/// counter dump (`ebbflow native: virtio-net queue rx0: packets=..`).
fn dump_counter(console: &str, queue: &str, key: &str) -> Option<u64> {
    let needle = format!("virtio-net queue {queue}: ");
    let line = console.lines().find(|l| l.contains(&needle))?;
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
        .and_then(|value| value.parse().ok())
}

#[test]
fn every_queue_of_a_four_queue_tap_carries_memcached_traffic() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Qemu);
    four_queues("10.77.29", false);
}

/// The same with the address from DHCP (dnsmasq in the namespace): core
/// 0's client gets the lease, server messages reaching other queues are
/// handed to it, and the other cores' stacks take the address (else the
/// connections steered to them would go unanswered).
#[test]
fn four_queues_share_core_0s_dhcp_lease() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip, Need::Dnsmasq, Need::Qemu);
    four_queues("10.77.39", true);
}

fn four_queues(subnet: &str, dhcp: bool) {
    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let guest_ip = format!("{subnet}.2");
    let guest_ip = guest_ip.as_str();
    let mut ns = Namespace::new(subnet);
    let address = if dhcp {
        ns.serve_dhcp(subnet);
        "net=dhcp".to_owned()
    } else {
        format!("ip={guest_ip}/24")
    };
    let netdev =
        format!("tap,id=mq0,ifname={TAP},script=no,downscript=no,queues={QUEUES},vhost=off");
    let device = format!(
        "virtio-net-pci,netdev=mq0,mq=on,vectors={},disable-legacy=on,mac={GUEST_MAC}",
        2 * QUEUES + 2
    );
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &ns.name, EBB])
        .args(["run", "memcached", "--native", "--accel", "tcg", "-v"])
        .args(["--cores", &QUEUES.to_string(), "--timeout", "400"])
        .arg(format!("--boot-arg={address}"))
        .args(["--qemu-arg=-netdev", &format!("--qemu-arg={netdev}")])
        .args(["--qemu-arg=-device", &format!("--qemu-arg={device}")])
        .args(["--", "-A"]);
    let mut guest = Guest::spawn(command);
    // The listener and the address (a DHCP lease comes later).
    guest.wait_until("memcached listening with an address", |seen| {
        seen.iter()
            .any(|l| l.starts_with("memcached: ready: listening"))
            && seen.iter().any(|l| l.contains("virtio-net has address"))
    });
    let boot = guest.console();
    assert!(
        boot.contains("virtio-net: 4 queue pairs for 4 cores (MSI-X entry i to core i)"),
        "{boot}"
    );
    let address = if dhcp {
        format!("virtio-net has address {guest_ip}/24, gateway {subnet}.1 (DHCP)")
    } else {
        format!("virtio-net has address {guest_ip}/24 (static)")
    };
    assert!(boot.contains(&address), "{boot}");
    assert!(
        boot.contains("listening on 0.0.0.0:11211 (4 cores, native)"),
        "{boot}"
    );

    let (passed, output) = ns.sh(
        "memccapable -h \"$1\" -p 11211 -t 5 -a && memccapable -h \"$1\" -p 11211 -t 5 -b",
        &[guest_ip],
    );
    assert!(
        passed && output.matches("All tests passed").count() == 2,
        "memccapable against the 4-queue guest:\n{output}"
    );

    // Connections from as many source ports, kept open until the loop ends.
    let (answered, output) = ns.sh(
        "n=0; for i in $(seq \"$2\"); do \
           exec 3<>/dev/tcp/\"$1\"/11211 || exit 1; \
           printf 'version\\r\\n' >&3; read -r -t 20 line <&3; \
           case \"$line\" in VERSION*) n=$((n + 1));; esac; \
           exec 3<&-; \
         done; echo \"answered $n\"",
        &[guest_ip, &CONNECTIONS.to_string()],
    );
    assert!(
        answered && output.contains(&format!("answered {CONNECTIONS}")),
        "{CONNECTIONS} connections asking version:\n{output}"
    );

    let _ = ns.sh(
        "exec 3<>/dev/tcp/\"$1\"/11211 && printf 'shutdown\\r\\n' >&3 && sleep 1",
        &[guest_ip],
    );
    // Exits 0 after shutdown; prints the virtio-net lines.
    let console = guest.finish();
    for queue in 0..QUEUES {
        let Some((rx, tx, interrupts)) = counters(&console, queue) else {
            panic!("no counters for queue {queue} at exit:\n{console}");
        };
        assert!(
            rx > 0 && tx > 0 && interrupts > 0,
            "queue {queue} carried no traffic (rx {rx}, tx {tx}, interrupts {interrupts}):\n{console}"
        );
    }
    // The verbose dump: multiqueue negotiated alongside the offloads, each
    // pair adapting on its own, and each pair's full counters.
    let features = console
        .lines()
        .find(|l| l.contains("virtio-net features offered="))
        .unwrap_or_else(|| panic!("no feature dump:\n{console}"));
    assert!(
        features.contains(" MQ") && features.contains(" CTRL_VQ"),
        "{features}"
    );
    assert!(
        console.contains("virtio-net mode adaptive per queue"),
        "{console}"
    );
    let mut offloaded = (0, 0);
    for queue in 0..QUEUES {
        let rx = dump_counter(&console, &format!("rx{queue}"), "packets");
        assert!(rx.is_some_and(|rx| rx > 0), "queue rx{queue}:\n{console}");
        offloaded.0 += dump_counter(&console, &format!("rx{queue}"), "csum_offloaded").unwrap_or(0);
        offloaded.1 += dump_counter(&console, &format!("tx{queue}"), "csum_offloaded").unwrap_or(0);
    }
    // Checksum offload, when the TAP has a virtio-net header, works on
    // every pair's path, not only pair 0's.
    if features.contains(" GUEST_CSUM") {
        assert!(
            offloaded.0 > 0,
            "no received checksum offloaded:\n{console}"
        );
    }
    if features.contains(" CSUM") {
        assert!(offloaded.1 > 0, "no sent checksum offloaded:\n{console}");
    }
}

/// A single-queue device (QEMU user networking) with more cores than
/// queues: one stack on core 0, the other core's stack accepts `listen`
/// (so `listen_on_all_cores` works) and the device carries everything on
/// queue 0. Needs no root.
#[test]
fn fewer_queues_than_cores_serve_from_the_cores_with_a_queue() {
    use std::io::Write;
    use std::net::TcpStream;

    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    skip_unless!(Need::Qemu);
    let port = free_port();
    let mut command = Command::new(EBB);
    command
        .args(["run", "memcached", "--native", "--accel", "tcg", "-v"])
        .args(["--cores", "2", "--timeout", "300"])
        .args(["--forward", &format!("{port}:11211")])
        .args(["--", "-A"]);
    let mut guest = Guest::spawn(command);
    guest.wait_for("memcached: ready: listening");
    let boot = guest.console();
    assert!(
        boot.contains("virtio-net: 1 queue pair for 2 cores"),
        "{boot}"
    );
    assert!(
        boot.contains("listening on 0.0.0.0:11211 (2 cores, native)"),
        "{boot}"
    );

    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    stream.write_all(b"version\r\n").expect("send version");
    let mut reply = String::new();
    BufReader::new(stream.try_clone().expect("clone"))
        .read_line(&mut reply)
        .expect("read the version");
    assert!(reply.starts_with("VERSION "), "{reply}");
    stream.write_all(b"shutdown\r\n").expect("send shutdown");

    let console = guest.finish();
    let (rx, tx, interrupts) = counters(&console, 0)
        .unwrap_or_else(|| panic!("no counters for queue 0 at exit:\n{console}"));
    assert!(rx > 0 && tx > 0 && interrupts > 0, "{console}");
    assert!(
        counters(&console, 1).is_none(),
        "one queue only:\n{console}"
    );
}
