//! TCP between our stack and the Linux kernel's, over a TAP device in a
//! network namespace of the test's own (see `support`): the kernel side is
//! a std `TcpStream` on a thread that entered the namespace, ours is
//! `userstack-echo`'s TCP echo (an `ebb-net` application on our stack).
//!
//! Needs root and `/dev/net/tun`; without them the tests say why and pass.
//! With them, nothing is skipped.

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use support::{start_echo, Namespace};

/// A deterministic byte stream (xorshift64*), so the reader can regenerate
/// what the writer sent instead of keeping it; the same bytes however the
/// stream is cut into pieces.
struct Pattern {
    state: u64,
    word: [u8; 8],
    used: usize,
}

impl Pattern {
    fn new(seed: u64) -> Self {
        Pattern {
            state: seed | 1,
            word: [0; 8],
            used: 8,
        }
    }

    fn fill(&mut self, buffer: &mut [u8]) {
        for byte in buffer {
            if self.used == 8 {
                self.state ^= self.state >> 12;
                self.state ^= self.state << 25;
                self.state ^= self.state >> 27;
                self.word = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
                self.used = 0;
            }
            *byte = self.word[self.used];
            self.used += 1;
        }
    }
}

/// Adler-32 (RFC 1950 §8.2), over a stream fed in pieces.
struct Adler32 {
    a: u32,
    b: u32,
}

impl Adler32 {
    fn new() -> Self {
        Adler32 { a: 1, b: 0 }
    }

    fn update(&mut self, data: &[u8]) {
        for chunk in data.chunks(5552) {
            for &byte in chunk {
                self.a += u32::from(byte);
                self.b += self.a;
            }
            self.a %= 65_521;
            self.b %= 65_521;
        }
    }

    fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }
}

/// The TCP counters of the namespace's kernel (`/proc/net/snmp`, `Tcp:`).
fn kernel_tcp_counters(ns: &Namespace) -> Vec<(String, u64)> {
    kernel_counters(ns, "Tcp:")
}

/// One group of the namespace kernel's counters: `Tcp:` and the like from
/// `/proc/net/snmp`, `TcpExt:` and the like from `/proc/net/netstat` (a
/// line of names, then a line of values).
fn kernel_counters(ns: &Namespace, group: &str) -> Vec<(String, u64)> {
    let (ok_snmp, snmp) = ns.exec("cat", &["/proc/net/snmp"]);
    let (ok_netstat, netstat) = ns.exec("cat", &["/proc/net/netstat"]);
    assert!(ok_snmp && ok_netstat, "reading /proc/net in the namespace");
    let mut lines = snmp
        .lines()
        .chain(netstat.lines())
        .filter(|line| line.split_whitespace().next() == Some(group));
    let names = lines.next().expect("the header line");
    let values = lines.next().expect("the values line");
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .skip(1)
        .map(|(name, value)| (name.to_string(), value.parse().unwrap_or(0)))
        .collect()
}

fn counter(counters: &[(String, u64)], name: &str) -> u64 {
    counters
        .iter()
        .find(|(found, _)| found == name)
        .map_or_else(|| panic!("no Tcp counter {name}"), |(_, value)| *value)
}

/// Connects from the kernel to our echo server; 10 s for every read.
fn connect(server: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&server, Duration::from_secs(10))
        .unwrap_or_else(|error| panic!("connecting to {server}: {error}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .expect("write timeout");
    stream
}

/// Writes `total` bytes of `Pattern::new(seed)` on one thread while reading
/// the echo on this one; checks the echo byte for byte and by checksum,
/// then closes our side and expects the server's FIN (end of stream)
/// after the last byte. Returns the (sent, echoed) checksums.
fn echo_stream(stream: TcpStream, seed: u64, total: usize) -> (u32, u32) {
    let mut writer = stream.try_clone().expect("clone");
    let sending = thread::spawn(move || {
        let mut pattern = Pattern::new(seed);
        let mut sum = Adler32::new();
        let mut buffer = vec![0u8; 64 * 1024];
        let mut left = total;
        while left > 0 {
            let piece = &mut buffer[..left.min(64 * 1024)];
            pattern.fill(piece);
            sum.update(piece);
            writer.write_all(piece).expect("sending to our stack");
            left -= piece.len();
        }
        writer.shutdown(Shutdown::Write).expect("our FIN");
        sum.value()
    });
    let mut reader = stream;
    let mut expected = Pattern::new(seed);
    let mut sum = Adler32::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let mut wanted = vec![0u8; 64 * 1024];
    let mut received = 0;
    while received < total {
        let got = reader.read(&mut buffer).expect("reading the echo");
        assert!(got > 0, "the echo ended after {received} of {total} bytes");
        expected.fill(&mut wanted[..got]);
        assert!(
            buffer[..got] == wanted[..got],
            "the echo differs from what was sent within bytes {received}..{}",
            received + got
        );
        sum.update(&buffer[..got]);
        received += got;
    }
    let after = reader.read(&mut buffer).expect("reading the server's FIN");
    assert_eq!(after, 0, "bytes after the echo of all {total}");
    let sent = sending.join().expect("the writer");
    (sent, sum.value())
}

#[test]
fn sixty_four_mib_both_ways_with_checksums() {
    require_root_and_tun!();
    let mut ns = Namespace::new("ebb0", "10.77.4.1/24");
    let _lines = start_echo(&mut ns, "ebb0", &["--tap-ip", "10.77.4.2/24"]);
    const TOTAL: usize = 64 << 20;
    let (sent, echoed) = ns.inside(|| {
        let stream = connect(SocketAddr::from(([10, 77, 4, 2], 7)));
        echo_stream(stream, 0x5eed, TOTAL)
    });
    assert_eq!(sent, echoed, "checksums of what was sent and echoed");
    let counters = kernel_tcp_counters(&ns);
    assert_eq!(counter(&counters, "EstabResets"), 0, "{counters:?}");
    assert_eq!(counter(&counters, "InErrs"), 0, "{counters:?}");
}

#[test]
fn a_hundred_concurrent_connections_each_echoed_and_closed_in_order() {
    require_root_and_tun!();
    let mut ns = Namespace::new("ebb0", "10.77.5.1/24");
    let _lines = start_echo(&mut ns, "ebb0", &["--tap-ip", "10.77.5.2/24"]);
    const CONNECTIONS: usize = 100;
    const EACH: usize = 48 * 1024;
    let checked = ns.inside(|| {
        let server = SocketAddr::from(([10, 77, 5, 2], 7));
        // All connections are open before any sends a byte, so they are
        // all in our table at once.
        let all_open = Arc::new(Barrier::new(CONNECTIONS));
        let clients: Vec<_> = (0..CONNECTIONS)
            .map(|i| {
                let all_open = Arc::clone(&all_open);
                thread::spawn(move || {
                    let stream = connect(server);
                    all_open.wait();
                    let (sent, echoed) = echo_stream(stream, 1000 + i as u64, EACH + i);
                    sent == echoed
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|client| client.join().expect("a client"))
            .filter(|&ok| ok)
            .count()
    });
    assert_eq!(checked, CONNECTIONS);
    let counters = kernel_tcp_counters(&ns);
    // Every connection was opened by the kernel and ended without a reset
    // either way.
    assert_eq!(counter(&counters, "ActiveOpens"), CONNECTIONS as u64);
    assert_eq!(counter(&counters, "EstabResets"), 0, "{counters:?}");
    assert_eq!(counter(&counters, "AttemptFails"), 0, "{counters:?}");
    assert_eq!(counter(&counters, "OutRsts"), 0, "{counters:?}");
    assert_eq!(counter(&counters, "CurrEstab"), 0, "{counters:?}");
    // The kernel closed first, so every one of its ends entered TIME-WAIT:
    // the orderly close of RFC 9293 §3.6 completed on all of them. The
    // kernel counts entries (`TcpExt: TW`); the live TIME-WAIT sockets are
    // not the measure, since a retransmission that crossed its ACK may
    // legitimately draw an answer that ends one early (RFC 1337).
    let entered = kernel_counters(&ns, "TcpExt:");
    if counter(&entered, "TW") != CONNECTIONS as u64 {
        let (_, sockets) = ns.exec("ss", &["-tanoH"]);
        panic!("not every connection entered TIME-WAIT: {entered:?}\n{sockets}");
    }
}
