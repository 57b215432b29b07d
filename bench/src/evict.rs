//! The cost of a `set` that must evict (issue 15, defect 10): a memcached
//! filled past `-m` with large values, then timed one blocking `set` at a
//! time, each of which evicts. Ours and stock get the same `-m` and values;
//! `./ebb bench memcached` reports the ratio of their medians.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::memcached::Server;
use crate::report::median;

/// The value size of the measurement: the "1 MB values" (below
/// the default `-I 1m` with the item header).
pub const VALUE_LEN: usize = 1_000_000;

/// Evicting sets timed after the fill.
pub const TIMED_SETS: usize = 200;

/// Sends one `set` of `value` under `key` and waits for `STORED`.
fn set(stream: &mut TcpStream, key: &str, value: &[u8]) -> Result<(), String> {
    let mut request = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
    request.extend_from_slice(value);
    request.extend_from_slice(b"\r\n");
    stream
        .write_all(&request)
        .map_err(|e| format!("sending a set: {e}"))?;
    let mut reply = Vec::new();
    let mut chunk = [0; 64];
    while !reply.ends_with(b"\r\n") {
        let n = stream
            .read(&mut chunk)
            .map_err(|e| format!("reading a set's reply: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection".to_owned());
        }
        reply.extend_from_slice(&chunk[..n]);
    }
    if reply == b"STORED\r\n" {
        Ok(())
    } else {
        Err(format!(
            "set answered {:?}",
            String::from_utf8_lossy(&reply)
        ))
    }
}

/// Fills `server` (started with `-m memory_mib`) with 1.25 × `-m` of
/// [`VALUE_LEN`]-byte values, so that every later set evicts, then times
/// [`TIMED_SETS`] more sets one at a time. Returns the median µs per set.
pub fn evicting_set_p50_us(server: &Server, memory_mib: usize) -> Result<f64, String> {
    let mut stream = TcpStream::connect(server.addr()).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .and_then(|()| stream.set_nodelay(true))
        .map_err(|e| format!("socket options: {e}"))?;
    let value = vec![b'x'; VALUE_LEN];
    let fill = (memory_mib << 20) * 5 / 4 / VALUE_LEN;
    for index in 0..fill {
        set(&mut stream, &format!("fill:{index}"), &value)?;
    }
    let mut times = Vec::with_capacity(TIMED_SETS);
    for index in 0..TIMED_SETS {
        let start = Instant::now();
        set(&mut stream, &format!("timed:{index}"), &value)?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(&mut times))
}
