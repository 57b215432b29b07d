//! Hostile clients must not starve the others or grow the server without
//! bound (issue 15, defects 3–6): partial requests holding receive buffers,
//! replies nobody reads, replies larger than the send buffer, and running
//! out of file descriptors. Every socket here has a timeout, so a deadlock
//! fails the test instead of hanging it.

mod common;
mod native_boot;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use common::{start_ours, start_ours_with_file_limit, Client, Server};
use native_boot::NativeServer;

/// How long a client waits for any one read before calling the server dead.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

fn connect(server: &Server) -> TcpStream {
    connect_to(server.port)
}

fn connect_to(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
    stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
    stream
}

/// Sends `request` and reads until the reply ends with `last`.
fn ask(stream: &mut TcpStream, request: &[u8], last: &[u8]) -> Vec<u8> {
    stream.write_all(request).expect("sending a request");
    read_until_suffix(stream, last)
}

fn read_until_suffix(stream: &mut TcpStream, last: &[u8]) -> Vec<u8> {
    let mut reply = Vec::new();
    let mut chunk = vec![0; 1 << 16];
    while !reply.ends_with(last) {
        match stream.read(&mut chunk) {
            Ok(0) => panic!("the server closed after {} bytes of the reply", reply.len()),
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            Err(error) => panic!(
                "no reply within {READ_TIMEOUT:?} after {} bytes: {error}",
                reply.len()
            ),
        }
    }
    reply
}

/// Reads exactly `len` bytes.
fn read_exactly(stream: &mut TcpStream, len: usize) -> Vec<u8> {
    let mut reply = vec![0; len];
    let mut at = 0;
    while at < len {
        match stream.read(&mut reply[at..]) {
            Ok(0) => panic!("the server closed after {at} of {len} bytes"),
            Ok(n) => at += n,
            Err(error) => {
                panic!("no reply within {READ_TIMEOUT:?} after {at} of {len} bytes: {error}")
            }
        }
    }
    reply
}

/// The other client: it must get answers while the hostile ones hold on.
fn assert_serves(server: &Server, when: &str) {
    assert_serves_on(server.port, when);
}

fn assert_serves_on(port: u16, when: &str) {
    let mut client = connect_to(port);
    let version = ask(&mut client, b"version\r\n", b"\r\n");
    assert!(
        version.starts_with(b"VERSION "),
        "{when}: version answered {:?}",
        String::from_utf8_lossy(&version)
    );
    let stored = ask(&mut client, b"set canary 0 0 3\r\nyes\r\n", b"\r\n");
    assert_eq!(stored, b"STORED\r\n", "{when}: set");
    let got = ask(&mut client, b"get canary\r\n", b"END\r\n");
    assert_eq!(got, b"VALUE canary 0 3\r\nyes\r\nEND\r\n", "{when}: get");
}

/// One `stats` counter of the server on `port`.
fn stat(port: u16, name: &str) -> u64 {
    let mut client = connect_to(port);
    let stats = ask(&mut client, b"stats\r\n", b"END\r\n");
    let text = String::from_utf8_lossy(&stats);
    let prefix = format!("STAT {name} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in stats: {text}"))
}

/// Waits (a minute at most, polling) until the server on `port` has
/// counted what the test is about to rely on, instead of sleeping for a
/// guess: `what` names it in the failure.
fn wait_for_stat(port: u16, name: &str, what: &str, done: impl Fn(u64) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let value = stat(port, name);
        if done(value) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: {name} is still {value} after a minute"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the server runs");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status");
    kib * 1024
}

/// CPU time (user + system) the process used so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the server runs");
    // Fields after the command name (which may hold spaces, in parentheses):
    // state is field 3, utime 14 and stime 15 (proc(5)).
    let after_name = &stat[stat.rfind(')').expect("(comm)") + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    let utime: u64 = fields[11].parse().expect("utime");
    let stime: u64 = fields[12].parse().expect("stime");
    utime + stime
}

/// Defect 3, minimal trigger: each connection holds an unfinished request
/// line. With one core and 128 receive buffers per core, 128 of them used
/// to take every buffer, and nothing more was answered, even after they
/// closed. We hold 200 (more than the whole pool).
#[test]
fn unfinished_request_lines_do_not_starve_other_clients() {
    let server = start_ours(&[]);
    let idle = stat(server.port, "curr_connections");
    let holders: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut stream = connect(&server);
            stream.write_all(b"get x").expect("sending half a request");
            stream
        })
        .collect();
    // The server has received them all before the other client comes.
    wait_for_stat(server.port, "bytes_read", "200 × `get x`", |read| {
        read >= 200 * 5
    });
    assert_serves(&server, "while 200 connections hold `get x`");
    drop(holders);
    wait_for_stat(server.port, "curr_connections", "200 closes", |open| {
        open <= idle
    });
    assert_serves(&server, "after they closed");
}

/// Opens `count` connections that each start a `set` of `value_len` bytes
/// and send `pieces` writes of `piece_len` bytes of it, then wait.
fn start_partial_sets(
    port: u16,
    count: usize,
    value_len: usize,
    piece_len: usize,
    pieces: usize,
) -> Vec<TcpStream> {
    let piece = vec![b'v'; piece_len];
    (0..count)
        .map(|index| {
            let mut stream = connect_to(port);
            let line = format!("set partial{index} 0 0 {value_len}\r\n");
            stream.write_all(line.as_bytes()).expect("sending a set");
            for _ in 0..pieces {
                stream.write_all(&piece).expect("sending part of a value");
            }
            stream
        })
        .collect()
}

/// Defect 3, realistic trigger: 300 clients each upload part of a 1 MB
/// `set` (100 KB, in 10 KB writes) and stop, with `-m 64`.
#[test]
fn partial_large_sets_do_not_starve_other_clients() {
    const VALUE_LEN: usize = 1_000_000;
    let server = start_ours(&["-m", "64"]);
    let mut keeper = connect(&server);
    let stored = ask(&mut keeper, b"set kept 0 0 4\r\nkept\r\n", b"\r\n");
    assert_eq!(stored, b"STORED\r\n");
    let idle = stat(server.port, "curr_connections");
    let holders = start_partial_sets(server.port, 300, VALUE_LEN, 10 * 1024, 10);
    wait_for_stat(server.port, "bytes_read", "300 × 100 KB", |read| {
        read >= 300 * 100 * 1024
    });
    assert_serves(&server, "while 300 partial 1 MB sets wait");
    let kept = ask(&mut keeper, b"get kept\r\n", b"END\r\n");
    assert_eq!(kept, b"VALUE kept 0 4\r\nkept\r\nEND\r\n");
    drop(holders);
    wait_for_stat(server.port, "curr_connections", "300 closes", |open| {
        open <= idle
    });
    assert_serves(&server, "after they closed");
    let kept = ask(&mut keeper, b"get kept\r\n", b"END\r\n");
    assert_eq!(kept, b"VALUE kept 0 4\r\nkept\r\nEND\r\n");
}

/// Defect 3 and the build's "globally": values still arriving are held
/// within `-m`, as memcached allocates a `set`'s item before reading its
/// value. 150 clients each send 900 KB of a 1 MB value with `-m 64`: the
/// server used to buffer all of them (135 MB); now the values that fit in
/// the limit are held and the others are refused at once with memcached's
/// `SERVER_ERROR out of memory storing object`, their bytes swallowed.
#[test]
fn partial_values_are_held_within_the_memory_limit() {
    const CLIENTS: usize = 150;
    const VALUE_LEN: usize = 1_000_000;
    const SENT: usize = 900_000;
    const LIMIT: u64 = 64 << 20;
    let server = start_ours(&["-m", "64"]);
    let idle_rss = resident_bytes(server.pid());
    let piece = vec![b'v'; SENT];
    let mut clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|index| {
            let mut stream = connect(&server);
            let line = format!("set partial{index} 0 0 {VALUE_LEN}\r\n");
            stream.write_all(line.as_bytes()).expect("sending a set");
            stream.write_all(&piece).expect("sending most of its value");
            stream
        })
        .collect();
    wait_for_stat(server.port, "bytes_read", "150 × 900 KB", |read| {
        read >= (CLIENTS * SENT) as u64
    });
    let rss = resident_bytes(server.pid());
    let bound = LIMIT * 12 / 10 + idle_rss + (4 << 20);
    assert!(
        rss <= bound,
        "values still arriving grew the server to {rss} bytes of RSS (bound {bound})"
    );
    // As many values as fit in -m are held; the others were refused.
    let refusal = b"SERVER_ERROR out of memory storing object\r\n";
    let mut refused = vec![false; CLIENTS];
    for (client, refused) in clients.iter_mut().zip(&mut refused) {
        client
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut reply = [0; 64];
        if let Ok(n) = client.read(&mut reply) {
            assert_eq!(
                &reply[..n],
                refusal,
                "a reply before the value was complete"
            );
            *refused = true;
        }
        client.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    }
    let held = refused.iter().filter(|refused| !**refused).count();
    let fit = usize::try_from(LIMIT).unwrap() / (VALUE_LEN + 2);
    assert!(
        (fit / 2..=fit).contains(&held),
        "{held} of {CLIENTS} partial 1 MB values held with -m 64 (at most {fit} fit)"
    );
    // The rest of every value: the held ones are stored, the refused ones
    // swallowed, and every connection goes on.
    let mut rest = vec![b'v'; VALUE_LEN - SENT];
    rest.extend_from_slice(b"\r\n");
    for (client, refused) in clients.iter_mut().zip(&refused) {
        client.write_all(&rest).expect("sending the rest");
        let reply = ask(client, b"version\r\n", b"\r\n");
        let reply = String::from_utf8_lossy(&reply);
        if *refused {
            assert!(
                reply.starts_with("VERSION "),
                "after a refused value: {reply}"
            );
        } else {
            assert!(reply.starts_with("STORED\r\n"), "a held value: {reply}");
        }
    }
    assert_serves(&server, "after the partial values");
}

/// Defect 3 natively: a connection's unfinished request used to keep up to
/// 4 of the device's 1,024 receive buffers (2 KiB frames), so about 270
/// slow clients took them all. 300 connections here each send a `set` line
/// and four frames' worth of its value, then wait.
#[test]
fn native_partial_sets_do_not_starve_other_clients() {
    let port = common::free_port();
    let _server = NativeServer::start(
        &["--timeout", "900", "--forward", &format!("{port}:11211")],
        &[],
    );
    let idle = stat(port, "curr_connections");
    let holders = start_partial_sets(port, 300, 100_000, 5_500, 1);
    wait_for_stat(port, "bytes_read", "300 × 5,500 bytes", |read| {
        read >= 300 * 5_500
    });
    assert_serves_on(port, "natively, while 300 partial sets wait");
    drop(holders);
    wait_for_stat(port, "curr_connections", "300 closes", |open| open <= idle);
    assert_serves_on(port, "natively, after they closed");
}

/// Stores `count` values of `len` bytes as k0, k1, ….
fn store_large_values(stream: &mut TcpStream, count: usize, len: usize) {
    let value = vec![b'x'; len];
    for index in 0..count {
        let mut request = format!("set k{index} 0 0 {len}\r\n").into_bytes();
        request.extend_from_slice(&value);
        request.extend_from_slice(b"\r\n");
        assert_eq!(
            ask(stream, &request, b"\r\n"),
            b"STORED\r\n",
            "set k{index}"
        );
    }
}

/// The size of the large values: 1 MB, within the default `-I` (1 MiB)
/// with the item's key and header.
const LARGE_VALUE_LEN: usize = 1_000_000;

/// Our server holding k0…k9 of `LARGE_VALUE_LEN` bytes, and a connection to it.
fn server_with_ten_large_values() -> (Server, TcpStream) {
    let server = start_ours(&[]);
    let mut stream = connect(&server);
    store_large_values(&mut stream, 10, LARGE_VALUE_LEN);
    (server, stream)
}

fn value_reply_len(index: usize, len: usize) -> usize {
    value_reply_len_named(&format!("k{index}"), len)
}

/// Defect 5: one `get k0 … k9` of 1 MB values (10 MB of reply, past the
/// send credit) used to wedge the connection forever.
#[test]
fn multi_get_of_ten_1mb_values_completes() {
    let (_server, mut stream) = server_with_ten_large_values();
    let keys: Vec<String> = (0..10).map(|index| format!("k{index}")).collect();
    let request = format!("get {}\r\n", keys.join(" "));
    let expected: usize = (0..10)
        .map(|index| value_reply_len(index, LARGE_VALUE_LEN))
        .sum::<usize>()
        + 5;
    stream.write_all(request.as_bytes()).unwrap();
    let reply = read_exactly(&mut stream, expected);
    assert!(reply.ends_with(b"END\r\n"));
    // The connection still works after it.
    let got = ask(&mut stream, b"version\r\n", b"\r\n");
    assert!(got.starts_with(b"VERSION "));
}

/// Defect 5: ten pipelined `get`s of 1 MB values.
#[test]
fn ten_pipelined_1mb_gets_complete() {
    let (_server, mut stream) = server_with_ten_large_values();
    let request: String = (0..10).map(|index| format!("get k{index}\r\n")).collect();
    let expected: usize = (0..10)
        .map(|index| value_reply_len(index, LARGE_VALUE_LEN) + 5)
        .sum();
    stream.write_all(request.as_bytes()).unwrap();
    let reply = read_exactly(&mut stream, expected);
    assert_eq!(
        reply
            .windows(5)
            .filter(|window| window == b"END\r\n")
            .count(),
        10
    );
    // The connection still works after it.
    let got = ask(&mut stream, b"version\r\n", b"\r\n");
    assert!(got.starts_with(b"VERSION "));
}

/// Defect 4 (and 5's pipeline shape): a client pipelines `get`s without
/// reading the replies. The server must stop reading its requests (so its
/// memory stays bounded), keep answering others, and deliver every reply
/// once the client reads.
///
/// 200,000 gets of a 1,000-byte value make 205 MB of replies, about 50
/// times what the kernel's socket buffers hold on both sides; the issue's
/// 1,000,000 exercise nothing more and take five times longer.
#[test]
fn unread_pipelined_gets_are_bounded_and_all_delivered() {
    const GETS: usize = 200_000;
    const LEN: usize = 1_000;
    /// Growth allowed over the RSS before the pipeline: the send buffer,
    /// one batch of reply headers and the receive buffers, with room.
    const RSS_GROWTH_BOUND: u64 = 16 << 20;
    let server = start_ours(&[]);
    let mut setup = connect(&server);
    let mut request = format!("set k 0 0 {LEN}\r\n").into_bytes();
    request.extend_from_slice(&vec![b'y'; LEN]);
    request.extend_from_slice(b"\r\n");
    assert_eq!(ask(&mut setup, &request, b"\r\n"), b"STORED\r\n");
    let rss_before = resident_bytes(server.pid());

    let mut pipeliner = connect(&server);
    pipeliner.set_write_timeout(None).unwrap();
    let mut writer = pipeliner.try_clone().unwrap();
    let sending = thread::spawn(move || {
        let batch = b"get k\r\n".repeat(1000);
        for _ in 0..GETS / 1000 {
            writer.write_all(&batch).expect("pipelining gets");
        }
    });
    // The writer fills every buffer between it and the server and blocks.
    thread::sleep(Duration::from_secs(2));
    let rss_stalled = resident_bytes(server.pid());
    for round in 0..50 {
        let got = ask(&mut setup, b"get k\r\n", b"END\r\n");
        assert_eq!(
            got.len(),
            value_reply_len_named("k", LEN) + 5,
            "round {round}"
        );
    }
    assert!(
        rss_stalled < rss_before + RSS_GROWTH_BOUND,
        "the server grew from {rss_before} to {rss_stalled} bytes of RSS for one client's unread replies"
    );

    let per_reply = value_reply_len_named("k", LEN) + 5;
    let mut delivered = 0usize;
    let mut chunk = vec![0; 1 << 20];
    while delivered < GETS * per_reply {
        match pipeliner.read(&mut chunk) {
            Ok(0) => panic!("the server closed after {delivered} bytes"),
            Ok(n) => delivered += n,
            Err(error) => panic!(
                "replies stalled at {} of {GETS} after {READ_TIMEOUT:?}: {error}",
                delivered / per_reply
            ),
        }
    }
    assert_eq!(delivered, GETS * per_reply);
    sending.join().expect("the writer finished");
}

fn value_reply_len_named(key: &str, len: usize) -> usize {
    format!("VALUE {key} 0 {len}\r\n").len() + len + 2
}

/// Defect 6: out of file descriptors, the server must not spin on accept;
/// it keeps serving the connections it has and accepts again once some
/// close.
#[test]
fn out_of_file_descriptors_no_spin_and_recovers() {
    /// Clock ticks (1/100 s on Linux) the idle server may use in the
    /// window: 0.5 s of 2 s, where a spin uses all 2 s.
    const TICKS_BOUND: u64 = 50;
    let server = start_ours_with_file_limit(64, &[]);
    let mut served: Vec<Client> = (0..8).map(|_| Client::connect(&server)).collect();
    for client in &mut served {
        assert!(client.text(b"version\r\n").starts_with(b"VERSION "));
    }
    // More connections than descriptors: the kernel completes them (the
    // listen backlog), the server cannot accept them all.
    let flood: Vec<TcpStream> = (0..100).map(|_| connect(&server)).collect();
    thread::sleep(Duration::from_millis(500));
    let before = cpu_ticks(server.pid());
    thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(server.pid()) - before;
    assert!(
        used <= TICKS_BOUND,
        "out of descriptors, the idle server used {used} ticks of CPU in 2 s"
    );
    for client in &mut served {
        assert!(
            client.text(b"version\r\n").starts_with(b"VERSION "),
            "an open connection is still served"
        );
    }
    drop(flood);
    drop(served);
    thread::sleep(Duration::from_millis(500));
    assert_serves(&server, "after the others closed");
}
