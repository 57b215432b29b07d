//! `watch` (issue 15, defect 11): a connection that asks to watch the
//! `fetchers` and `mutations` streams gets `OK` and then one log line per
//! lookup and per store, in memcached 1.6.18's format (logger.c's
//! `item_get` and `item_store` entries), while another client works, in
//! the text, meta and binary protocols.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{start_ours, start_stock, Server};

/// Opens a connection with read and write timeouts.
fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
}

/// Sends `request` and reads until the reply ends with `end`.
fn ask(stream: &mut TcpStream, request: &[u8], end: &str) -> String {
    stream.write_all(request).unwrap();
    let mut reply = Vec::new();
    let mut buf = [0; 4096];
    while !String::from_utf8_lossy(&reply).ends_with(end) {
        let n = stream.read(&mut buf).expect("reply within the timeout");
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&reply));
        reply.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(reply).unwrap()
}

/// A log line with the values that differ between runs and servers (time,
/// global id, client descriptor, slab class) replaced by their names.
fn normalize(line: &str) -> String {
    line.split(' ')
        .map(|field| match field.split_once('=') {
            Some((name @ ("ts" | "gid" | "cfd" | "clsid"), _)) => format!("{name}=_"),
            _ => field.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The client's commands, each a store or a lookup that stock logs once
/// (its storage commands also log the lookup they make first: those
/// `item_get` lines are filtered out below, see `watched`).
const SESSION: &[(&[u8], &str)] = &[
    (b"set k 5 0 3\r\nabc\r\n", "STORED\r\n"),
    (b"get k\r\n", "END\r\n"),
    (b"get nope\r\n", "END\r\n"),
    (b"set n 0 100 1\r\n1\r\n", "STORED\r\n"),
    (b"add n 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
    (b"gets n\r\n", "END\r\n"),
    (b"delete k\r\n", "DELETED\r\n"),
    (b"mg n s v\r\n", "\r\n1\r\n"),
    (b"ms m 2 T0\r\nhi\r\n", "HD\r\n"),
    (b"incr n 1\r\n", "2\r\n"),
    (b"decr nope 1\r\n", "NOT_FOUND\r\n"),
    (b"ma n\r\n", "HD\r\n"),
    (b"md m\r\n", "HD\r\n"),
    (b"get a%20b\r\n", "END\r\n"),
];

/// A binary protocol request (protocol_binary.txt): `opcode`, `extras`,
/// `key` and `value`, opaque and CAS 0.
fn binary_request(opcode: u8, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
    let body = extras.len() + key.len() + value.len();
    let mut request = vec![0x80, opcode];
    request.extend_from_slice(&u16::try_from(key.len()).unwrap().to_be_bytes());
    request.extend_from_slice(&[u8::try_from(extras.len()).unwrap(), 0, 0, 0]);
    request.extend_from_slice(&u32::try_from(body).unwrap().to_be_bytes());
    request.extend_from_slice(&[0; 12]);
    request.extend_from_slice(extras);
    request.extend_from_slice(key);
    request.extend_from_slice(value);
    request
}

/// A binary `set b` of 2 bytes and a `get b`, which stock logs like their
/// text forms; the replies' lengths: 24 (header) and 24 + 4 (flags) + 2.
fn binary_session(server: &Server) {
    let mut client = connect(server);
    let set = binary_request(0x01, &[0; 8], b"b", b"xy");
    let get = binary_request(0x00, &[], b"b", &[]);
    for (request, reply_len) in [(set, 24), (get, 30)] {
        client.write_all(&request).unwrap();
        let mut reply = vec![0; reply_len];
        client.read_exact(&mut reply).expect("a binary reply");
        assert_eq!(reply[6..8], [0, 0], "binary status: {reply:?}");
    }
}

/// The normalized lines a watcher of `streams` sees while a client runs
/// `SESSION`, without the `item_get` line stock logs before each store.
fn watched(server: &Server, streams: &[u8]) -> Vec<String> {
    let mut watcher = connect(server);
    assert_eq!(ask(&mut watcher, streams, "\r\n"), "OK\r\n");
    let mut client = connect(server);
    let (last, session) = SESSION.split_last().unwrap();
    for (request, end) in session {
        ask(&mut client, request, end);
    }
    binary_session(server);
    ask(&mut client, last.0, last.1);
    let mut lines: Vec<String> = Vec::new();
    let mut reader = BufReader::new(watcher);
    let deadline = Instant::now() + Duration::from_secs(10);
    // The last command's line ends the session.
    while Instant::now() < deadline && !lines.last().is_some_and(|last| last.contains("a%2520b")) {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        lines.push(line);
    }
    let mut seen: Vec<String> = lines.iter().map(|line| normalize(line)).collect();
    // Stock logs the lookup `set` and `add` make before storing (an
    // `item_get` just before each `item_store` of the same key); ours logs
    // the commands' own lookups only.
    let mut i = 0;
    while i + 1 < seen.len() {
        let key = seen[i].split(' ').find(|field| field.starts_with("key="));
        let store_of_key_follows = seen[i + 1].contains("type=item_store")
            && key.is_some_and(|key| seen[i + 1].split(' ').any(|field| field == key));
        if seen[i].contains("type=item_get") && store_of_key_follows {
            seen.remove(i);
        } else {
            i += 1;
        }
    }
    seen
}

const EXPECTED: &[&str] = &[
    "ts=_ gid=_ type=item_store key=k status=stored cmd=set ttl=0 clsid=_ cfd=_ size=3\n",
    "ts=_ gid=_ type=item_get key=k status=found clsid=_ cfd=_ size=3\n",
    "ts=_ gid=_ type=item_get key=nope status=not_found clsid=_ cfd=_ size=0\n",
    "ts=_ gid=_ type=item_store key=n status=stored cmd=set ttl=100 clsid=_ cfd=_ size=1\n",
    "ts=_ gid=_ type=item_store key=n status=not_stored cmd=add ttl=0 clsid=_ cfd=_ size=1\n",
    "ts=_ gid=_ type=item_get key=n status=found clsid=_ cfd=_ size=1\n",
    "ts=_ gid=_ type=item_get key=k status=found clsid=_ cfd=_ size=3\n",
    "ts=_ gid=_ type=item_get key=n status=found clsid=_ cfd=_ size=1\n",
    "ts=_ gid=_ type=item_store key=m status=stored cmd=set ttl=0 clsid=_ cfd=_ size=2\n",
    "ts=_ gid=_ type=item_get key=n status=found clsid=_ cfd=_ size=1\n",
    "ts=_ gid=_ type=item_get key=nope status=not_found clsid=_ cfd=_ size=0\n",
    "ts=_ gid=_ type=item_get key=n status=found clsid=_ cfd=_ size=1\n",
    "ts=_ gid=_ type=item_get key=m status=found clsid=_ cfd=_ size=2\n",
    "ts=_ gid=_ type=item_store key=b status=stored cmd=set ttl=0 clsid=_ cfd=_ size=2\n",
    "ts=_ gid=_ type=item_get key=b status=found clsid=_ cfd=_ size=2\n",
    "ts=_ gid=_ type=item_get key=a%2520b status=not_found clsid=_ cfd=_ size=0\n",
];

#[test]
fn watch_fetchers_and_mutations_streams_lookups_and_stores() {
    let server = start_ours(&[]);
    let seen = watched(&server, b"watch fetchers mutations\r\n");
    assert_eq!(seen, EXPECTED);
}

#[test]
fn watch_lines_match_stock_memcached() {
    let stock = start_stock(&["-u", "root"]);
    let seen = watched(&stock, b"watch fetchers mutations\r\n");
    assert_eq!(seen, EXPECTED);
}

#[test]
fn watch_without_streams_watches_fetchers_only_and_ignores_commands() {
    let server = start_ours(&[]);
    let mut watcher = connect(&server);
    assert_eq!(ask(&mut watcher, b"watch\r\n", "\r\n"), "OK\r\n");
    // A watching connection reads no more commands (as in 1.6.18).
    watcher.write_all(b"version\r\n").unwrap();
    let mut client = connect(&server);
    ask(&mut client, b"set k 0 0 1\r\nx\r\n", "STORED\r\n");
    ask(&mut client, b"get k\r\n", "END\r\n");
    let mut line = String::new();
    BufReader::new(watcher).read_line(&mut line).unwrap();
    assert_eq!(
        normalize(&line),
        "ts=_ gid=_ type=item_get key=k status=found clsid=_ cfd=_ size=1\n"
    );
}

#[test]
fn watch_stops_when_the_watcher_closes_and_bad_streams_are_errors() {
    let server = start_ours(&[]);
    let mut client = connect(&server);
    for round in 0..3 {
        let mut watcher = connect(&server);
        assert_eq!(ask(&mut watcher, b"watch mutations\r\n", "\r\n"), "OK\r\n");
        ask(&mut client, b"set k 0 0 1\r\nx\r\n", "STORED\r\n");
        let mut line = String::new();
        BufReader::new(&mut watcher).read_line(&mut line).unwrap();
        assert!(
            line.contains("type=item_store key=k"),
            "round {round}: {line}"
        );
    }
    // The closed watchers are gone: the server still answers at once.
    assert_eq!(
        ask(&mut client, b"get k\r\n", "END\r\n"),
        "VALUE k 0 1\r\nx\r\nEND\r\n"
    );
    for bad in [&b"watch bogus\r\n"[..], b"watch fetchers bogus\r\n"] {
        assert_eq!(ask(&mut client, bad, "\r\n"), "ERROR\r\n");
    }
}

/// Reads from `watcher` until `marker` appears in a line or nothing comes
/// for the timeout; returns the log lines read and the sum of the
/// `skipped=N` lines.
fn drain(watcher: &mut BufReader<TcpStream>, marker: &str) -> (u64, u64, bool) {
    let (mut lines, mut skipped) = (0, 0);
    loop {
        let mut line = String::new();
        match watcher.read_line(&mut line) {
            Ok(0) => panic!("the watcher was closed"),
            Ok(_) => {}
            Err(_) => return (lines, skipped, false),
        }
        if let Some(count) = line.strip_prefix("skipped=") {
            skipped += count.trim_end().parse::<u64>().expect("skipped=N");
            continue;
        }
        assert!(line.starts_with("ts=") && line.ends_with('\n'), "{line:?}");
        lines += 1;
        if line.contains(marker) {
            return (lines, skipped, true);
        }
    }
}

#[test]
fn a_watcher_that_does_not_read_skips_lines_and_counts_them() {
    let server = start_ours(&[]);
    let mut watcher = connect(&server);
    assert_eq!(ask(&mut watcher, b"watch fetchers\r\n", "\r\n"), "OK\r\n");
    watcher
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut client = connect(&server);
    // 60,000 misses with 250-byte keys: about 20 MB of log lines, more
    // than the socket buffers of a watcher that does not read can hold.
    let key = "k".repeat(250);
    let batch: Vec<u8> = format!("get {key}\r\n").repeat(1000).into_bytes();
    let mut events = 0;
    for _ in 0..60 {
        ask(&mut client, &batch, &"END\r\n".repeat(1000));
        events += 1000;
    }
    let mut watcher = BufReader::new(watcher);
    let (mut lines, mut skipped, _) = drain(&mut watcher, "key=final");
    // Now that the watcher reads, the next line comes after `skipped=N`.
    for _ in 0..10 {
        ask(&mut client, b"get final\r\n", "END\r\n");
        events += 1;
        let (more_lines, more_skipped, seen) = drain(&mut watcher, "key=final");
        lines += more_lines;
        skipped += more_skipped;
        if seen {
            break;
        }
    }
    assert!(skipped > 0, "nothing skipped of {events} lines");
    assert!(lines > 0, "nothing delivered");
    assert_eq!(lines + skipped, events, "every line delivered or counted");
}

#[test]
fn a_watcher_sees_the_events_of_every_core() {
    let server = start_ours(&["-t", "2"]);
    let mut watcher = connect(&server);
    assert_eq!(ask(&mut watcher, b"watch fetchers\r\n", "\r\n"), "OK\r\n");
    // Eight clients: the server spreads connections over its two cores.
    let mut clients: Vec<TcpStream> = (0..8).map(|_| connect(&server)).collect();
    for (i, client) in clients.iter_mut().enumerate() {
        ask(client, format!("get c{i}\r\n").as_bytes(), "END\r\n");
    }
    let mut reader = BufReader::new(watcher);
    let mut keys = Vec::new();
    for _ in 0..8 {
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .expect("a line within the timeout");
        let key = line.split(' ').find(|field| field.starts_with("key="));
        keys.push(key.expect("key=").to_string());
    }
    keys.sort();
    let expected: Vec<String> = (0..8).map(|i| format!("key=c{i}")).collect();
    assert_eq!(keys, expected);
}

#[test]
fn watching_does_not_change_what_it_logs() {
    // The lookup logged for `incr` (and delete, `ma`, `md`) does not count
    // as a fetch: `mg … h` says the item was never fetched, as without a
    // watcher (memcached's lookups for these do not bump the item).
    let server = start_ours(&[]);
    let mut watcher = connect(&server);
    assert_eq!(ask(&mut watcher, b"watch fetchers\r\n", "\r\n"), "OK\r\n");
    let mut client = connect(&server);
    assert_eq!(
        ask(&mut client, b"set k 0 0 1\r\n1\r\n", "\r\n"),
        "STORED\r\n"
    );
    assert_eq!(ask(&mut client, b"incr k 1\r\n", "\r\n"), "2\r\n");
    assert_eq!(ask(&mut client, b"mg k h\r\n", "\r\n"), "HD h0\r\n");
}
