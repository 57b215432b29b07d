//! Talking to the guest's servers just enough to know they work:
//! memcached's text protocol (`version`, and a `set` read back with `get`;
//! memcached's `doc/protocol.txt`) and Redis's RESP2 (`PING`, and a `SET`
//! read back with `GET`; the "Redis serialization protocol specification"
//! at redis.io/docs/reference/protocol-spec).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest bulk string a probe accepts: its own values are a few bytes,
/// and a length read from something that is not Redis must not allocate
/// gigabytes.
const MAX_BULK: usize = 1 << 20;

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
    retry_until(limit, || version(server)).map_err(|e| {
        format!(
            "memcached at {server} did not answer within {} s: {e}",
            limit.as_secs()
        )
    })
}

/// Calls `attempt` every 50 ms until it succeeds or `limit` has passed
/// (then its last error).
fn retry_until<T>(
    limit: Duration,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + limit;
    loop {
        match attempt() {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// One RESP2 reply, as far as the probes need it: the spec's simple
/// strings (`+`), errors (`-`), integers (`:`) and bulk strings (`$`, with
/// the null bulk string `$-1` as `None`). Arrays (`*`) are never a reply to
/// the probes' commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespReply {
    /// `+TEXT`.
    Simple(String),
    /// `-TEXT`, e.g. `ERR unknown command`.
    Error(String),
    /// `:N`.
    Integer(i64),
    /// `$N` and N bytes, or `$-1` (no such key).
    Bulk(Option<Vec<u8>>),
}

/// `args` as a RESP array of bulk strings, the form clients send commands
/// in: `PING` is `*1\r\n$4\r\nPING\r\n`.
pub fn resp_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Reads one reply from `reader`. Anything else (an array, a line without
/// `\r\n`, an HTTP answer from a proxy, a closed connection) is an error.
pub fn read_resp_reply(reader: &mut impl BufRead) -> Result<RespReply, String> {
    let line = read_crlf_line(reader)?;
    let (kind, rest) = line.split_at_checked(1).unwrap_or(("", ""));
    match kind {
        "+" => Ok(RespReply::Simple(rest.to_owned())),
        "-" => Ok(RespReply::Error(rest.to_owned())),
        ":" => rest
            .parse()
            .map(RespReply::Integer)
            .map_err(|_| format!("bad RESP integer {line:?}")),
        "$" if rest == "-1" => Ok(RespReply::Bulk(None)),
        "$" => {
            let len: usize = rest
                .parse()
                .ok()
                .filter(|&len| len <= MAX_BULK)
                .ok_or_else(|| format!("bad RESP bulk length {line:?}"))?;
            let mut data = vec![0; len + 2];
            reader
                .read_exact(&mut data)
                .map_err(|e| format!("RESP bulk string of {len} bytes cut short: {e}"))?;
            if !data.ends_with(b"\r\n") {
                return Err(format!("RESP bulk string of {len} bytes without CRLF"));
            }
            data.truncate(len);
            Ok(RespReply::Bulk(Some(data)))
        }
        _ => Err(format!("not a RESP reply the probe understands: {line:?}")),
    }
}

/// One line ending in `\r\n`, without it.
fn read_crlf_line(reader: &mut impl BufRead) -> Result<String, String> {
    let mut line = Vec::new();
    reader
        .read_until(b'\n', &mut line)
        .map_err(|e| format!("no reply: {e}"))?;
    if line.is_empty() {
        return Err("the connection was closed".to_owned());
    }
    let text = String::from_utf8_lossy(&line).into_owned();
    text.strip_suffix("\r\n")
        .map(str::to_owned)
        .ok_or_else(|| format!("a reply line without CRLF: {text:?}"))
}

/// Sends the command `args` on a new connection to `server` and reads its
/// reply.
fn redis_exchange(server: SocketAddr, args: &[&[u8]]) -> Result<RespReply, String> {
    let mut stream = TcpStream::connect_timeout(&server, REQUEST_TIMEOUT)
        .map_err(|e| format!("cannot connect to {server}: {e}"))?;
    stream
        .set_read_timeout(Some(REQUEST_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(REQUEST_TIMEOUT)))
        .map_err(|e| format!("cannot set timeouts: {e}"))?;
    stream
        .write_all(&resp_command(args))
        .map_err(|e| format!("cannot send to {server}: {e}"))?;
    read_resp_reply(&mut BufReader::new(stream)).map_err(|e| format!("{server}: {e}"))
}

/// Redis's answer to `PING`: `PONG` (sent as `+PONG\r\n`).
pub fn redis_ping(server: SocketAddr) -> Result<String, String> {
    match redis_exchange(server, &[b"PING"])? {
        RespReply::Simple(pong) if pong == "PONG" => Ok(pong),
        other => Err(format!("unexpected reply to PING: {other:?}")),
    }
}

/// The `redis_version` field of `INFO server` (`7.0.15`).
pub fn redis_version(server: SocketAddr) -> Result<String, String> {
    let reply = redis_exchange(server, &[b"INFO", b"server"])?;
    let RespReply::Bulk(Some(info)) = &reply else {
        return Err(format!("unexpected reply to INFO server: {reply:?}"));
    };
    String::from_utf8_lossy(info)
        .lines()
        .find_map(|line| line.strip_prefix("redis_version:"))
        .map(|version| version.trim().to_owned())
        .ok_or_else(|| "INFO server has no redis_version".to_owned())
}

/// `SET key value`, then `GET key` on another connection, which must
/// return `value`.
pub fn redis_set_and_get(server: SocketAddr, key: &str, value: &str) -> Result<(), String> {
    let reply = redis_exchange(server, &[b"SET", key.as_bytes(), value.as_bytes()])?;
    if reply != RespReply::Simple("OK".to_owned()) {
        return Err(format!("unexpected reply to SET {key}: {reply:?}"));
    }
    let reply = redis_exchange(server, &[b"GET", key.as_bytes()])?;
    if reply != RespReply::Bulk(Some(value.as_bytes().to_vec())) {
        return Err(format!(
            "GET {key} returned {reply:?}, expected the bulk string {value:?}"
        ));
    }
    Ok(())
}

/// Sends `PING` until Redis answers `PONG` (QEMU's user networking accepts
/// connections before the guest is up, so only a real reply counts), and
/// returns `redis PONG`.
pub fn wait_for_redis_ping(server: SocketAddr, limit: Duration) -> Result<String, String> {
    retry_until(limit, || redis_ping(server))
        .map(|pong| format!("redis {pong}"))
        .map_err(|e| {
            format!(
                "Redis at {server} did not answer PING within {} s: {e}",
                limit.as_secs()
            )
        })
}

/// Connects to `server` until it accepts a TCP connection (the readiness
/// check of a guest serving netpipe: the ready marker comes first, so an
/// accepted connection means the server listens; a benchmark then checks a
/// real ping-pong with `ebb-loadgen`).
pub fn wait_for_accept(server: SocketAddr, limit: Duration) -> Result<String, String> {
    retry_until(limit, || {
        TcpStream::connect_timeout(&server, REQUEST_TIMEOUT).map_err(|e| e.to_string())
    })
    .map(|_| "netpipe".to_owned())
    .map_err(|e| {
        format!(
            "netpipe at {server} did not accept within {} s: {e}",
            limit.as_secs()
        )
    })
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

    fn reply(bytes: &[u8]) -> Result<RespReply, String> {
        read_resp_reply(&mut &bytes[..])
    }

    #[test]
    fn resp_commands_and_replies() {
        assert_eq!(resp_command(&[b"PING"]), b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            resp_command(&[b"SET", b"k", b""]),
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"
        );
        assert_eq!(reply(b"+PONG\r\n"), Ok(RespReply::Simple("PONG".into())));
        assert_eq!(
            reply(b"-ERR unknown command\r\n"),
            Ok(RespReply::Error("ERR unknown command".into()))
        );
        assert_eq!(reply(b":-3\r\n"), Ok(RespReply::Integer(-3)));
        assert_eq!(
            reply(b"$7\r\nab\r\ncd!\r\n"),
            Ok(RespReply::Bulk(Some(b"ab\r\ncd!".to_vec()))),
            "a bulk string is counted, not split at CRLF"
        );
        assert_eq!(reply(b"$0\r\n\r\n"), Ok(RespReply::Bulk(Some(Vec::new()))));
        assert_eq!(reply(b"$-1\r\n"), Ok(RespReply::Bulk(None)));
    }

    #[test]
    fn what_is_not_a_resp_reply_is_an_error() {
        for bad in [
            &b""[..],
            b"+PONG\n",
            b"+PONG",
            b"*1\r\n+PONG\r\n",
            b"HTTP/1.1 403 Forbidden\r\n",
            b":x\r\n",
            b"$5\r\nabc\r\n",
            b"$3\r\nabcde",
            b"$99999999999\r\n",
            b"\r\n",
        ] {
            assert!(reply(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// A one-connection-at-a-time fake that answers PING, INFO, SET and GET
    /// like Redis (one command per connection, as the probes send them).
    fn fake_redis() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            let mut stored: Option<Vec<u8>> = None;
            for stream in listener.incoming().take(4) {
                let mut stream = stream.expect("accept");
                let mut buf = [0u8; 256];
                let n = stream.read(&mut buf).expect("read");
                let request = &buf[..n];
                let reply = if request == resp_command(&[b"PING"]) {
                    b"+PONG\r\n".to_vec()
                } else if request == resp_command(&[b"INFO", b"server"]) {
                    let info = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
                    format!("${}\r\n{info}\r\n", info.len()).into_bytes()
                } else if request.starts_with(b"*3\r\n$3\r\nSET\r\n") {
                    // The value is the last bulk string.
                    let text = String::from_utf8_lossy(request).into_owned();
                    let parts: Vec<&str> = text.split("\r\n").collect();
                    stored = Some(parts[parts.len() - 2].as_bytes().to_vec());
                    b"+OK\r\n".to_vec()
                } else {
                    let value = stored.clone().unwrap_or_default();
                    let mut out = format!("${}\r\n", value.len()).into_bytes();
                    out.extend_from_slice(&value);
                    out.extend_from_slice(b"\r\n");
                    out
                };
                stream.write_all(&reply).expect("write");
            }
        });
        addr
    }

    #[test]
    fn ping_and_round_trip_against_a_fake_redis() {
        let server = fake_redis();
        assert_eq!(
            wait_for_redis_ping(server, Duration::from_secs(5)).as_deref(),
            Ok("redis PONG")
        );
        assert_eq!(redis_version(server).as_deref(), Ok("7.0.15"));
        redis_set_and_get(server, "ebb-probe", "hello").expect("round trip");
    }

    #[test]
    fn a_closed_port_is_no_pong() {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("port");
        let error = wait_for_redis_ping(port, Duration::from_millis(100)).expect_err("closed");
        assert!(error.contains("did not answer PING"), "{error}");
    }
}
