//! Native networking end to end, as a user runs it: `./ebb run APP --native
//! --forward HOST:GUEST` boots APP on q35 (TCG) with a modern virtio-net
//! on QEMU user networking. Echo: 16 MiB go through the forwarded port on
//! 127.0.0.1 and come back intact (the guest's PCI enumeration, the
//! virtio-net driver with MSI-X, ebb-netstack's TCP, echo's zero-copy
//! replies). memcached: libmemcached's `memccapable` passes through the
//! forwarded port. netpipe: ping-pongs of 1 B to 1 MiB come back intact
//! and a bulk transfer reaches the sink whole (count and Adler-32). Needs
//! `qemu-system-x86_64` and `memccapable`, which `./ebb test` installs.

mod native_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ebb_testbed::{skip_unless, Need};
use native_support::{free_port, Guest, BOOT, EBB};

const BYTES: usize = 16 << 20;

/// Deterministic test data (xorshift), so a failure is reproducible.
fn pattern(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// Boots `app` natively with `--forward PORT:guest_port` and returns the
/// guest, the forwarded port, and the console up to the first line starting
/// with `ready`.
fn boot(app: &str, guest_port: u16, ready: &str, extra: &[&str]) -> (Guest, u16, String) {
    let port = free_port();
    let mut command = Command::new(EBB);
    command
        .args(["run", app, "--native", "--timeout", "300", "-v"])
        .args(["--forward", &format!("{port}:{guest_port}")])
        .args(extra);
    let mut guest = Guest::spawn(command);
    guest.wait_for(ready);
    let boot = guest.console();
    assert!(boot.contains("pci 00:01.0 1af4:1041 class 02.00"), "{boot}");
    assert!(boot.contains("PCI ECAM at 0xb0000000"), "{boot}");
    assert!(boot.contains("MSI-X interrupts"), "{boot}");
    assert!(
        boot.contains("virtio-net has address 10.0.2.15/24, gateway 10.0.2.2 (static)"),
        "{boot}"
    );
    (guest, port, boot)
}

#[test]
fn echo_over_virtio_net_round_trips_16_mib_through_the_forwarded_port() {
    skip_unless!(Need::Qemu);
    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let (_guest, port, _) = boot("echo", 7007, "echo: ready: TCP", &[]);

    let mut stream =
        TcpStream::connect(("127.0.0.1", port)).expect("connect to the forwarded port");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("read timeout");
    let data = pattern(BYTES);
    let mut writer = stream.try_clone().expect("clone the stream");
    let sent = data.clone();
    let sender = std::thread::spawn(move || writer.write_all(&sent));
    let mut received = vec![0u8; BYTES];
    stream
        .read_exact(&mut received)
        .expect("read the echoed 16 MiB");
    sender.join().expect("sender").expect("send 16 MiB");
    let first_difference = data.iter().zip(&received).position(|(a, b)| a != b);
    assert_eq!(first_difference, None, "echoed bytes differ");
}

#[test]
fn memccapable_passes_against_native_memcached() {
    skip_unless!(Need::Qemu);
    let tool = ["/usr/bin/memccapable", "/usr/local/bin/memccapable"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .expect("memccapable is missing: run the tests through `./ebb test` (libmemcached-tools)");
    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let (_guest, port, _) = boot(
        "memcached",
        11211,
        "memcached: ready: listening on 0.0.0.0:11211",
        &[],
    );
    // Through sh, so that its stderr ("[FAIL]") and stdout interleave.
    let mut child = Command::new("sh")
        .args(["-c", "exec \"$0\" \"$@\" 2>&1"])
        .arg(&tool)
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-t", "10"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run memccapable");
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for memccapable") {
            break status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut output = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut output);
    }
    assert_eq!(status, Some(0), "memccapable:\n{output}");
    assert!(output.contains("All tests passed"), "{output}");
    assert!(!output.contains("[FAIL]"), "{output}");
}

#[test]
fn virtio_net_works_with_its_registers_above_4_gib() {
    skip_unless!(Need::Qemu);
    // A 1 GiB ivshmem BAR does not fit SeaBIOS's 32-bit window, so it puts
    // the 64-bit BARs, virtio-net's register BAR among them, above 4 GiB.
    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let (_guest, port, boot) = boot(
        "echo",
        7007,
        "echo: ready: TCP",
        &[
            "--qemu-arg=-object",
            "--qemu-arg=memory-backend-ram,id=shm,size=1G",
            "--qemu-arg=-device",
            "--qemu-arg=ivshmem-plain,memdev=shm",
        ],
    );
    let virtio = boot
        .split("pci 00:01.0 1af4:1041")
        .nth(1)
        .and_then(|rest| rest.split("pci 00:02.0").next())
        .unwrap_or_default();
    let high = virtio
        .lines()
        .filter_map(|line| line.split("memory 0x").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter_map(|hex| u64::from_str_radix(hex, 16).ok())
        .any(|addr| addr >= 1 << 32);
    assert!(high, "virtio-net has no BAR above 4 GiB:\n{boot}");
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let data = pattern(1 << 20);
    let mut writer = stream.try_clone().expect("clone the stream");
    let sent = data.clone();
    let sender = std::thread::spawn(move || writer.write_all(&sent));
    let mut received = vec![0u8; data.len()];
    stream.read_exact(&mut received).expect("read the echo");
    sender.join().expect("sender").expect("send");
    assert!(received == data, "echoed bytes differ");
}

#[test]
fn netpipe_ping_pongs_and_sinks_through_the_forwarded_ports() {
    skip_unless!(Need::Qemu);
    use ebb_loadgen::netpipe::{bulk, ping_pong, PingPongConfig};
    let _one = BOOT.lock().unwrap_or_else(|e| e.into_inner());
    let sink_port = free_port();
    let (_guest, port, _) = boot(
        "netpipe",
        5002,
        "netpipe: ready: ping-pong",
        &["--forward", &format!("{sink_port}:5003")],
    );
    let mut config = PingPongConfig::new(([127, 0, 0, 1], port).into());
    config.sizes = vec![1, 64, 1500, 65_536, 1 << 20];
    config.warmup = 1;
    config.min_repetitions = 3;
    config.max_repetitions = 3;
    config.io_timeout = Duration::from_secs(120);
    let points = ping_pong(&config).expect("every ping-pong comes back intact");
    assert_eq!(
        points.iter().map(|p| p.size).collect::<Vec<_>>(),
        config.sizes
    );
    let sent = bulk(
        ([127, 0, 0, 1], sink_port).into(),
        4 << 20,
        64 << 10,
        Duration::from_secs(120),
    )
    .expect("the sink confirms the count and Adler-32");
    assert_eq!(sent.bytes, 4 << 20);
}
