//! The client of `./ebb bench cluster-memcached` against three stock
//! memcached servers on loopback: the ketama split stores each key on the
//! server libmemcached would pick, and a measured run then finds every key
//! where it was stored (no miss, no error).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use ebb_bench::cluster_memcached::{drive, ketama_targets, Point};
use ebb_bench::memcached::{Launch, Server, Which};
use ebb_loadgen::workload::KeySpace;
use ebb_loadgen::{Config, SizeDist};
use ebb_testbed::{skip_unless, Need};

const KEYS: u64 = 3000;
const LIMIT: Duration = Duration::from_secs(5);

/// `curr_items` from the server's `stats`, within [`LIMIT`].
fn items(server: SocketAddr) -> u64 {
    let mut stream = TcpStream::connect_timeout(&server, LIMIT).expect("connect for stats");
    stream.set_read_timeout(Some(LIMIT)).expect("timeout");
    stream.write_all(b"stats\r\n").expect("send stats");
    let mut lines = BufReader::new(stream).lines();
    loop {
        let line = lines.next().expect("a stats line").expect("read stats");
        if let Some(count) = line.strip_prefix("STAT curr_items ") {
            return count.trim().parse().expect("a count");
        }
        assert_ne!(line, "END", "{server}: stats without curr_items");
    }
}

/// The real libmemcached (`MEMCACHED_BEHAVIOR_KETAMA`, driven from Python
/// through ctypes) finds the first 300 keys where our client stored them:
/// it asks only the server ketama names, so a key placed elsewhere is a
/// miss. Skipped without python3 or `libmemcached.so.11`.
fn libmemcached_finds(servers: &[SocketAddr], keys: &KeySpace) {
    const SCRIPT: &str = r#"
import ctypes, sys
lib = ctypes.CDLL("libmemcached.so.11")
lib.memcached_create.restype = ctypes.c_void_p
lib.memcached_create.argtypes = [ctypes.c_void_p]
lib.memcached_behavior_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64]
lib.memcached_server_add.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint16]
lib.memcached_get.restype = ctypes.c_void_p
lib.memcached_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_int)]
memc = lib.memcached_create(None)
assert lib.memcached_behavior_set(memc, 3, 1) == 0  # MEMCACHED_BEHAVIOR_KETAMA
for server in sys.argv[1].split(","):
    host, port = server.rsplit(":", 1)
    assert lib.memcached_server_add(memc, host.encode(), int(port)) == 0
found = 0
for key in sys.stdin.read().split():
    length, flags, error = ctypes.c_size_t(), ctypes.c_uint32(), ctypes.c_int()
    if lib.memcached_get(memc, key.encode(), len(key), length, flags, error):
        found += 1
print(found)
"#;
    if ebb_testbed::require(&[Need::Python3]).is_err()
        || !std::path::Path::new("/usr/lib/x86_64-linux-gnu/libmemcached.so.11").exists()
    {
        ebb_testbed::skip(
            "a_ketama_client_finds_every_key_on_the_server_it_stored_it_on (libmemcached half)",
            "needs python3 and libmemcached.so.11 (Debian: libmemcached11)",
        );
        return;
    }
    let list: Vec<String> = servers.iter().map(ToString::to_string).collect();
    let wanted: Vec<String> = (0..300)
        .map(|i| String::from_utf8_lossy(keys.key(i)).into_owned())
        .collect();
    let mut child = std::process::Command::new("timeout")
        .args(["20", "python3", "-c", SCRIPT, &list.join(",")])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(wanted.join("\n").as_bytes())
        .expect("keys to python3");
    let output = child.wait_with_output().expect("python3 ends");
    assert!(output.status.success(), "python3: {:?}", output.status);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "300");
}

#[test]
fn a_ketama_client_finds_every_key_on_the_server_it_stored_it_on() {
    skip_unless!(Need::Memcached);
    let servers: Vec<Server<'_>> = (0..3)
        .map(|i| Server::start(&Launch::loopback(Which::Stock, i % 2)).expect("stock memcached"))
        .collect();
    let addresses: Vec<SocketAddr> = servers.iter().map(Server::addr).collect();
    let keys = KeySpace::new(KEYS, SizeDist::Etc).expect("keys");
    let targets = ketama_targets(&addresses, &keys).expect("targets");

    let mut cfg = Config::new(String::new()).etc();
    cfg.keys = KEYS;
    cfg.update = 0.0;
    cfg.duration = Duration::from_millis(400);
    cfg.warmup = Duration::from_millis(100);
    cfg.drain = Duration::from_millis(500);
    cfg.preload_timeout = Duration::from_secs(20);
    drive(&targets, &cfg, 1.0, true).expect("preload");
    for target in &targets {
        assert_eq!(
            items(target.server),
            target.keys.len() as u64,
            "{}",
            target.server
        );
    }

    libmemcached_finds(&addresses, &keys);

    let summaries = drive(&targets, &cfg, 1500.0, false).expect("measured run");
    let point = Point::merge(&targets, &summaries);
    let misses: u64 = summaries.iter().map(|s| s.misses_total).sum();
    let hits: u64 = summaries.iter().map(|s| s.hits_total).sum();
    assert_eq!((point.errors, misses), (0, 0));
    assert!(hits > 100, "{hits} hits");
    assert!(point.achieved > 0.0 && point.p99_us >= point.p50_us);
    assert_eq!(point.local, None);
}
