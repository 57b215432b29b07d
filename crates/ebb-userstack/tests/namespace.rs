//! The user-space stack over a real TAP device, against the Linux kernel as
//! the peer: each test makes its own network namespace with the TAP device
//! and the kernel-side address in it, runs `userstack-echo` (an
//! ebb-net application on our stack) inside it with `ip netns exec`, and
//! deletes everything afterwards, also when it fails (see QEMU-NOTES: TAP
//! and private addresses only inside a namespace of the test's own).
//!
//! Needs root and `/dev/net/tun`; without them the tests say why and pass.
//! With them, nothing is skipped: a missing tool (`ip`, `ping`, `dnsmasq`,
//! installed by `./ebb test`) fails the test.

mod support;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::thread;
use std::time::Duration;

use support::{start_echo, wait_for, Namespace};

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
