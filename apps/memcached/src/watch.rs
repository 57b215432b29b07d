//! `watch`: live log streams for operators (memcached 1.6.18's logger,
//! `protocol.txt` "Watchers"), the `fetchers` stream (one `item_get` line
//! per key lookup) and the `mutations` stream (one `item_store` line per
//! store command).
//!
//! Watchers are few and rare, so the path without one costs one relaxed
//! load ([`Watchers::active`]). An event on any core formats its line
//! once and appends it to each matching watcher's pending bytes under
//! that watcher's lock; the first line wakes the watcher's task, which
//! runs on the watching connection's core (a connection handle stays on
//! its core) and sends what is pending. A watcher whose client does not
//! read falls behind: lines past [`PENDING_LIMIT`] bytes, and batches the
//! connection has no send credit for, are dropped and counted, and the
//! next batch starts with `skipped=N`, as memcached's logger does.
//!
//! What differs from 1.6.18 (the store has no slab classes and makes no
//! internal lookups): `clsid` is 1 for every item (the store reports
//! itself as slab class 1, see `stat_lists.rs`) and 0 for a miss; `cfd` is the connection's
//! number on its core, not a file descriptor; only the commands' own
//! lookups are logged (1.6.18 also logs the lookup its store commands
//! make before storing); a miss is `not_found` (never `expired` or
//! `flushed`); `item_store`'s `ttl` and `size` are the request's.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ebb_event::{oneshot, Instant, Sender};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_mem::sync::SpinLock;
use ebb_net::TcpConnection;

use crate::protocol::common::push_u64;
use crate::store::{SetMode, SetResult};

/// At most this many watchers at once (memcached's `LOGGER_MAX_WATCHERS`).
pub const MAX_WATCHERS: usize = 20;

/// Bytes of lines one watcher may have waiting; more are skipped.
pub const PENDING_LIMIT: usize = 256 * 1024;

/// The `fetchers` stream.
pub const FETCHERS: u8 = 1;
/// The `mutations` stream.
pub const MUTATIONS: u8 = 2;

/// Why `watch` was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchError {
    /// An unknown stream name: memcached answers `ERROR`.
    Unknown,
    /// A stream 1.6.18 has and this server does not log.
    Unsupported,
}

/// The streams `watch <stream>…` asks for (`fetchers` without any), as
/// 1.6.18's `process_watch_command` reads them.
pub fn parse_streams<'a>(names: impl Iterator<Item = &'a [u8]>) -> Result<u8, WatchError> {
    let mut streams = 0;
    for name in names {
        streams |= match name {
            b"fetchers" => FETCHERS,
            b"mutations" => MUTATIONS,
            b"rawcmds" | b"evictions" | b"sysevents" | b"connevents" | b"deletions"
            | b"proxyreqs" | b"proxyevents" | b"proxyuser" => return Err(WatchError::Unsupported),
            _ => return Err(WatchError::Unknown),
        };
    }
    Ok(if streams == 0 { FETCHERS } else { streams })
}

/// Every watcher of the server.
pub struct Watchers {
    active: AtomicUsize,
    gid: AtomicU64,
    list: SpinLock<Vec<Arc<Watcher>>>,
}

/// The server's watchers (one server per process).
pub static WATCHERS: Watchers = Watchers {
    active: AtomicUsize::new(0),
    gid: AtomicU64::new(0),
    list: SpinLock::new(Vec::new()),
};

/// One watching connection's streams and waiting lines.
pub struct Watcher {
    streams: u8,
    pending: SpinLock<Pending>,
}

struct Pending {
    lines: Vec<u8>,
    skipped: u64,
    wake: Option<Sender<()>>,
    closed: bool,
}

/// Where and when an event happened, for its line.
#[derive(Clone, Copy)]
pub struct Site {
    /// Unix time the server started.
    pub started: u32,
    /// Monotonic time the server started.
    pub started_mono: Instant,
    /// The client's connection number.
    pub client: u64,
}

impl Watchers {
    /// Whether anyone watches: the only cost of an event without watchers.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed) != 0
    }

    /// Starts streaming `streams` to `conn`; `None` past [`MAX_WATCHERS`].
    /// The returned watcher ends when [`Watcher::stop`] is called.
    pub fn start(&'static self, conn: &TcpConnection, streams: u8) -> Option<Arc<Watcher>> {
        let watcher = Arc::new(Watcher {
            streams,
            pending: SpinLock::new(Pending {
                lines: Vec::new(),
                skipped: 0,
                wake: None,
                closed: false,
            }),
        });
        {
            let mut list = self.list.lock();
            if list.len() >= MAX_WATCHERS {
                return None;
            }
            list.push(Arc::clone(&watcher));
            self.active.store(list.len(), Ordering::Relaxed);
        }
        ebb_event::spawn_task(send_lines(conn.clone(), Arc::clone(&watcher)));
        Some(watcher)
    }

    /// Forgets `watcher` (its connection closed).
    pub fn stop(&self, watcher: &Arc<Watcher>) {
        {
            let mut list = self.list.lock();
            list.retain(|each| !Arc::ptr_eq(each, watcher));
            self.active.store(list.len(), Ordering::Relaxed);
        }
        let wake = {
            let mut pending = watcher.pending.lock();
            pending.closed = true;
            pending.wake.take()
        };
        if let Some(wake) = wake {
            wake.send(());
        }
    }

    /// A key lookup (`fetchers`): logger.c's `item_get` entry.
    #[inline]
    pub fn item_get(&self, site: Site, key: &[u8], size: Option<usize>) {
        if self.active() {
            self.log_item_get(site, key, size);
        }
    }

    /// A store command (`mutations`): logger.c's `item_store` entry.
    #[inline]
    pub fn item_store(
        &self,
        site: Site,
        key: &[u8],
        outcome: (SetMode, SetResult),
        ttl: u32,
        size: usize,
    ) {
        if self.active() {
            self.log_item_store(site, key, outcome, ttl, size);
        }
    }

    #[inline(never)]
    fn log_item_get(&self, site: Site, key: &[u8], size: Option<usize>) {
        let mut line = self.header(site, b"item_get", key);
        line.extend_from_slice(if size.is_some() {
            b" status=found"
        } else {
            b" status=not_found"
        });
        // A miss has no class (0); the store's items are class 1.
        let class = u64::from(size.is_some());
        self.finish(site, line, class, size.unwrap_or(0), FETCHERS);
    }

    #[inline(never)]
    fn log_item_store(
        &self,
        site: Site,
        key: &[u8],
        (mode, result): (SetMode, SetResult),
        ttl: u32,
        size: usize,
    ) {
        let mut line = self.header(site, b"item_store", key);
        line.extend_from_slice(b" status=");
        line.extend_from_slice(match result {
            SetResult::Stored(_) => b"stored",
            SetResult::NotStored => b"not_stored",
            SetResult::Exists => b"exists",
            SetResult::NotFound => b"not_found",
            SetResult::TooLarge => b"too_large",
            SetResult::OutOfMemory => b"no_memory",
        });
        line.extend_from_slice(b" cmd=");
        line.extend_from_slice(match mode {
            SetMode::Set => b"set",
            SetMode::Add => b"add",
            SetMode::Replace => b"replace",
            SetMode::Append => b"append",
            SetMode::Prepend => b"prepend",
            SetMode::Cas => b"cas",
        });
        line.extend_from_slice(b" ttl=");
        push_u64(&mut line, u64::from(ttl));
        self.finish(site, line, 1, size, MUTATIONS);
    }

    /// `ts=<s>.<µs> gid=<n> type=<kind> key=<uri-encoded key>`.
    fn header(&self, site: Site, kind: &[u8], key: &[u8]) -> Vec<u8> {
        let since = ebb_event::now().saturating_since(site.started_mono);
        let mut line = Vec::with_capacity(128 + key.len() * 3);
        line.extend_from_slice(b"ts=");
        push_u64(&mut line, u64::from(site.started) + since.as_secs());
        line.push(b'.');
        push_u64(&mut line, u64::from(since.subsec_micros()));
        line.extend_from_slice(b" gid=");
        push_u64(&mut line, self.gid.fetch_add(1, Ordering::Relaxed) + 1);
        line.extend_from_slice(b" type=");
        line.extend_from_slice(kind);
        line.extend_from_slice(b" key=");
        push_uri_encoded(&mut line, key);
        line
    }

    /// Appends ` clsid=<class> cfd=<client> size=<size>\n` and hands the
    /// line to every watcher of `stream`.
    fn finish(&self, site: Site, mut line: Vec<u8>, class: u64, size: usize, stream: u8) {
        line.extend_from_slice(b" clsid=");
        push_u64(&mut line, class);
        line.extend_from_slice(b" cfd=");
        push_u64(&mut line, site.client);
        line.extend_from_slice(b" size=");
        push_u64(&mut line, size as u64);
        line.push(b'\n');
        let list = self.list.lock();
        for watcher in list.iter().filter(|each| each.streams & stream != 0) {
            watcher.push(&line);
        }
    }
}

impl Watcher {
    fn push(&self, line: &[u8]) {
        let wake = {
            let mut pending = self.pending.lock();
            if pending.lines.len() + line.len() > PENDING_LIMIT {
                pending.skipped += 1;
            } else {
                pending.lines.extend_from_slice(line);
            }
            pending.wake.take()
        };
        if let Some(wake) = wake {
            wake.send(());
        }
    }
}

/// The watcher's task, on its connection's core: waits for lines and
/// sends them, until the watcher stops or the connection fails.
async fn send_lines(conn: TcpConnection, watcher: Arc<Watcher>) {
    loop {
        let (wake, woken) = oneshot();
        let batch = {
            let mut pending = watcher.pending.lock();
            if pending.closed {
                return;
            }
            if pending.lines.is_empty() && pending.skipped == 0 {
                pending.wake = Some(wake);
                None
            } else {
                Some((
                    core::mem::take(&mut pending.lines),
                    core::mem::take(&mut pending.skipped),
                ))
            }
        };
        let Some((lines, skipped)) = batch else {
            let _ = woken.await;
            continue;
        };
        let mut out = Vec::with_capacity(lines.len() + 32);
        if skipped > 0 {
            out.extend_from_slice(b"skipped=");
            push_u64(&mut out, skipped);
            out.push(b'\n');
        }
        out.extend_from_slice(&lines);
        if conn.send_credit() < out.len() {
            // The client is not reading: drop the batch, count its lines.
            let dropped = lines.iter().filter(|&&byte| byte == b'\n').count() as u64;
            watcher.pending.lock().skipped += skipped + dropped;
        } else if conn
            .send_or_buffer(IoChain::from(IoBuf::from_vec(out)))
            .is_err()
        {
            return;
        }
        ebb_event::yield_now().await;
    }
}

/// memcached's `uriencode`: letters, digits and `-._~` as they are, every
/// other byte as `%XX`.
pub(crate) fn push_uri_encoded(out: &mut Vec<u8>, key: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &byte in key {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte);
        } else {
            out.extend_from_slice(&[
                b'%',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 15)],
            ]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_default_to_fetchers_and_unknown_names_are_errors() {
        let parse = |names: &[&[u8]]| parse_streams(names.iter().copied());
        assert_eq!(parse(&[]), Ok(FETCHERS));
        assert_eq!(parse(&[b"mutations"]), Ok(MUTATIONS));
        assert_eq!(
            parse(&[b"fetchers", b"mutations"]),
            Ok(FETCHERS | MUTATIONS)
        );
        assert_eq!(parse(&[b"evictions"]), Err(WatchError::Unsupported));
        assert_eq!(parse(&[b"fetchers", b"bogus"]), Err(WatchError::Unknown));
    }

    #[test]
    fn keys_are_uri_encoded_as_memcached_does() {
        let mut out = Vec::new();
        push_uri_encoded(&mut out, b"a%20b-c.d_e~f/\x01");
        assert_eq!(out, b"a%2520b-c.d_e~f%2F%01");
    }
}
