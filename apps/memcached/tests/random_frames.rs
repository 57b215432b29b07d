//! Differential test of hostile input (issue 15, defect 7): seeded random
//! frames of 1 to 4,000 bytes, each on a new connection, sent to
//! memcached 1.6.18 and to ours. Per frame, both must send the same reply
//! bytes and both must close the connection, or both keep it.
//!
//! After each frame the client sends `\r\nversion\r\n` and reads until the
//! `VERSION` reply (the connection is kept), the server closes it, or a
//! generous timeout passes (the server still waits for more input, for
//! example a data block a random line announced). The reply before
//! `VERSION` is compared byte for byte.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use common::{start_ours, start_stock, Server};

/// Frames per run; the probe sent 10,000.
const FRAMES: usize = 2_000;
/// Largest frame.
const MAX_FRAME: u64 = 4_000;
/// Connections in flight per server.
const WORKERS: usize = 8;
const SENTINEL: &[u8] = b"\r\nversion\r\n";
const VERSION_REPLY: &[u8] = b"VERSION 1.6.18\r\n";
/// How long a server may take before a frame counts as waiting for more
/// input (both servers answer in microseconds on loopback).
const QUIET: Duration = Duration::from_secs(2);

/// splitmix64: a small seeded generator, so every run sends the same
/// frames.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn frame(index: usize) -> Vec<u8> {
    let seed = u64::try_from(index)
        .unwrap()
        .wrapping_mul(0x2545_F491_4F6C_DD1D);
    let mut rng = Rng(0x1515_0007 ^ seed);
    let len = 1 + rng.next() % MAX_FRAME;
    (0..len).map(|_| rng.next().to_le_bytes()[0]).collect()
}

/// What a server did with one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fate {
    /// Answered `version` after these bytes: the connection is kept.
    Kept(Vec<u8>),
    /// Closed the connection after these bytes.
    Closed(Vec<u8>),
    /// Still waiting for input after these bytes.
    Waiting(Vec<u8>),
}

fn send(port: u16, frame: &[u8]) -> Fate {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(QUIET)).unwrap();
    // The server may close before it has read everything: a failed write
    // is part of its answer, not an error of the test.
    let _ = stream
        .write_all(frame)
        .and_then(|()| stream.write_all(SENTINEL));
    let mut reply = Vec::new();
    let mut chunk = [0; 65536];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return Fate::Closed(reply),
            Ok(n) => {
                reply.extend_from_slice(&chunk[..n]);
                if reply.ends_with(VERSION_REPLY) {
                    reply.truncate(reply.len() - VERSION_REPLY.len());
                    return Fate::Kept(reply);
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {
                return Fate::Closed(reply)
            }
            Err(_) => return Fate::Waiting(reply),
        }
    }
}

/// Every frame's fate on `server`, in frame order.
fn fates(server: &Server) -> Vec<Fate> {
    let next = AtomicUsize::new(0);
    let mut fates = vec![Fate::Waiting(Vec::new()); FRAMES];
    let results: Vec<Vec<(usize, Fate)>> = thread::scope(|scope| {
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        if index >= FRAMES {
                            return done;
                        }
                        done.push((index, send(server.port, &frame(index))));
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for (index, fate) in results.into_iter().flatten() {
        fates[index] = fate;
    }
    fates
}

fn kind(fate: &Fate) -> &'static str {
    match fate {
        Fate::Kept(_) => "kept",
        Fate::Closed(_) => "closed",
        Fate::Waiting(_) => "waiting",
    }
}

#[test]
fn random_frames_get_the_same_replies_and_closes_as_memcached() {
    let stock = start_stock(&["-u", "root"]);
    let ours = start_ours(&[]);
    let (expected, actual) = thread::scope(|scope| {
        let stock_run = scope.spawn(|| fates(&stock));
        let ours_run = scope.spawn(|| fates(&ours));
        (stock_run.join().unwrap(), ours_run.join().unwrap())
    });
    let closed = |fates: &[Fate]| fates.iter().filter(|f| kind(f) == "closed").count();
    let mut report = String::new();
    let mut differ = 0;
    for (index, (want, got)) in expected.iter().zip(&actual).enumerate() {
        if want != got {
            differ += 1;
            if differ <= 10 {
                let show = |fate: &Fate| {
                    let bytes = match fate {
                        Fate::Kept(b) | Fate::Closed(b) | Fate::Waiting(b) => b,
                    };
                    format!("{} {:?}", kind(fate), String::from_utf8_lossy(bytes))
                };
                report.push_str(&format!(
                    "frame {index} ({} bytes, starts {:?}):\n  memcached: {}\n  ours:      {}\n",
                    frame(index).len(),
                    String::from_utf8_lossy(&frame(index)[..16.min(frame(index).len())]),
                    show(want),
                    show(got)
                ));
            }
        }
    }
    assert!(
        differ == 0,
        "{differ} of {FRAMES} frames differ (memcached closed {}, ours {}):\n{report}",
        closed(&expected),
        closed(&actual)
    );
}
