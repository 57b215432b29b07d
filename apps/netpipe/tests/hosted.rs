//! The netpipe application on the hosted platform, on 127.0.0.1, driven by
//! its client in ebb-loadgen: every ping-pong size from 1 B to 1 MiB comes
//! back intact, and bulk transfers reach the sink whole (count and
//! Adler-32 checked).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ebb_loadgen::netpipe::{self, message_sizes, PingPongConfig, MAX_MESSAGE, MIN_MESSAGE};

/// The server process, killed when dropped.
struct Server {
    child: Child,
    ping: SocketAddr,
    sink: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts netpipe on `cores` cores with ports picked by the system, and
/// reads them from its start-up line.
fn start(cores: &str) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_netpipe"))
        .args([
            "--cores",
            cores,
            "--no-pin",
            "--port",
            "0",
            "--sink-port",
            "0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start netpipe");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("start-up line");
    // "netpipe: ready: ping-pong 127.0.0.1:X sink 127.0.0.1:Y (N cores, hosted)"
    let words: Vec<&str> = line.split_whitespace().collect();
    let addr = |after: &str| -> SocketAddr {
        let at = words
            .iter()
            .position(|w| *w == after)
            .unwrap_or_else(|| panic!("{line}"));
        words[at + 1].parse().unwrap_or_else(|_| panic!("{line}"))
    };
    let (ping, sink) = (addr("ping-pong"), addr("sink"));
    Server { child, ping, sink }
}

#[test]
fn every_ping_pong_size_comes_back_intact() {
    let server = start("1");
    let mut config = PingPongConfig::new(server.ping);
    // Bounded: a few round trips per size, about 10 ms each.
    config.warmup = 1;
    config.min_repetitions = 3;
    config.max_repetitions = 20;
    config.time_per_size = Duration::from_millis(10);
    let points = netpipe::ping_pong(&config).expect("ping-pong");
    let sizes: Vec<usize> = points.iter().map(|p| p.size).collect();
    assert_eq!(sizes, message_sizes(MIN_MESSAGE, MAX_MESSAGE));
    assert_eq!(sizes.first(), Some(&1));
    assert_eq!(sizes.last(), Some(&(1 << 20)));
    for point in &points {
        assert!(point.repetitions >= 3, "{point:?}");
        assert!(point.rtt_min <= point.rtt_median, "{point:?}");
        assert!(
            point.one_way_us() > 0.0 && point.goodput_mbps() > 0.0,
            "{point:?}"
        );
    }
}

#[test]
fn bulk_transfers_reach_the_sink_whole() {
    let server = start("2");
    let timeout = Duration::from_secs(30);
    let big = netpipe::bulk(server.sink, 64 << 20, 64 << 10, timeout).expect("64 MiB");
    assert_eq!(big.bytes, 64 << 20);
    assert!(big.goodput_mbps() > 0.0);
    // Odd sizes, and a length prefix split across writes by small chunks.
    netpipe::bulk(server.sink, 1_000_003, 1000, timeout).expect("odd size");
    netpipe::bulk(server.sink, 0, 1, timeout).expect("empty transfer");
}

#[test]
fn the_ping_pong_server_serves_connections_on_every_core() {
    let server = start("2");
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let mut config = PingPongConfig::new(server.ping);
            config.sizes = vec![1, 64, 4096, 65_536];
            config.warmup = 1;
            config.min_repetitions = 10;
            config.max_repetitions = 10;
            std::thread::spawn(move || netpipe::ping_pong(&config))
        })
        .collect();
    for handle in handles {
        let points = handle.join().expect("client thread").expect("ping-pong");
        assert_eq!(points.len(), 4);
    }
}
