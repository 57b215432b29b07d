//! Issue 19's bad-input and connection must-shows, against Redis 7.0.15
//! (unchanged) running natively on Ebbflow's own TCP/IP stack, reached
//! through QEMU's forwarded port:
//!
//! - **Connections:** 1,000 client connections open at once, each
//!   setting and then reading its own key: every one is served, Redis
//!   counts 1,001 clients (with the test's own), and after they close it
//!   counts one again.
//! - **Bad input:** 2,000 connections, each sending RESP frames that are
//!   valid, mutated (a byte changed, dropped or cut short), or plainly
//!   wrong (bad lengths and counts, unbalanced quotes), or random bytes,
//!   then ending its half. Crafted protocol errors get Redis's own
//!   `-ERR Protocol error` reply; every connection ends within a limit
//!   (no hang); the keys stored before survive; the guest never reports
//!   a fault; and no descriptor leaks, because a connection opened at
//!   the end gets the same descriptor (`CLIENT LIST`'s `fd=`) as one
//!   opened at the start.
//!
//! The frames come from a fixed seed, so a failure repeats. Needs QEMU
//! and what the Redis build needs; without them it is SKIPPED with the
//! reason.

mod c_support;
mod native_support;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use ebb_testbed::{skip_unless, Need};
use native_support::BOOT;

/// musl, the personality and Redis (cached after the first time).
const PREPARE_LIMIT: Duration = Duration::from_secs(1500);
/// Connections open at once.
const CONNECTIONS: usize = 1_000;
/// Connections of bad input.
const FUZZ_CONNECTIONS: usize = 2_000;
/// Keys stored before, checked after.
const SURVIVORS: usize = 100;
/// How long one reply, or one fuzz connection's end, may take (TCG).
const REPLY_LIMIT: Duration = Duration::from_secs(30);
/// How long Redis may take to notice closed connections.
const SETTLE_LIMIT: Duration = Duration::from_secs(60);

/// A client connection reading one RESP reply at a time.
struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(port: u16) -> Client {
        let stream =
            TcpStream::connect(("127.0.0.1", port)).expect("connect to the forwarded port");
        stream
            .set_read_timeout(Some(REPLY_LIMIT))
            .expect("a read timeout");
        Client {
            reader: BufReader::new(stream),
        }
    }

    fn send(&mut self, args: &[&str]) {
        self.reader
            .get_mut()
            .write_all(&frame(args))
            .expect("send a command");
    }

    /// One reply: a status or integer without its mark, an error line as
    /// it is (`-ERR ...`), a bulk
    /// string's contents, an array's elements joined by newlines.
    fn reply(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("a reply line");
        let line = line.trim_end_matches("\r\n").to_owned();
        let Some(kind) = line.chars().next() else {
            panic!("the connection ended before a reply");
        };
        let count = || line[1..].parse::<i64>().expect("a length");
        match kind {
            '$' if count() < 0 => "(nil)".to_owned(),
            '$' => {
                let mut bulk = vec![0; usize::try_from(count()).expect("a length") + 2];
                self.reader.read_exact(&mut bulk).expect("a bulk string");
                bulk.truncate(bulk.len() - 2);
                String::from_utf8_lossy(&bulk).into_owned()
            }
            '*' => (0..count().max(0))
                .map(|_| self.reply())
                .collect::<Vec<_>>()
                .join("\n"),
            '+' | ':' => line[1..].to_owned(),
            _ => line,
        }
    }

    fn command(&mut self, args: &[&str]) -> String {
        self.send(args);
        self.reply()
    }
}

/// `args` as a RESP array of bulk strings.
fn frame(args: &[&str]) -> Vec<u8> {
    let mut bytes = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        bytes.extend(format!("${}\r\n{arg}\r\n", arg.len()).bytes());
    }
    bytes
}

/// xorshift64*: the fuzz's frames from a fixed seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(bound).expect("a bound")).expect("below")
    }
}

/// Commands the fuzz may send whole: only on its own keys (`fuzz:`), so
/// nothing it sends may touch the keys that must survive.
fn valid_command(random: &mut Random) -> Vec<u8> {
    let key = format!("fuzz:{}", random.below(50));
    let number = random.below(1000).to_string();
    let args: Vec<&str> = match random.below(9) {
        0 => vec!["SET", &key, &number],
        1 => vec!["GET", &key],
        2 => vec!["INCR", &key],
        3 => vec!["LPUSH", &key, &number, "x"],
        4 => vec!["HSET", &key, "field", &number],
        5 => vec!["EXPIRE", &key, &number],
        6 => vec!["APPEND", &key, &number],
        7 => vec!["PING"],
        _ => vec!["NOSUCHCOMMAND", &key],
    };
    frame(&args)
}

/// Frames Redis must refuse with a protocol error, and the error's text.
const PROTOCOL_ERRORS: [(&[u8], &str); 5] = [
    (b"*1\r\n$-5\r\n", "invalid bulk length"),
    (b"*1\r\n$99999999999\r\n", "invalid bulk length"),
    (b"*abc\r\n", "invalid multibulk length"),
    (b"*1\r\nx3\r\nGET\r\n", "expected '$', got 'x'"),
    (
        b"SET \"unbalanced value\r\n",
        "unbalanced quotes in request",
    ),
];

/// One connection's bad input.
fn bad_input(random: &mut Random) -> Vec<u8> {
    match random.below(5) {
        0 => {
            let mut bytes = valid_command(random);
            let at = random.below(bytes.len());
            bytes[at] = u8::try_from(random.next() & 0xff).expect("a byte");
            bytes
        }
        1 => {
            let mut bytes = valid_command(random);
            bytes.remove(random.below(bytes.len()));
            bytes
        }
        2 => {
            let mut bytes = valid_command(random);
            bytes.truncate(random.below(bytes.len()));
            bytes
        }
        3 => (0..1 + random.below(512))
            .map(|_| u8::try_from(random.next() & 0xff).expect("a byte"))
            .collect(),
        _ => {
            // Several whole commands in one write: a pipeline.
            let mut bytes = Vec::new();
            for _ in 0..1 + random.below(5) {
                bytes.extend(valid_command(random));
            }
            bytes
        }
    }
}

/// Sends `bytes`, ends the connection's sending half and reads what
/// comes until Redis closes it; panics if it does not within the limit.
fn send_and_drain(port: u16, bytes: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect for the fuzz");
    stream
        .set_read_timeout(Some(REPLY_LIMIT))
        .expect("a read timeout");
    // Redis may close first (a protocol error): what it said still counts.
    let _ = stream.write_all(bytes);
    let _ = stream.shutdown(Shutdown::Write);
    let mut answer = Vec::new();
    let started = Instant::now();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return answer,
            Ok(read) => answer.extend_from_slice(&chunk[..read]),
            Err(error) if error.kind() == ErrorKind::ConnectionReset => return answer,
            Err(error) => panic!(
                "no end of the connection after {:?} ({error}) for {:?}",
                started.elapsed(),
                String::from_utf8_lossy(bytes)
            ),
        }
    }
}

/// The descriptor Redis serves `client` on (`CLIENT LIST`'s `fd=` of the
/// caller, from `CLIENT INFO`).
fn descriptor_of(client: &mut Client) -> u32 {
    let info = client.command(&["CLIENT", "INFO"]);
    info.split(' ')
        .find_map(|field| field.strip_prefix("fd="))
        .and_then(|fd| fd.parse().ok())
        .unwrap_or_else(|| panic!("CLIENT INFO has an fd: {info}"))
}

/// `INFO clients`' connected_clients.
fn connected_clients(client: &mut Client) -> usize {
    let info = client.command(&["INFO", "clients"]);
    info.lines()
        .find_map(|line| line.trim().strip_prefix("connected_clients:"))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("INFO clients has connected_clients: {info}"))
}

/// Waits until Redis counts `expected` clients.
fn settle_to(control: &mut Client, expected: usize) {
    let started = Instant::now();
    loop {
        let count = connected_clients(control);
        if count == expected {
            return;
        }
        assert!(
            started.elapsed() < SETTLE_LIMIT,
            "still {count} clients, not {expected}, after {SETTLE_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The soft limit on this process's open files (`/proc/self/limits`).
fn open_files_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[test]
fn native_redis_serves_a_thousand_connections_and_survives_bad_input() {
    skip_unless!(Need::Qemu);
    if let Some(limit) = open_files_limit().filter(|&limit| limit < CONNECTIONS + 100) {
        ebb_testbed::skip(
            ebb_testbed::function_name!(),
            &format!(
                "this process may open {limit} files, fewer than {CONNECTIONS} connections need"
            ),
        );
        return;
    }
    let tools = ["apt-get", "dpkg-source", "gcc", "make"];
    if let Err(reason) = c_support::build("redis", &tools, PREPARE_LIMIT) {
        ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
        return;
    }
    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let port = native_support::free_port();
    let guest = native_support::start_native_redis(&["--forward", &format!("{port}:6379")], 900);

    let mut control = Client::connect(port);
    assert_eq!(control.command(&["PING"]), "PONG");
    for i in 0..SURVIVORS {
        let (key, value) = (format!("survivor:{i}"), format!("kept-{i}"));
        assert_eq!(control.command(&["SET", &key, &value]), "OK");
    }
    let mut first = Client::connect(port);
    let first_fd = descriptor_of(&mut first);
    drop(first);
    settle_to(&mut control, 1);

    // 1,000 connections at once, every one served.
    let started = Instant::now();
    // Each is opened once the one before was served: QEMU's user-mode
    // forwarding accepts a host connection only when its loop comes round,
    // and a connection that arrives while one waits there is not taken
    // until the host retransmits its SYN a second later (measured here:
    // back to back, every other connect took 1.02 s). All stay open.
    let mut clients: Vec<Client> = Vec::with_capacity(CONNECTIONS);
    for i in 0..CONNECTIONS {
        let mut client = Client::connect(port);
        assert_eq!(
            client.command(&["SET", &format!("conn:{i}"), &i.to_string()]),
            "OK",
            "connection {i}'s SET"
        );
        clients.push(client);
    }
    assert_eq!(connected_clients(&mut control), CONNECTIONS + 1);
    for (i, client) in clients.iter_mut().enumerate() {
        client.send(&["GET", &format!("conn:{i}")]);
    }
    for (i, client) in clients.iter_mut().enumerate() {
        assert_eq!(client.reply(), i.to_string(), "connection {i}'s GET");
    }
    drop(clients);
    settle_to(&mut control, 1);
    eprintln!(
        "{CONNECTIONS} connections at once: every one served ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();

    // Crafted protocol errors: Redis's own replies.
    for (bytes, error) in PROTOCOL_ERRORS {
        let answer = String::from_utf8_lossy(&send_and_drain(port, bytes)).into_owned();
        assert!(
            answer.starts_with("-ERR Protocol error") && answer.contains(error),
            "{:?} got {answer:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    // Seeded bad input: every connection ends, none hangs.
    let mut random = Random(0x5eed_0019_4ed1_5ca7);
    let mut answered = 0;
    for _ in 0..FUZZ_CONNECTIONS {
        if !send_and_drain(port, &bad_input(&mut random)).is_empty() {
            answered += 1;
        }
    }
    eprintln!(
        "{FUZZ_CONNECTIONS} connections of bad input: {answered} answered, all ended ({:.1} s)",
        started.elapsed().as_secs_f64()
    );

    // Nothing leaked, nothing lost, the server well.
    settle_to(&mut control, 1);
    let mut last = Client::connect(port);
    assert_eq!(
        descriptor_of(&mut last),
        first_fd,
        "a new connection gets the descriptor one got at the start: none leaked"
    );
    drop(last);
    for i in 0..SURVIVORS {
        assert_eq!(
            control.command(&["GET", &format!("survivor:{i}")]),
            format!("kept-{i}"),
            "a key stored before the fuzz"
        );
    }
    assert_eq!(control.command(&["PING"]), "PONG");
    control.send(&["SHUTDOWN", "NOSAVE"]);
    drop(control);
    let console = guest.finish();
    assert!(
        console.contains("Redis is now ready to exit, bye bye..."),
        "{console}"
    );
    // `finish` checked the exit status; the reports' own words as well.
    for fault in ["ebbflow: PANIC", "ebbflow: exception"] {
        assert!(
            !console.contains(fault),
            "the guest reported a fault ({fault}):\n{console}"
        );
    }
}
