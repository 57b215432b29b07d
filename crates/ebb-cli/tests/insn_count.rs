//! The QEMU TCG plugin that counts guest instructions (issue 20;
//! `crates/ebb-cbuild/plugins/insn_count.c`, built against the plugin
//! header of QEMU's Debian source package): loaded into the QEMU of a
//! native memcached (`./ebb run memcached --native --qemu-arg=-plugin
//! ...`), it answers counts on its socket that grow with the requests
//! served, split by the address ranges it was given, every instruction
//! counted once.

mod c_support;
mod native_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ebb_testbed::{skip_unless, Need};
use native_support::{free_port, Guest, BOOT, EBB};

/// The counts the plugin answers, by name, in its order.
fn counts(socket: &Path) -> Vec<(String, u64)> {
    let mut stream = UnixStream::connect(socket).expect("connect to the plugin's socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("read the counts");
    text.lines()
        .map(|line| {
            let (name, count) = line.split_once(' ').expect("NAME COUNT");
            (name.to_owned(), count.parse().expect("a count"))
        })
        .collect()
}

fn count_of(counts: &[(String, u64)], name: &str) -> u64 {
    counts
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name} in {counts:?}"))
        .1
}

/// Sends `line` and reads one reply line.
fn request(stream: &mut BufReader<TcpStream>, line: &str) -> String {
    stream.get_mut().write_all(line.as_bytes()).expect("send");
    let mut reply = String::new();
    stream.read_line(&mut reply).expect("reply");
    reply
}

#[test]
fn the_plugin_counts_a_native_servers_instructions_by_range() {
    skip_unless!(Need::Qemu);
    let tools = ["apt-get", "gcc", "tar"];
    let output = match c_support::build("qemu-plugin", &tools, Duration::from_secs(600)) {
        Ok((_, output)) => output,
        Err(reason) => {
            ebb_testbed::skip(ebb_testbed::function_name!(), &reason);
            return;
        }
    };
    let plugin = output
        .lines()
        .find_map(|line| line.strip_prefix("plugin "))
        .map(PathBuf::from)
        .expect("ebb-cbuild printed `plugin PATH`");
    // Private, made anew, deleted on drop (also when an assertion fails).
    let scratch = ebb_testbed::qemu::qmp::SocketDir::create(&format!(
        "ebb-insn-count-{}",
        std::process::id()
    ))
    .expect("a scratch directory");
    let socket = scratch.path().join("counts.sock");
    let ranges = scratch.path().join("ranges");
    // The native image lives in the low half; nothing runs at the top.
    std::fs::write(
        &ranges,
        "# name start end (hex)\nlow 0 8000000000000000\nhigh 8000000000000000 ffffffffffffffff\n",
    )
    .expect("the ranges file");

    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let port = free_port();
    let mut command = Command::new(EBB);
    command
        // TCG: a plugin sees nothing under KVM.
        .args([
            "run",
            "memcached",
            "--native",
            "--accel",
            "tcg",
            "--timeout",
            "300",
        ])
        .args(["--forward", &format!("{port}:11211")])
        .arg("--qemu-arg=-plugin")
        .arg(format!(
            "--qemu-arg={},sock={},ranges={}",
            plugin.display(),
            socket.display(),
            ranges.display()
        ));
    let mut guest: Guest = Guest::spawn(command);
    guest.wait_for("memcached: ready");

    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to memcached");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    let mut stream = BufReader::new(stream);
    assert_eq!(request(&mut stream, "set k 0 0 1\r\nv\r\n"), "STORED\r\n");
    let before = counts(&socket);
    const REQUESTS: u64 = 200;
    for _ in 0..REQUESTS / 2 {
        assert_eq!(request(&mut stream, "set k 0 0 1\r\nv\r\n"), "STORED\r\n");
        assert_eq!(request(&mut stream, "get k\r\n"), "VALUE k 0 1\r\n");
        assert_eq!(request(&mut stream, ""), "v\r\n");
        assert_eq!(request(&mut stream, ""), "END\r\n");
    }
    let after = counts(&socket);
    drop(stream);
    drop(guest);

    let names: Vec<&str> = after.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["total", "low", "high", "other"], "{after:?}");
    for counts in [&before, &after] {
        let parts: u64 = counts[1..].iter().map(|(_, count)| count).sum();
        assert_eq!(
            count_of(counts, "total"),
            parts,
            "every instruction counted once"
        );
        assert_eq!(count_of(counts, "high"), 0, "{counts:?}");
        assert_eq!(count_of(counts, "other"), 0, "{counts:?}");
    }
    let per_request = (count_of(&after, "total") - count_of(&before, "total")) / REQUESTS;
    println!("native memcached: {per_request} guest instructions per request (one client, one request at a time)");
    // A request is at least the driver, TCP and memcached's parse; far
    // less than the boot's millions.
    assert!(
        (500..500_000).contains(&per_request),
        "{per_request} instructions per request ({before:?} then {after:?})"
    );
}
