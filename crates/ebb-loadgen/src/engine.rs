//! The engine: generator threads, each with its own epoll instance and
//! connections.
//!
//! A thread's loop: write what was queued (one `write` per connection per
//! wake-up), wait in epoll until the next scheduled send, a reply or the end,
//! read each readable connection once (one `read` of up to 64 KiB), match
//! the replies to the oldest requests in flight, record latencies, then queue
//! new requests: in closed loop one per reply, in open loop every request
//! whose scheduled time has come, on the next connection with room. Times are
//! nanoseconds since the thread started, from the monotonic clock. Buffers
//! are allocated once per connection and reused; a request costs no
//! allocation.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::config::{Arrival, Config, LoadgenError};
use crate::histogram::Histogram;
use crate::protocol::{Op, Outcome, Protocol, ReplyCounts, Request};
use crate::sys::{self, CpuTime, Epoll};
use crate::u64_of;
use crate::workload::{KeySpace, OpGen};

/// A send more than this late (after its scheduled time) counts as late.
pub const LATE_NS: u64 = 1_000_000;
/// Initial read buffer per connection.
const READ_BUF: usize = 64 * 1024;
/// Longest single wait while waiting for other threads.
const GATE_LIMIT: Duration = Duration::from_secs(3600);

/// What the threads share, read-only during the run.
pub struct Shared {
    /// Set when a thread fails: the others stop.
    pub abort: AtomicBool,
    /// The start line.
    pub gate: Gate,
    /// Every key.
    pub keys: KeySpace,
    /// The bytes values are cut from.
    pub values: Vec<u8>,
    /// The resolved server address.
    pub addr: SocketAddr,
}

/// The start line: every thread arrives (connected and preloaded, or
/// failed); when all have arrived without failure, they share one start
/// instant.
pub struct Gate {
    parties: usize,
    state: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    arrived: usize,
    failed: bool,
    start: Option<Instant>,
}

impl Gate {
    /// A gate for `parties` threads.
    pub fn new(parties: usize) -> Self {
        Gate {
            parties,
            state: Mutex::new(GateState::default()),
            cv: Condvar::new(),
        }
    }

    /// Arrives (`ok` = ready to run); returns the common start instant, or
    /// `None` when some thread failed.
    pub fn arrive(&self, ok: bool) -> Option<Instant> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.arrived += 1;
        if !ok {
            s.failed = true;
        }
        if s.arrived == self.parties && !s.failed {
            s.start = Some(Instant::now());
        }
        self.cv.notify_all();
        let waited = Instant::now();
        while s.start.is_none() && !s.failed {
            if waited.elapsed() > GATE_LIMIT {
                s.failed = true;
                break;
            }
            s = self
                .cv
                .wait_timeout(s, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if s.failed {
            None
        } else {
            s.start
        }
    }
}

/// Arrives at the gate as failed if dropped before arriving (a thread that
/// returns early or panics never leaves the others waiting).
struct GateGuard<'a> {
    gate: &'a Gate,
    arrived: bool,
}

impl GateGuard<'_> {
    fn arrive(&mut self, ok: bool) -> Option<Instant> {
        self.arrived = true;
        self.gate.arrive(ok)
    }
}

impl Drop for GateGuard<'_> {
    fn drop(&mut self) {
        if !self.arrived {
            self.gate.arrive(false);
        }
    }
}

/// What one thread measured (merged into the [`Summary`](crate::Summary)).
#[derive(Debug, Clone, Default)]
pub struct ThreadStats {
    /// Latencies of measured requests.
    pub hist: Histogram,
    /// Replies to measured requests (sent or scheduled in the window,
    /// completed before its end).
    pub window: ReplyCounts,
    /// Every reply of the run (warm-up, window, drain), preload excluded.
    pub total: ReplyCounts,
    /// Every request sent (preload excluded).
    pub sent_total: u64,
    /// Requests sent whose start time falls in the window.
    pub sent_window: u64,
    /// Open loop: requests scheduled in the window.
    pub offered_window: u64,
    /// Open loop: measured requests sent more than [`LATE_NS`] after their
    /// scheduled time.
    pub late: u64,
    /// Open loop: the largest delay between scheduled and actual send (ns).
    pub max_lag_ns: u64,
    /// Open loop: requests scheduled in the window but never sent.
    pub unsent_at_end: u64,
    /// Measured requests sent but without a reply at the end.
    pub unanswered_at_end: u64,
    /// Requests still without a reply after the drain.
    pub unanswered_after_drain: u64,
    /// Gets and sets among the measured requests sent.
    pub gets_window: u64,
    /// Sets among the measured requests sent.
    pub sets_window: u64,
    /// This thread's CPU time during the window.
    pub cpu: CpuTime,
    /// Preload: keys set, and the replies.
    pub preload_sent: u64,
    /// Preload replies.
    pub preload: ReplyCounts,
    /// Preload wall time (s).
    pub preload_secs: f64,
}

impl ThreadStats {
    /// Adds `other` (another thread's figures).
    pub fn merge(&mut self, o: &ThreadStats) {
        self.hist.merge(&o.hist);
        self.window.merge(&o.window);
        self.total.merge(&o.total);
        self.sent_total += o.sent_total;
        self.sent_window += o.sent_window;
        self.offered_window += o.offered_window;
        self.late += o.late;
        self.max_lag_ns = self.max_lag_ns.max(o.max_lag_ns);
        self.unsent_at_end += o.unsent_at_end;
        self.unanswered_at_end += o.unanswered_at_end;
        self.unanswered_after_drain += o.unanswered_after_drain;
        self.gets_window += o.gets_window;
        self.sets_window += o.sets_window;
        self.cpu.user += o.cpu.user;
        self.cpu.sys += o.cpu.sys;
        self.preload_sent += o.preload_sent;
        self.preload.merge(&o.preload);
        self.preload_secs = self.preload_secs.max(o.preload_secs);
    }
}

/// One connection.
struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    /// Start times (ns) of the requests in flight, oldest first.
    inflight: VecDeque<u64>,
    dirty: bool,
    want_out: bool,
    /// Number for messages (thread.connection).
    name: String,
}

/// A generator thread's state.
struct Worker<'s> {
    cfg: &'s Config,
    shared: &'s Shared,
    epoll: Epoll,
    events: Vec<libc::epoll_event>,
    conns: Vec<Conn>,
    proto: Box<dyn Protocol>,
    ops: OpGen,
    dirty: Vec<usize>,
    done: Vec<(Outcome, u64)>,
    base: Instant,
    stats: ThreadStats,
}

fn io_err(context: String) -> impl FnOnce(io::Error) -> LoadgenError {
    move |error| LoadgenError::Io { context, error }
}

/// A time in nanoseconds kept as `f64` (the open-loop schedule), as an
/// integer: truncated, saturating, 0 for negative or NaN.
fn to_ns(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else if x >= u64::MAX as f64 {
        u64::MAX
    } else {
        // In range and not negative, checked above.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let v = x as u64;
        v
    }
}

/// `d` in nanoseconds, saturating.
fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Runs generator thread `index` to completion (connect, preload, gate,
/// run, drain).
pub fn run_thread(
    cfg: &Config,
    shared: &Shared,
    index: usize,
) -> Result<ThreadStats, LoadgenError> {
    let mut guard = GateGuard {
        gate: &shared.gate,
        arrived: false,
    };
    let result = prepare(cfg, shared, index);
    let mut worker = match result {
        Ok(w) => w,
        Err(e) => {
            shared.abort.store(true, Ordering::Relaxed);
            guard.arrive(false);
            return Err(e);
        }
    };
    let Some(start) = guard.arrive(true) else {
        return Err(LoadgenError::Aborted);
    };
    let result = worker.run(start, index);
    if result.is_err() {
        shared.abort.store(true, Ordering::Relaxed);
    }
    result.map(|()| worker.stats)
}

/// Pins, connects and preloads.
fn prepare<'s>(
    cfg: &'s Config,
    shared: &'s Shared,
    index: usize,
) -> Result<Worker<'s>, LoadgenError> {
    if !cfg.cpus.is_empty() {
        let cpu = cfg.cpus[index % cfg.cpus.len()];
        sys::pin_to_cpu(cpu).map_err(io_err(format!("cannot pin thread {index} to CPU {cpu}")))?;
    }
    if cfg.is_open_loop() {
        sys::tight_timer_slack();
    }
    let epoll = Epoll::new().map_err(io_err("epoll_create1".into()))?;
    let mut conns = Vec::with_capacity(cfg.connections);
    for c in 0..cfg.connections {
        let stream =
            TcpStream::connect_timeout(&shared.addr, cfg.connect_timeout).map_err(|error| {
                LoadgenError::Connect {
                    server: cfg.server.clone(),
                    error,
                }
            })?;
        let name = format!("{index}.{c}");
        let setup = |s: &TcpStream| -> io::Result<()> {
            s.set_nodelay(true)?;
            s.set_nonblocking(true)
        };
        setup(&stream).map_err(io_err(format!("cannot set up connection {name}")))?;
        epoll
            .add(&stream, u64_of(c), sys::IN | sys::ERR_HUP)
            .map_err(io_err("epoll_ctl".into()))?;
        conns.push(Conn {
            stream,
            rbuf: vec![0; READ_BUF],
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(READ_BUF),
            wpos: 0,
            inflight: VecDeque::with_capacity(cfg.depth),
            dirty: false,
            want_out: false,
            name,
        });
    }
    let seed = cfg
        .seed
        .wrapping_mul(0x9e37_79b9)
        .wrapping_add(u64_of(index));
    let mut worker = Worker {
        cfg,
        shared,
        epoll,
        events: vec![sys::empty_event(); cfg.connections.min(1024)],
        conns,
        proto: cfg.protocol.create(),
        ops: OpGen::new(seed, cfg.keys, cfg.update, cfg.value_size).only(cfg.only_keys.clone()),
        dirty: Vec::with_capacity(cfg.connections),
        done: Vec::with_capacity(1024),
        base: Instant::now(),
        stats: ThreadStats::default(),
    };
    if cfg.preload {
        worker.preload(index)?;
    }
    Ok(worker)
}

impl Worker<'_> {
    #[inline]
    fn now(&self) -> u64 {
        ns(self.base.elapsed())
    }

    /// Queues a request on connection `c` with start time `t`.
    #[inline]
    fn issue(&mut self, c: usize, op: Op, key: usize, value_len: usize, t: u64) {
        let conn = &mut self.conns[c];
        let request = Request {
            op,
            key: self.shared.keys.key(key),
            value: &self.shared.values[..value_len],
        };
        self.proto.encode(&request, &mut conn.wbuf);
        conn.inflight.push_back(t);
        if !conn.dirty {
            conn.dirty = true;
            self.dirty.push(c);
        }
    }

    /// Queues the next request of the workload.
    #[inline]
    fn issue_next(&mut self, c: usize, t: u64, measured: bool) {
        let (op, key, len) = self.ops.next_op();
        self.issue(c, op, key, len, t);
        self.stats.sent_total += 1;
        if measured {
            self.stats.sent_window += 1;
            match op {
                Op::Get => self.stats.gets_window += 1,
                Op::Set => self.stats.sets_window += 1,
            }
        }
    }

    /// Writes what every dirty connection has queued.
    fn flush(&mut self) -> Result<(), LoadgenError> {
        let mut dirty = std::mem::take(&mut self.dirty);
        for &c in &dirty {
            self.write_conn(c)?;
        }
        dirty.clear();
        self.dirty = dirty;
        Ok(())
    }

    fn write_conn(&mut self, c: usize) -> Result<(), LoadgenError> {
        let conn = &mut self.conns[c];
        conn.dirty = false;
        while conn.wpos < conn.wbuf.len() {
            match conn.stream.write(&conn.wbuf[conn.wpos..]) {
                Ok(0) => {
                    return Err(LoadgenError::Server(format!(
                        "connection {} accepts no more bytes",
                        conn.name
                    )))
                }
                Ok(n) => conn.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !conn.want_out {
                        conn.want_out = true;
                        self.epoll
                            .modify(&conn.stream, u64_of(c), sys::IN | sys::OUT | sys::ERR_HUP)
                            .map_err(io_err("epoll_ctl".into()))?;
                    }
                    return Ok(());
                }
                Err(e)
                    if e.kind() == io::ErrorKind::ConnectionReset
                        || e.kind() == io::ErrorKind::BrokenPipe =>
                {
                    return Err(LoadgenError::Server(format!(
                        "the server closed connection {} while it was being written",
                        conn.name
                    )));
                }
                Err(e) => {
                    return Err(io_err(format!("write on connection {}", conn.name))(e));
                }
            }
        }
        conn.wbuf.clear();
        conn.wpos = 0;
        if conn.want_out {
            conn.want_out = false;
            self.epoll
                .modify(&conn.stream, u64_of(c), sys::IN | sys::ERR_HUP)
                .map_err(io_err("epoll_ctl".into()))?;
        }
        Ok(())
    }

    /// Reads connection `c` once and parses every complete reply into
    /// `self.done` (outcome, start time of its request).
    fn read_conn(&mut self, c: usize) -> Result<(), LoadgenError> {
        self.done.clear();
        let conn = &mut self.conns[c];
        if conn.rend == conn.rbuf.len() {
            if conn.rstart > 0 {
                conn.rbuf.copy_within(conn.rstart..conn.rend, 0);
                conn.rend -= conn.rstart;
                conn.rstart = 0;
            } else {
                // One reply larger than the buffer.
                let len = conn.rbuf.len() * 2;
                conn.rbuf.resize(len, 0);
            }
        }
        match conn.stream.read(&mut conn.rbuf[conn.rend..]) {
            Ok(0) => {
                return Err(LoadgenError::Server(format!(
                    "the server closed connection {} ({} requests without a reply)",
                    conn.name,
                    conn.inflight.len()
                )))
            }
            Ok(n) => conn.rend += n,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                return Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                return Err(LoadgenError::Server(format!(
                    "the server closed connection {} abruptly (reset; {} requests without a reply)",
                    conn.name,
                    conn.inflight.len()
                )))
            }
            Err(e) => return Err(io_err(format!("read on connection {}", conn.name))(e)),
        }
        loop {
            let parsed = self
                .proto
                .parse_one(&conn.rbuf[conn.rstart..conn.rend])
                .map_err(|e| LoadgenError::Server(format!("connection {}: {e}", conn.name)))?;
            let Some((used, outcome)) = parsed else { break };
            conn.rstart += used;
            let Some(t) = conn.inflight.pop_front() else {
                return Err(LoadgenError::Server(format!(
                    "connection {}: a reply without a request",
                    conn.name
                )));
            };
            self.done.push((outcome, t));
        }
        if conn.rstart == conn.rend {
            conn.rstart = 0;
            conn.rend = 0;
        }
        Ok(())
    }

    /// Waits for events (at most `timeout`) and reads each readable
    /// connection; calls `on_reply(self, connection, now)` after each read
    /// that produced replies (in `self.done`).
    fn poll(
        &mut self,
        timeout: Duration,
        on_reply: &mut dyn FnMut(&mut Self, usize, u64),
    ) -> Result<(), LoadgenError> {
        let n = self
            .epoll
            .wait(&mut self.events, timeout)
            .map_err(io_err("epoll_wait".into()))?;
        for i in 0..n {
            let ev = self.events[i];
            let (bits, token) = (ev.events, ev.u64);
            let c = usize::try_from(token).unwrap_or(usize::MAX);
            if c >= self.conns.len() {
                continue;
            }
            if bits & sys::OUT != 0 && !self.conns[c].dirty {
                self.conns[c].dirty = true;
                self.dirty.push(c);
            }
            if bits & (sys::IN | sys::ERR_HUP) != 0 {
                self.read_conn(c)?;
                if !self.done.is_empty() {
                    let now = self.now();
                    on_reply(self, c, now);
                }
            }
        }
        Ok(())
    }

    fn aborted(&self) -> bool {
        self.shared.abort.load(Ordering::Relaxed)
    }

    /// Sets this thread's share of the keys once each, `depth` in flight per
    /// connection; fails on timeout.
    fn preload(&mut self, index: usize) -> Result<(), LoadgenError> {
        let threads = u64_of(self.cfg.threads);
        let keys = self.cfg.key_count();
        let lo = usize::try_from(keys * u64_of(index) / threads).unwrap_or(0);
        let hi = usize::try_from(keys * (u64_of(index) + 1) / threads).unwrap_or(0);
        let started = Instant::now();
        let deadline = started + self.cfg.preload_timeout;
        let mut next = lo;
        let mut counts = ReplyCounts::default();
        loop {
            for c in 0..self.conns.len() {
                while next < hi && self.conns[c].inflight.len() < self.cfg.depth {
                    let len = self.ops.value_size();
                    let key = self.cfg.key_at(next);
                    self.issue(c, Op::Set, key, len, 0);
                    next += 1;
                }
            }
            self.flush()?;
            if next == hi && self.conns.iter().all(|c| c.inflight.is_empty()) {
                break;
            }
            if self.aborted() {
                return Err(LoadgenError::Aborted);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(LoadgenError::Preload(format!(
                    "thread {index} stored {} of {} keys in {:.1} s (--preload-timeout)",
                    counts.replies,
                    hi - lo,
                    self.cfg.preload_timeout.as_secs_f64()
                )));
            }
            let wait = (deadline - now).min(Duration::from_millis(100));
            self.poll(wait, &mut |w, _, _| {
                for &(o, _) in &w.done {
                    counts.add(o);
                }
            })?;
        }
        self.stats.preload_sent = u64_of(hi - lo);
        self.stats.preload = counts;
        self.stats.preload_secs = started.elapsed().as_secs_f64();
        Ok(())
    }

    /// The measured run: `start` is the common start instant.
    fn run(&mut self, start: Instant, index: usize) -> Result<(), LoadgenError> {
        let cfg = self.cfg;
        let start_ns = ns(start.saturating_duration_since(self.base)).max(self.now());
        let warm = ns(start.saturating_duration_since(self.base) + cfg.warmup);
        let end = warm + ns(cfg.duration);
        let depth = cfg.depth;
        let in_window = move |t: u64| t >= warm && t < end;
        let mut cpu_start = None;

        // Open loop: this thread's share of the schedule.
        let threads = cfg.threads as f64;
        let mean_gap = cfg.rate.map_or(0.0, |r| 1e9 * threads / r);
        let mut arrivals = crate::workload::Rng::new(cfg.seed ^ 0xa11 ^ (u64_of(index) << 32));
        let mut gap = move || match cfg.arrival {
            Arrival::Poisson => arrivals.exponential(mean_gap),
            Arrival::Uniform => mean_gap,
        };
        let mut next_f = start_ns as f64
            + match cfg.arrival {
                Arrival::Poisson => gap(),
                Arrival::Uniform => mean_gap * index as f64 / threads,
            };
        let open = cfg.is_open_loop();
        let mut rr = 0usize;

        if !open {
            let now = self.now();
            for c in 0..self.conns.len() {
                for _ in 0..depth {
                    self.issue_next(c, now, in_window(now));
                }
            }
        }
        loop {
            let mut now = self.now();
            let mut blocked = false;
            if open {
                // Send everything due, oldest first, on connections with room.
                while to_ns(next_f) <= now && to_ns(next_f) < end {
                    let n = self.conns.len();
                    let Some(c) = (0..n)
                        .map(|k| (rr + k) % n)
                        .find(|&c| self.conns[c].inflight.len() < depth)
                    else {
                        blocked = true;
                        break;
                    };
                    rr = (c + 1) % n;
                    let t = to_ns(next_f);
                    let measured = in_window(t);
                    if measured {
                        let lag = now - t;
                        if lag > LATE_NS {
                            self.stats.late += 1;
                        }
                        self.stats.max_lag_ns = self.stats.max_lag_ns.max(lag);
                    }
                    self.issue_next(c, t, measured);
                    next_f += gap();
                }
            }
            self.flush()?;
            now = self.now();
            if cpu_start.is_none() && now >= warm {
                cpu_start = Some(sys::thread_cpu());
            }
            if now >= end || self.aborted() {
                break;
            }
            let until = if open && !blocked && to_ns(next_f) < end {
                to_ns(next_f).max(now)
            } else {
                end
            };
            let stats_end = end;
            self.poll(Duration::from_nanos(until - now), &mut |w, c, now| {
                for i in 0..w.done.len() {
                    let (o, t) = w.done[i];
                    w.stats.total.add(o);
                    if in_window(t) && now <= stats_end {
                        w.stats.window.add(o);
                        w.stats.hist.record(now - t);
                    }
                }
                if !open && now < stats_end {
                    let measured = in_window(now);
                    for _ in 0..w.done.len() {
                        w.issue_next(c, now, measured);
                    }
                }
            })?;
        }
        let cpu_end = sys::thread_cpu();
        self.stats.cpu = cpu_end.since(cpu_start.unwrap_or(cpu_end));
        if self.aborted() {
            return Err(LoadgenError::Aborted);
        }
        // What the window offered but did not get.
        self.stats.unanswered_at_end = u64_of(
            self.conns
                .iter()
                .flat_map(|c| c.inflight.iter())
                .filter(|&&t| in_window(t))
                .count(),
        );
        if open {
            while to_ns(next_f) < end {
                if in_window(to_ns(next_f)) {
                    self.stats.unsent_at_end += 1;
                }
                next_f += gap();
            }
            self.stats.offered_window = self.stats.sent_window + self.stats.unsent_at_end;
        } else {
            self.stats.offered_window = self.stats.sent_window;
        }
        self.drain()?;
        Ok(())
    }

    /// Waits (at most `cfg.drain`) for the replies still outstanding; they
    /// count in the totals only.
    fn drain(&mut self) -> Result<(), LoadgenError> {
        let deadline = Instant::now() + self.cfg.drain;
        loop {
            self.flush()?;
            let outstanding: usize = self.conns.iter().map(|c| c.inflight.len()).sum();
            let now = Instant::now();
            if outstanding == 0 || now >= deadline || self.aborted() {
                self.stats.unanswered_after_drain = u64_of(outstanding);
                return Ok(());
            }
            self.poll(deadline - now, &mut |w, _, _| {
                for i in 0..w.done.len() {
                    w.stats.total.add(w.done[i].0);
                }
            })?;
        }
    }
}
