//! A trivial memcached responder to measure the generator against.
//!
//! One thread, one epoll instance, non-blocking sockets on `127.0.0.1:0`.
//! It answers every request at once: text and binary (told apart by the
//! first byte of each connection), `get` with a fixed value (or a miss),
//! `set` with STORED, anything else with an error. It keeps no data.
//! Optionally it *stalls*: for the last `stall` of every `period` since it
//! started it neither reads nor answers (requests queue in the kernel), then
//! answers everything at once. Dropping the [`Responder`] stops its thread
//! within 50 ms.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::protocol::{binary, push_decimal};
use crate::sys::{self, Epoll};

/// How a [`Responder`] behaves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponderConfig {
    /// Gets hit with a value of this many bytes; `None` means every get
    /// misses.
    pub value_len: Option<usize>,
    /// `(period, stall)`: stop answering for the last `stall` of each
    /// `period`.
    pub stall: Option<(Duration, Duration)>,
    /// Pin the responder thread to this CPU.
    pub cpu: Option<usize>,
}

/// A running responder; see the [module docs](self).
#[derive(Debug)]
pub struct Responder {
    addr: SocketAddr,
    started: Instant,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicU64>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Responder {
    /// Starts a responder that answers at once, gets hit with a value of
    /// `value_len` bytes (or miss).
    pub fn trivial(value_len: Option<usize>) -> io::Result<Self> {
        Self::start(ResponderConfig {
            value_len,
            ..ResponderConfig::default()
        })
    }

    /// Starts a responder that stops answering for `stall` every `period`.
    pub fn stalled(period: Duration, stall: Duration) -> io::Result<Self> {
        Self::start(ResponderConfig {
            stall: Some((period, stall)),
            ..ResponderConfig::default()
        })
    }

    /// Starts a responder as `config` says.
    pub fn start(config: ResponderConfig) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let thread = {
            let stop = Arc::clone(&stop);
            let requests = Arc::clone(&requests);
            std::thread::Builder::new()
                .name("responder".into())
                .spawn(move || serve(listener, &config, started, &stop, &requests))?
        };
        Ok(Responder {
            addr,
            started,
            stop,
            requests,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// When it started (stall periods are counted from here).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Stops the thread and returns its result.
    pub fn stop(mut self) -> io::Result<()> {
        self.stop_thread()
    }

    fn stop_thread(&mut self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("responder thread panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.stop_thread();
    }
}

const LISTENER: u64 = u64::MAX;

struct RConn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    rlen: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    want_out: bool,
}

fn serve(
    listener: TcpListener,
    config: &ResponderConfig,
    started: Instant,
    stop: &AtomicBool,
    requests: &AtomicU64,
) -> io::Result<()> {
    if let Some(cpu) = config.cpu {
        sys::pin_to_cpu(cpu)?;
    }
    let value = vec![b'v'; config.value_len.unwrap_or(0)];
    let epoll = Epoll::new()?;
    epoll.add(&listener, LISTENER, sys::IN)?;
    let mut conns: Vec<Option<RConn>> = Vec::new();
    let mut events = vec![sys::empty_event(); 256];
    while !stop.load(Ordering::Relaxed) {
        if let Some((period, stall)) = config.stall {
            let phase = Duration::from_nanos(
                u64::try_from(started.elapsed().as_nanos() % period.as_nanos().max(1)).unwrap_or(0),
            );
            if phase + stall >= period {
                // Stalled: read and answer nothing until the period ends.
                std::thread::sleep((period - phase).min(Duration::from_millis(20)));
                continue;
            }
        }
        let n = epoll.wait(&mut events, Duration::from_millis(20))?;
        if let Some((period, stall)) = config.stall {
            let phase = started.elapsed().as_nanos() % period.as_nanos().max(1);
            if phase + stall.as_nanos() >= period.as_nanos() {
                continue; // the stall began while waiting: events stay pending
            }
        }
        for ev in &events[..n] {
            let token = ev.u64;
            if token == LISTENER {
                accept_all(&listener, &epoll, &mut conns)?;
                continue;
            }
            let i = usize::try_from(token).unwrap_or(usize::MAX);
            let Some(Some(conn)) = conns.get_mut(i) else {
                continue;
            };
            let keep = handle(conn, &value, requests)
                .and_then(|keep| {
                    update_interest(&epoll, conn, token)?;
                    Ok(keep)
                })
                .unwrap_or(false);
            if !keep {
                if let Some(c) = conns[i].take() {
                    let _ = epoll.delete(&c.stream);
                }
            }
        }
    }
    Ok(())
}

fn accept_all(
    listener: &TcpListener,
    epoll: &Epoll,
    conns: &mut Vec<Option<RConn>>,
) -> io::Result<()> {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(true)?;
                stream.set_nodelay(true)?;
                let slot = conns.iter().position(Option::is_none).unwrap_or_else(|| {
                    conns.push(None);
                    conns.len() - 1
                });
                epoll.add(&stream, crate::u64_of(slot), sys::IN)?;
                conns[slot] = Some(RConn {
                    stream,
                    rbuf: vec![0; 64 * 1024],
                    rlen: 0,
                    wbuf: Vec::with_capacity(64 * 1024),
                    wpos: 0,
                    want_out: false,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn update_interest(epoll: &Epoll, conn: &mut RConn, token: u64) -> io::Result<()> {
    let want = conn.wpos < conn.wbuf.len();
    if want != conn.want_out {
        conn.want_out = want;
        let events = if want { sys::IN | sys::OUT } else { sys::IN };
        epoll.modify(&conn.stream, token, events)?;
    }
    Ok(())
}

/// Reads once, answers every complete request, writes. `Ok(false)` when the
/// peer closed.
fn handle(conn: &mut RConn, value: &[u8], requests: &AtomicU64) -> io::Result<bool> {
    if conn.rlen == conn.rbuf.len() {
        let len = conn.rbuf.len() * 2;
        conn.rbuf.resize(len, 0);
    }
    match conn.stream.read(&mut conn.rbuf[conn.rlen..]) {
        Ok(0) => return Ok(false),
        Ok(n) => conn.rlen += n,
        Err(e)
            if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
        Err(e) => return Err(e),
    }
    let mut pos = 0;
    let mut answered = 0;
    while pos < conn.rlen {
        let input = &conn.rbuf[pos..conn.rlen];
        let used = if input[0] == binary::REQUEST {
            answer_binary(input, value, &mut conn.wbuf)
        } else {
            answer_text(input, value, &mut conn.wbuf)
        };
        match used {
            Some(n) => {
                pos += n;
                answered += 1;
            }
            None => break,
        }
    }
    conn.rbuf.copy_within(pos..conn.rlen, 0);
    conn.rlen -= pos;
    requests.fetch_add(answered, Ordering::Relaxed);
    while conn.wpos < conn.wbuf.len() {
        match conn.stream.write(&conn.wbuf[conn.wpos..]) {
            Ok(0) => return Ok(false),
            Ok(n) => conn.wpos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    conn.wbuf.clear();
    conn.wpos = 0;
    Ok(true)
}

/// Answers one text request at the start of `input`; the bytes it took,
/// `None` when incomplete.
fn answer_text(input: &[u8], value: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let nl = input.iter().position(|&b| b == b'\n')?;
    let line = input[..nl].strip_suffix(b"\r").unwrap_or(&input[..nl]);
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    match words.next() {
        Some(b"get" | b"gets") => {
            if !value.is_empty() {
                for key in words {
                    out.extend_from_slice(b"VALUE ");
                    out.extend_from_slice(key);
                    out.extend_from_slice(b" 0 ");
                    push_decimal(out, crate::u64_of(value.len()));
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(value);
                    out.extend_from_slice(b"\r\n");
                }
            }
            out.extend_from_slice(b"END\r\n");
            Some(nl + 1)
        }
        Some(b"set") => {
            let len = words
                .nth(3)
                .and_then(|w| std::str::from_utf8(w).ok())
                .and_then(|w| w.parse::<usize>().ok());
            let Some(len) = len else {
                out.extend_from_slice(b"CLIENT_ERROR bad command line format\r\n");
                return Some(nl + 1);
            };
            let total = nl + 1 + len + 2;
            if input.len() < total {
                return None;
            }
            out.extend_from_slice(b"STORED\r\n");
            Some(total)
        }
        Some(b"version") => {
            out.extend_from_slice(b"VERSION ebb-loadgen-responder\r\n");
            Some(nl + 1)
        }
        _ => {
            out.extend_from_slice(b"ERROR\r\n");
            Some(nl + 1)
        }
    }
}

/// Answers one binary request at the start of `input`.
fn answer_binary(input: &[u8], value: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    if input.len() < binary::HEADER {
        return None;
    }
    let body = u32::from_be_bytes([input[8], input[9], input[10], input[11]]);
    let total = binary::HEADER + usize::try_from(body).ok()?;
    if input.len() < total {
        return None;
    }
    let opcode = input[1];
    let reply = |out: &mut Vec<u8>, status: u16, extras: &[u8], data: &[u8]| {
        let body = u32::try_from(extras.len() + data.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&[binary::RESPONSE, opcode, 0, 0]);
        out.push(u8::try_from(extras.len()).unwrap_or(0));
        out.push(0);
        out.extend_from_slice(&status.to_be_bytes());
        out.extend_from_slice(&body.to_be_bytes());
        out.extend_from_slice(&input[12..16]); // opaque
        out.extend_from_slice(&[0; 8]); // cas
        out.extend_from_slice(extras);
        out.extend_from_slice(data);
    };
    match opcode {
        binary::GET if value.is_empty() => reply(out, binary::STATUS_NOT_FOUND, &[], b""),
        binary::GET => reply(out, binary::STATUS_OK, &[0; 4], value),
        binary::SET => reply(out, binary::STATUS_OK, &[], &[]),
        _ => reply(out, 0x81, &[], b"Unknown command"),
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{MemcachedBinary, MemcachedText, Op, Protocol, ReplyCounts, Request};

    fn round_trip(proto: &mut dyn Protocol, value_len: Option<usize>) -> ReplyCounts {
        let r = Responder::trivial(value_len).expect("start");
        let mut s = TcpStream::connect(r.addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut req = Vec::new();
        for i in 0..100u32 {
            let key = format!("key{i}");
            let op = if i % 3 == 0 { Op::Set } else { Op::Get };
            proto.encode(
                &Request {
                    op,
                    key: key.as_bytes(),
                    value: b"some value",
                },
                &mut req,
            );
        }
        // Byte by byte in places, to split requests across reads.
        s.write_all(&req[..7]).expect("write");
        std::thread::sleep(Duration::from_millis(20));
        s.write_all(&req[7..]).expect("write");
        let mut counts = ReplyCounts::default();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while counts.replies < 100 {
            let n = s.read(&mut chunk).expect("read");
            assert!(n > 0, "closed");
            buf.extend_from_slice(&chunk[..n]);
            let used = proto.parse_all(&buf, &mut counts).expect("parse");
            buf.drain(..used);
        }
        assert_eq!(r.requests(), 100);
        counts
    }

    #[test]
    fn answers_text_and_binary() {
        let c = round_trip(&mut MemcachedText, Some(16));
        assert_eq!((c.stored, c.hits, c.misses, c.errors), (34, 66, 0, 0));
        let c = round_trip(&mut MemcachedBinary, None);
        assert_eq!((c.stored, c.hits, c.misses, c.errors), (34, 0, 66, 0));
        let c = round_trip(&mut MemcachedBinary, Some(3));
        assert_eq!((c.stored, c.hits), (34, 66));
    }

    #[test]
    fn unknown_text_commands_get_errors() {
        let mut out = Vec::new();
        assert_eq!(answer_text(b"bogus\r\n", b"", &mut out), Some(7));
        assert_eq!(out, b"ERROR\r\n");
        out.clear();
        assert_eq!(answer_text(b"set k 0 0 5\r\nab", b"", &mut out), None);
        assert_eq!(
            answer_text(b"set k 0 0 2\r\nab\r\n", b"", &mut out),
            Some(17)
        );
        assert_eq!(out, b"STORED\r\n");
    }
}
