//! Native memcached within its guest's RAM (issue 15, defect 1): a `-m`
//! larger than RAM allows is clamped with a warning, and filling the
//! guest far beyond `-m` with tiny items and with 1 MB values evicts,
//! keeps serving (no allocation failure panics the guest) and keeps a key
//! that is read throughout.

mod common;
mod native_boot;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{free_port, Client};
use native_boot::NativeServer;

/// Guest RAM: 96 MiB allow `-m` 30 MiB (`memcached::memory`).
const GUEST_MEM: &str = "96M";

fn stat(client: &mut Client, request: &[u8], name: &str) -> u64 {
    let reply = String::from_utf8(client.text(request)).unwrap();
    reply
        .lines()
        .find_map(|line| line.strip_prefix(&format!("STAT {name} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no stat {name} in {reply:?}"))
}

/// Boots memcached with `args` in a [`GUEST_MEM`] guest, forwarded from a
/// free port on 127.0.0.1 (returned).
fn boot(args: &[&str]) -> (u16, NativeServer) {
    let port = free_port();
    let mut full = vec!["-U", "0", "-l", "0.0.0.0"];
    full.extend_from_slice(args);
    let native = NativeServer::start(
        &["--mem", GUEST_MEM, "--forward", &format!("{port}:11211")],
        &full,
    );
    (port, native)
}

/// Sends `count` `noreply` sets of `len`-byte values under `prefix`, in
/// batches, reading `known` after each batch (so it stays recently used)
/// and checking it is still there.
fn fill(port: u16, prefix: &str, count: usize, len: usize, known: &mut Client) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let batch_items = (256 * 1024 / (len + 40)).max(1);
    let mut batch = Vec::new();
    for index in 0..count {
        batch.extend_from_slice(format!("set {prefix}:{index} 0 0 {len} noreply\r\n").as_bytes());
        batch.resize(batch.len() + len, b'v');
        batch.extend_from_slice(b"\r\n");
        if (index + 1) % batch_items == 0 || index + 1 == count {
            batch.extend_from_slice(b"mn\r\n");
            stream.write_all(&batch).unwrap();
            batch.clear();
            let mut reply = Vec::new();
            let mut chunk = [0; 64];
            while !reply.ends_with(b"MN\r\n") {
                let n = stream.read(&mut chunk).unwrap();
                assert!(n > 0, "the guest closed the connection during the fill");
                reply.extend_from_slice(&chunk[..n]);
            }
            assert_eq!(reply, b"MN\r\n", "a noreply set answered");
            assert_eq!(
                known.text(b"get known\r\n"),
                b"VALUE known 0 5\r\nalive\r\nEND\r\n",
                "the key read throughout was evicted"
            );
        }
    }
}

#[test]
fn native_fill_beyond_memory_evicts_and_keeps_serving() {
    ebb_testbed::skip_unless!(ebb_testbed::Need::Qemu);
    let (port, native) = boot(&["-m", "1024"]);
    assert!(
        native.console.text().contains("-m 1024 MiB is more than"),
        "no warning that -m was clamped:\n{}",
        native.console.text()
    );
    let mut known = Client::connect_to(port);
    let limit = stat(&mut known, b"stats settings\r\n", "maxbytes");
    // What the guest's usable RAM (96 MiB less the image and firmware's
    // share) allows.
    let most = memcached::memory::memory_allowed(96 << 20) as u64;
    assert!(
        (most / 2..=most).contains(&limit),
        "-m 1024 became {limit} bytes in a 96 MiB guest (at most {most})"
    );
    assert_eq!(known.text(b"set known 0 0 5\r\nalive\r\n"), b"STORED\r\n");

    // Tiny items: about 150 bytes each, 3 × -m of them.
    let tiny = usize::try_from(3 * limit / 150).unwrap();
    fill(port, "tiny", tiny, 10, &mut known);
    let after_tiny = stat(&mut known, b"stats\r\n", "evictions");
    assert!(after_tiny > 0, "{tiny} tiny items evicted nothing");

    // 1 MB values, 2 × -m of them.
    let large = usize::try_from(2 * limit / 1_000_000).unwrap();
    fill(port, "large", large, 1_000_000, &mut known);
    let after_large = stat(&mut known, b"stats\r\n", "evictions");
    assert!(
        after_large > after_tiny,
        "{large} values of 1 MB evicted nothing"
    );
    assert!(
        known.text(b"version\r\n").starts_with(b"VERSION "),
        "the guest stopped serving:\n{}",
        native.console.text()
    );
    assert!(
        !native.console.text().contains("panicked"),
        "the guest panicked:\n{}",
        native.console.text()
    );
}

/// Keys in the multiget of [`native_multiget_beyond_memory_is_refused_without_a_panic`]:
/// a 2.4 MB request line (under memcached's limit for a `get` line) whose
/// reply, gathered before it is sent, needs far more than the guest's RAM
/// (a header and three segments per hit).
const MULTIGET_KEYS: usize = 1_200_000;

/// The value those keys name: longer than replies copy
/// (`COPIED_VALUE_LIMIT`, 1 KiB), so that each hit is chained as the stored
/// value itself and costs its segments, as the test intends. (A copied
/// value's reply outgrowing memory is `tests/out_of_memory.rs`'s.)
const MULTIGET_VALUE_LEN: usize = 2_000;

/// An allocation that fails on the request path is answered, not a
/// panic: a multiget whose reply outgrows the guest's RAM gets memcached's
/// `SERVER_ERROR out of memory writing get response`, and the guest goes
/// on serving.
#[test]
fn native_multiget_beyond_memory_is_refused_without_a_panic() {
    ebb_testbed::skip_unless!(ebb_testbed::Need::Qemu);
    let (port, native) = boot(&[]);
    let mut client = Client::connect_to(port);
    let value = vec![b'v'; MULTIGET_VALUE_LEN];
    let mut set = format!("set k 0 0 {MULTIGET_VALUE_LEN}\r\n").into_bytes();
    set.extend_from_slice(&value);
    set.extend_from_slice(b"\r\n");
    assert_eq!(client.text(&set), b"STORED\r\n");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(300)))
        .unwrap();
    let mut request = b"get".to_vec();
    for _ in 0..MULTIGET_KEYS {
        request.extend_from_slice(b" k");
    }
    request.extend_from_slice(b"\r\n");
    stream.write_all(&request).unwrap();
    let expected = b"SERVER_ERROR out of memory writing get response\r\n";
    let mut reply = Vec::new();
    let mut chunk = [0; 4096];
    while reply.len() < expected.len() {
        let n = stream.read(&mut chunk).unwrap();
        assert!(
            n > 0,
            "the guest closed the connection:\n{}",
            native.console.text()
        );
        reply.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(
        String::from_utf8_lossy(&reply),
        String::from_utf8_lossy(expected)
    );
    let mut one = format!("VALUE k 0 {MULTIGET_VALUE_LEN}\r\n").into_bytes();
    one.extend_from_slice(&value);
    one.extend_from_slice(b"\r\nEND\r\n");
    assert_eq!(client.text(b"get k\r\n"), one);
    assert!(
        !native.console.text().contains("panicked"),
        "the guest panicked:\n{}",
        native.console.text()
    );
}
