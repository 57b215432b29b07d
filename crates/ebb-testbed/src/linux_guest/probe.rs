//! Talking to memcached's text protocol just enough to know it works:
//! `version`, and a `set` read back with `get` (memcached's
//! `doc/protocol.txt`).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `request` on a new connection and reads reply lines until one for
/// which `is_last` holds, or an `ERROR` line.
fn exchange(
    server: SocketAddr,
    request: &[u8],
    is_last: impl Fn(&str) -> bool,
) -> Result<Vec<String>, String> {
    let mut stream = TcpStream::connect_timeout(&server, REQUEST_TIMEOUT)
        .map_err(|e| format!("cannot connect to {server}: {e}"))?;
    stream
        .set_read_timeout(Some(REQUEST_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(REQUEST_TIMEOUT)))
        .map_err(|e| format!("cannot set timeouts: {e}"))?;
    stream
        .write_all(request)
        .map_err(|e| format!("cannot send to {server}: {e}"))?;
    let mut reader = BufReader::new(stream);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let read = reader
            .read_line(&mut line)
            .map_err(|e| format!("no reply from {server}: {e}"))?;
        if read == 0 {
            return Err(format!("{server} closed the connection after {lines:?}"));
        }
        let line = line.trim_end().to_owned();
        let done = is_last(&line) || line.starts_with("ERROR");
        lines.push(line);
        if done {
            return Ok(lines);
        }
    }
}

/// memcached's `VERSION x.y.z` reply.
pub fn version(server: SocketAddr) -> Result<String, String> {
    let lines = exchange(server, b"version\r\n", |line| line.starts_with("VERSION "))?;
    lines
        .last()
        .and_then(|line| line.strip_prefix("VERSION "))
        .map(str::to_owned)
        .ok_or_else(|| format!("unexpected reply to version: {lines:?}"))
}

/// Stores `value` under `key` and reads it back on another connection.
pub fn set_and_get(server: SocketAddr, key: &str, value: &str) -> Result<(), String> {
    let set = format!("set {key} 0 0 {}\r\n{value}\r\n", value.len());
    // Every reply to a set is one line (STORED, NOT_STORED, SERVER_ERROR ...).
    let reply = exchange(server, set.as_bytes(), |_| true)?;
    if reply.last().map(String::as_str) != Some("STORED") {
        return Err(format!("unexpected reply to set: {reply:?}"));
    }
    let reply = exchange(server, format!("get {key}\r\n").as_bytes(), |line| {
        line == "END"
    })?;
    let expected = [
        format!("VALUE {key} 0 {}", value.len()),
        value.to_owned(),
        "END".to_owned(),
    ];
    if reply != expected {
        return Err(format!(
            "get {key} returned {reply:?}, expected {expected:?}"
        ));
    }
    Ok(())
}

/// Asks `version` until memcached answers (QEMU's user networking accepts
/// connections before the guest is up, so only a real reply counts), and
/// returns the version.
pub fn wait_for_version(server: SocketAddr, limit: Duration) -> Result<String, String> {
    let deadline = Instant::now() + limit;
    loop {
        match version(server) {
            Ok(version) => return Ok(version),
            Err(e) if Instant::now() >= deadline => {
                return Err(format!(
                    "memcached at {server} did not answer within {} s: {e}",
                    limit.as_secs()
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Connects to `server` until it accepts a TCP connection (the readiness
/// check of a guest serving netpipe: the ready marker comes first, so an
/// accepted connection means the server listens; a benchmark then checks a
/// real ping-pong with `ebb-loadgen`).
pub fn wait_for_accept(server: SocketAddr, limit: Duration) -> Result<String, String> {
    let deadline = Instant::now() + limit;
    loop {
        match TcpStream::connect_timeout(&server, REQUEST_TIMEOUT) {
            Ok(_) => return Ok("netpipe".to_owned()),
            Err(e) if Instant::now() >= deadline => {
                return Err(format!(
                    "netpipe at {server} did not accept within {} s: {e}",
                    limit.as_secs()
                ))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// A one-connection-at-a-time fake that answers like memcached.
    fn fake_memcached() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            let mut stored: Option<(String, String)> = None;
            for stream in listener.incoming().take(3) {
                let mut stream = stream.expect("accept");
                let mut buf = [0u8; 256];
                let n = stream.read(&mut buf).expect("read");
                let request = String::from_utf8_lossy(&buf[..n]).into_owned();
                let reply = if request.starts_with("version") {
                    "VERSION 1.6.18\r\n".to_owned()
                } else if let Some(rest) = request.strip_prefix("set ") {
                    let key = rest.split(' ').next().unwrap_or_default().to_owned();
                    let value = request.split("\r\n").nth(1).unwrap_or_default().to_owned();
                    stored = Some((key, value));
                    "STORED\r\n".to_owned()
                } else {
                    let (key, value) = stored.clone().unwrap_or_default();
                    format!("VALUE {key} 0 {}\r\n{value}\r\nEND\r\n", value.len())
                };
                stream.write_all(reply.as_bytes()).expect("write");
            }
        });
        addr
    }

    #[test]
    fn version_and_round_trip_against_a_fake() {
        let server = fake_memcached();
        assert_eq!(
            wait_for_version(server, Duration::from_secs(5)).as_deref(),
            Ok("1.6.18")
        );
        set_and_get(server, "ebb-probe", "hello").expect("round trip");
    }

    #[test]
    fn a_closed_port_is_an_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port");
        let error = wait_for_version(port, Duration::from_millis(100)).expect_err("closed port");
        assert!(
            error.contains("did not answer within 0 s") && error.contains("refused"),
            "{error}"
        );
    }
}
