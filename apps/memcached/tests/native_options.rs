//! memcached is one application on every platform (`ebb-app`): the same
//! option set gives the same behaviour hosted and native, native keeps
//! Unix time (absolute expiry times expire, `stats time` is the wall
//! clock), and `./ebb run memcached --native` serves until it is stopped.
//! All in one boot (plus a short one for a refused option): CI has 2
//! cores. Needs `qemu-system-x86_64`, which `./ebb test` installs.

mod common;
mod native_boot;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{free_port, start_ours, Client};
use native_boot::NativeServer;

/// The options under test, the same on both platforms: a 2 KiB item limit,
/// no CAS, 3 connections, 32 MiB, UDP off (the only UDP setting we take),
/// 2 cores, every address.
const OPTIONS: &[&str] = &[
    "-I", "2k", "-C", "-c", "3", "-m", "32", "-U", "0", "-t", "2", "-l", "0.0.0.0",
];

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

fn text(reply: Vec<u8>) -> String {
    String::from_utf8_lossy(&reply).into_owned()
}

/// `STAT name value` lines as a map.
fn stats(client: &mut Client, request: &[u8]) -> BTreeMap<String, String> {
    text(client.text(request))
        .lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("STAT ")?.splitn(2, ' ');
            Some((words.next()?.to_owned(), words.next()?.to_owned()))
        })
        .collect()
}

/// What the options make the server do, as text to compare across
/// platforms: item size limit, CAS, the settings it reports, the thread
/// count, the connection limit.
fn behaviour(port: u16) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let mut client = Client::connect_to(port);
    let mut big = b"set big 0 0 3000\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'x', 3000));
    big.extend_from_slice(b"\r\n");
    seen.push(("an item over -I".to_owned(), text(client.text(&big))));
    let mut small = b"set small 0 0 1000\r\n".to_vec();
    small.extend(std::iter::repeat_n(b'y', 1000));
    small.extend_from_slice(b"\r\n");
    seen.push(("an item under -I".to_owned(), text(client.text(&small))));
    seen.push((
        "gets with -C".to_owned(),
        text(client.text(b"set k 5 0 1\r\nx\r\n")) + &text(client.text(b"gets k\r\n")),
    ));
    let settings = stats(&mut client, b"stats settings\r\n");
    for key in [
        "maxbytes",
        "maxconns",
        "item_size_max",
        "cas_enabled",
        "num_threads",
        "udpport",
    ] {
        let value = settings.get(key).cloned().unwrap_or_default();
        seen.push((format!("stats settings {key}"), value));
    }
    let general = stats(&mut client, b"stats\r\n");
    seen.push((
        "stats threads".to_owned(),
        general.get("threads").cloned().unwrap_or_default(),
    ));
    // -c 3: this client and two more are served, a fourth is refused.
    let mut more: Vec<Client> = (0..2).map(|_| Client::connect_to(port)).collect();
    for other in &mut more {
        let reply = text(other.text(b"version\r\n"));
        let first = reply.split_whitespace().next().unwrap_or_default();
        seen.push(("a connection within -c".to_owned(), first.to_owned()));
    }
    let mut over = Client::connect_to(port);
    over.send_raw(b"version\r\n");
    let (reply, closed) = over.read_to_close(Duration::from_secs(10));
    seen.push((
        "a connection over -c".to_owned(),
        format!("{} (closed: {closed})", text(reply).trim_end()),
    ));
    seen
}

/// `stats time` is the wall clock, and an item with an absolute (Unix
/// time) expiry 3 s ahead is there now and gone 5 s later.
fn keeps_unix_time(port: u16, which: &str) {
    let mut client = Client::connect_to(port);
    let time: u64 = stats(&mut client, b"stats\r\n")
        .get("time")
        .and_then(|time| time.parse().ok())
        .unwrap_or_else(|| panic!("{which}: no time in stats"));
    let host = unix_now();
    assert!(
        time.abs_diff(host) <= 5,
        "{which}: stats time {time}, host Unix time {host}"
    );
    let expires = unix_now() + 3;
    let set = format!("set absolute 0 {expires} 2\r\nhi\r\n");
    assert_eq!(text(client.text(set.as_bytes())), "STORED\r\n", "{which}");
    assert_eq!(
        text(client.text(b"get absolute\r\n")),
        "VALUE absolute 0 2\r\nhi\r\nEND\r\n",
        "{which}: the item is there before its time"
    );
    while unix_now() <= expires + 2 {
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(
        text(client.text(b"get absolute\r\n")),
        "END\r\n",
        "{which}: an item past its absolute expiry time is gone"
    );
}

#[test]
fn native_memcached_has_hosted_options_unix_time_and_runs_until_stopped() {
    // -U 1 (UDP) is refused the same way on both: exit code 2 and clap's
    // sentence.
    let refused = "error: invalid value '1' for '--udp-port <PORT>': 0: UDP is not supported";
    let hosted = Command::new(env!("CARGO_BIN_EXE_memcached"))
        .args(["-U", "1"])
        .output()
        .expect("run memcached");
    assert_eq!(hosted.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&hosted.stderr).contains(refused),
        "{hosted:?}"
    );
    let native = Command::new(native_boot::root().join("ebb"))
        .args([
            "run",
            "memcached",
            "--native",
            "--timeout",
            "600",
            "--",
            "-U",
            "1",
        ])
        .output()
        .expect("run ./ebb run memcached --native");
    assert_eq!(native.status.code(), Some(2), "{native:?}");
    assert!(
        String::from_utf8_lossy(&native.stdout).contains(refused),
        "{}",
        String::from_utf8_lossy(&native.stdout)
    );

    // The same option set on both platforms, the same behaviour.
    let hosted = start_ours(OPTIONS);
    let expected = behaviour(hosted.port);
    let port = free_port();
    let launched = Instant::now();
    // No --timeout: the server must run until it is stopped.
    let native = NativeServer::start(
        &["--cores", "2", "--forward", &format!("{port}:11211")],
        OPTIONS,
    );
    assert_eq!(behaviour(port), expected);
    // The options did what they say (checked once, hosted = native).
    let value = |what: &str| {
        expected
            .iter()
            .find(|(name, _)| name == what)
            .map(|(_, value)| value.as_str())
            .unwrap_or_default()
    };
    assert_eq!(
        value("an item over -I"),
        "SERVER_ERROR object too large for cache\r\n"
    );
    assert_eq!(
        value("gets with -C"),
        "STORED\r\nVALUE k 5 1 0\r\nx\r\nEND\r\n"
    );
    assert_eq!(value("stats settings maxbytes"), (32 << 20).to_string());
    assert_eq!(value("stats settings maxconns"), "3");
    assert_eq!(value("stats settings item_size_max"), "2048");
    assert_eq!(value("stats settings cas_enabled"), "no");
    assert_eq!(value("stats threads"), "2");
    assert!(value("a connection over -c").starts_with("ERROR Too many open connections"));

    // Unix time and absolute expiry, hosted as natively.
    keeps_unix_time(hosted.port, "hosted");
    keeps_unix_time(port, "native");

    // Still serving 90 s after `./ebb run` (the old default stopped QEMU
    // after 60 s); the test stops it (dropping the server).
    while launched.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut client = Client::connect_to(port);
    assert!(
        text(client.text(b"version\r\n")).starts_with("VERSION "),
        "native memcached stopped serving before 90 s:\n{}",
        native.console.text()
    );
    drop(native);
}
