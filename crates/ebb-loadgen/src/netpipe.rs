//! The host-side client of `apps/netpipe`: NetPIPE-style ping-pong latency
//! and bulk goodput, over blocking sockets with `TCP_NODELAY`.
//!
//! Ping-pong: for each message size the client sends a 4-byte big-endian
//! length and the payload, and reads the payload back; it checks every
//! byte (two payloads alternate, so a stale reply cannot pass), times the
//! round trips and reports, as NetPIPE does, one-way latency = RTT / 2 and
//! goodput = size / one-way time. Bulk: an 8-byte length, then the data in
//! chunks; the sink answers with the count and the Adler-32 of what it got,
//! which the client checks.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The smallest and largest message of the default schedule.
pub const MIN_MESSAGE: usize = 1;
/// 1 MiB.
pub const MAX_MESSAGE: usize = 1 << 20;

/// NetPIPE's schedule: every power of two from `min` to `max` and, around
/// each one above 4, the sizes 3 bytes below and above (to catch effects
/// of alignment and segment boundaries), within `min..=max`, ascending.
pub fn message_sizes(min: usize, max: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut power = 1usize;
    while power <= max {
        let around = if power > 4 {
            vec![power - 3, power, power + 3]
        } else {
            vec![power]
        };
        sizes.extend(around.into_iter().filter(|s| (min..=max).contains(s)));
        power *= 2;
    }
    if !sizes.contains(&min) && min <= max {
        sizes.push(min);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

/// How a ping-pong run is paced.
#[derive(Debug, Clone, PartialEq)]
pub struct PingPongConfig {
    /// The ping-pong server.
    pub server: SocketAddr,
    /// Message sizes, in order.
    pub sizes: Vec<usize>,
    /// Round trips per size before timing starts.
    pub warmup: u32,
    /// Timed round trips per size: at least this many...
    pub min_repetitions: u32,
    /// ...and at most this many...
    pub max_repetitions: u32,
    /// ...aiming at this much time per size (NetPIPE adapts the count so
    /// that every size takes about as long).
    pub time_per_size: Duration,
    /// Longest wait for any one read or write.
    pub io_timeout: Duration,
}

impl PingPongConfig {
    /// The full schedule (1 B to 1 MiB), 3 warm-up round trips, 5 to 1000
    /// timed ones per size, about 0.2 s per size.
    pub fn new(server: SocketAddr) -> Self {
        PingPongConfig {
            server,
            sizes: message_sizes(MIN_MESSAGE, MAX_MESSAGE),
            warmup: 3,
            min_repetitions: 5,
            max_repetitions: 1000,
            time_per_size: Duration::from_millis(200),
            io_timeout: Duration::from_secs(30),
        }
    }
}

/// The result for one message size.
#[derive(Debug, Clone, PartialEq)]
pub struct PingPongPoint {
    /// Payload bytes per message.
    pub size: usize,
    /// Timed round trips.
    pub repetitions: u32,
    /// Median round-trip time.
    pub rtt_median: Duration,
    /// Fastest round trip.
    pub rtt_min: Duration,
}

impl PingPongPoint {
    /// One-way latency, NetPIPE's way: the median round trip halved, in µs.
    pub fn one_way_us(&self) -> f64 {
        self.rtt_median.as_secs_f64() * 1e6 / 2.0
    }

    /// Goodput: payload bits over the one-way time, in Mbit/s.
    pub fn goodput_mbps(&self) -> f64 {
        let one_way = self.rtt_median.as_secs_f64() / 2.0;
        if one_way > 0.0 {
            self.size as f64 * 8.0 / one_way / 1e6
        } else {
            f64::NAN
        }
    }
}

/// `len` bytes that differ between sizes and between the two `variant`s.
pub fn pattern(len: usize, variant: u8) -> Vec<u8> {
    let seed = len.to_le_bytes()[0] ^ variant.wrapping_mul(0x9d);
    (0..len)
        .map(|i| {
            let i = i.to_le_bytes();
            i[0].wrapping_mul(31) ^ i[1].wrapping_add(seed) ^ i[2]
        })
        .collect()
}

fn connect(server: SocketAddr, io_timeout: Duration) -> Result<TcpStream, String> {
    let stream = TcpStream::connect_timeout(&server, io_timeout)
        .map_err(|e| format!("cannot connect to {server}: {e}"))?;
    stream
        .set_nodelay(true)
        .and_then(|()| stream.set_read_timeout(Some(io_timeout)))
        .and_then(|()| stream.set_write_timeout(Some(io_timeout)))
        .map_err(|e| format!("cannot configure the socket to {server}: {e}"))?;
    Ok(stream)
}

/// A length-prefixed ping message.
fn ping_message(payload: &[u8]) -> Result<Vec<u8>, String> {
    let len = u32::try_from(payload.len()).map_err(|_| "message above 4 GiB".to_owned())?;
    let mut message = Vec::with_capacity(4 + payload.len());
    message.extend_from_slice(&len.to_be_bytes());
    message.extend_from_slice(payload);
    Ok(message)
}

/// One round trip: sends `message`, reads `reply.len()` bytes, and checks
/// them against `expected`.
fn round_trip(
    stream: &mut TcpStream,
    message: &[u8],
    expected: &[u8],
    reply: &mut [u8],
) -> Result<Duration, String> {
    let start = Instant::now();
    stream
        .write_all(message)
        .map_err(|e| format!("sending {} bytes: {e}", expected.len()))?;
    stream
        .read_exact(reply)
        .map_err(|e| format!("reading the {}-byte reply: {e}", expected.len()))?;
    let elapsed = start.elapsed();
    if reply != expected {
        let at = reply
            .iter()
            .zip(expected)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!(
            "the {}-byte reply differs from what was sent at byte {at}",
            expected.len()
        ));
    }
    Ok(elapsed)
}

/// Runs the ping-pong schedule on one connection; every size must complete
/// with intact data.
pub fn ping_pong(config: &PingPongConfig) -> Result<Vec<PingPongPoint>, String> {
    let mut stream = connect(config.server, config.io_timeout)?;
    let mut points = Vec::with_capacity(config.sizes.len());
    for &size in &config.sizes {
        let payloads = [pattern(size, 0), pattern(size, 1)];
        let messages = [ping_message(&payloads[0])?, ping_message(&payloads[1])?];
        let mut reply = vec![0u8; size];
        let mut trip = |n: u32| {
            let which = usize::from(n % 2 == 1);
            round_trip(&mut stream, &messages[which], &payloads[which], &mut reply)
                .map_err(|e| format!("size {size}: {e}"))
        };
        let mut slowest_warmup = Duration::ZERO;
        for n in 0..config.warmup {
            slowest_warmup = slowest_warmup.max(trip(n)?);
        }
        let per_trip = slowest_warmup.max(Duration::from_micros(1));
        let wanted = config.time_per_size.as_nanos() / per_trip.as_nanos().max(1);
        let repetitions = u32::try_from(wanted)
            .unwrap_or(u32::MAX)
            .clamp(config.min_repetitions.max(1), config.max_repetitions.max(1));
        let mut times: Vec<Duration> = (0..repetitions).map(&mut trip).collect::<Result<_, _>>()?;
        times.sort_unstable();
        points.push(PingPongPoint {
            size,
            repetitions,
            rtt_median: times[times.len() / 2],
            rtt_min: times[0],
        });
    }
    Ok(points)
}

/// The result of one bulk transfer.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkResult {
    /// Bytes sent (and confirmed by the sink).
    pub bytes: u64,
    /// From the first byte sent to the sink's answer.
    pub elapsed: Duration,
}

impl BulkResult {
    /// Goodput in Mbit/s.
    pub fn goodput_mbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e6
    }
}

/// Sends `total` bytes to the sink in `chunk`-byte writes and checks its
/// answer (count and Adler-32).
pub fn bulk(
    server: SocketAddr,
    total: u64,
    chunk: usize,
    io_timeout: Duration,
) -> Result<BulkResult, String> {
    let chunk = chunk.max(1);
    let mut stream = connect(server, io_timeout)?;
    let data = pattern(chunk, 7);
    let mut sum = Adler32::new();
    let start = Instant::now();
    stream
        .write_all(&total.to_be_bytes())
        .map_err(|e| format!("sending the transfer length: {e}"))?;
    let mut left = total;
    while left > 0 {
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(chunk);
        stream
            .write_all(&data[..n])
            .map_err(|e| format!("sending after {} bytes: {e}", total - left))?;
        sum.update(&data[..n]);
        left -= n as u64;
    }
    let mut answer = [0u8; 12];
    stream
        .read_exact(&mut answer)
        .map_err(|e| format!("reading the sink's answer: {e}"))?;
    let elapsed = start.elapsed();
    let count = u64::from_be_bytes(answer[..8].try_into().expect("8 bytes"));
    let checksum = u32::from_be_bytes(answer[8..].try_into().expect("4 bytes"));
    if count != total || checksum != sum.value() {
        return Err(format!(
            "the sink got {count} bytes with Adler-32 {checksum:08x}; sent {total} with {:08x}",
            sum.value()
        ));
    }
    Ok(BulkResult {
        bytes: total,
        elapsed,
    })
}

/// Adler-32 (RFC 1950 §8.2), as the sink in apps/netpipe computes it (the
/// client cannot link that `no_std` application crate without a cycle).
#[derive(Debug, Clone, Copy)]
pub struct Adler32 {
    a: u32,
    b: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Adler32::new()
    }
}

impl Adler32 {
    /// The checksum of nothing.
    pub fn new() -> Self {
        Adler32 { a: 1, b: 0 }
    }

    /// Adds `data`, reducing modulo 65521 every 5552 bytes (zlib's NMAX).
    pub fn update(&mut self, data: &[u8]) {
        for block in data.chunks(5552) {
            for &byte in block {
                self.a += u32::from(byte);
                self.b += self.a;
            }
            self.a %= 65_521;
            self.b %= 65_521;
        }
    }

    /// The checksum so far.
    pub fn value(&self) -> u32 {
        (self.b << 16) | self.a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_spans_1_byte_to_1_mib_with_perturbations() {
        let sizes = message_sizes(MIN_MESSAGE, MAX_MESSAGE);
        assert_eq!(sizes[..7], [1, 2, 4, 5, 8, 11, 13]);
        assert_eq!(sizes.last(), Some(&MAX_MESSAGE));
        assert!(sizes.contains(&(MAX_MESSAGE - 3)) && !sizes.contains(&(MAX_MESSAGE + 3)));
        assert!(sizes.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(message_sizes(64, 64), [64]);
    }

    #[test]
    fn patterns_differ_by_variant_and_adler_matches_known_values() {
        assert_ne!(pattern(1000, 0), pattern(1000, 1));
        assert_eq!(pattern(1000, 0).len(), 1000);
        let mut sum = Adler32::new();
        sum.update(b"Wikipedia");
        assert_eq!(sum.value(), 0x11E6_0398);
    }

    #[test]
    fn goodput_and_latency_follow_netpipe() {
        let point = PingPongPoint {
            size: 1000,
            repetitions: 5,
            rtt_median: Duration::from_micros(20),
            rtt_min: Duration::from_micros(18),
        };
        assert!((point.one_way_us() - 10.0).abs() < 1e-9);
        // 8000 bits in 10 µs = 800 Mbit/s.
        assert!((point.goodput_mbps() - 800.0).abs() < 1e-6);
    }
}
