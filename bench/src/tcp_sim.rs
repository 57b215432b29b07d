//! Ebbflow's TCP (`crates/ebb-netstack`) on the simulated link, timed on
//! the real clock: two stacks in this thread, joined by a `sim::Sim` wire
//! with no latency, no bandwidth limit and no faults, so what is measured
//! is the cost of both ends' stacks (and the wire's hand-over of frames,
//! which gathers each frame into one receive buffer as a NIC's DMA would).
//!
//! * [`bulk`]: one connection carries `messages` application messages of
//!   a given size (64 KiB in `./ebb bench tcp`); the receiver compares every
//!   byte with what was sent.
//! * [`request_response`]: one connection, one request in flight; the
//!   client sends a small message, the server echoes the views it received
//!   (no copy, as memcached replies), the client checks the reply and sends
//!   the next.
//!
//! Both return the CPU time of this thread (`CLOCK_THREAD_CPUTIME_ID`) and
//! the wall time over the whole exchange, handshake included; simulated
//! time costs nothing (the simulation jumps from event to event).

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetError, NetStack, TcpConnection, TcpHandler};
use ebb_netstack::sim::{LinkConfig, Sim, SimPort};
use ebb_netstack::tcp::TcpConfig;
use ebb_netstack::{Config, EthernetAddress, IpConfig, Stack};

const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 5001;
/// Distinct messages the sender cycles through, so that a message
/// delivered in the wrong place does not compare equal.
const DISTINCT: usize = 7;
/// Simulated time after which an exchange that has not finished is a
/// failure (it needs well under a simulated second when all is well).
const SIM_LIMIT: Duration = Duration::from_secs(600);

/// What one timed exchange took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timed {
    /// Application bytes delivered intact (bulk), or transactions
    /// completed (request–response).
    pub count: u64,
    /// CPU time of this thread.
    pub cpu: Duration,
    /// Wall-clock time.
    pub wall: Duration,
    /// Frames both stacks received (each a TCP segment here), so that a
    /// profile's cost can be put per segment.
    pub frames: u64,
}

impl Timed {
    /// `count` per CPU second.
    pub fn per_cpu_second(&self) -> f64 {
        self.count as f64 / self.cpu.as_secs_f64().max(1e-9)
    }

    /// `count` per wall-clock second.
    pub fn per_wall_second(&self) -> f64 {
        self.count as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// This thread's CPU time.
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) writes one timespec into the valid, owned
    // `ts`; CLOCK_THREAD_CPUTIME_ID exists on every Linux we run on.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// Deterministic message bytes: every position of every message differs
/// from its neighbours' (`seed` tells the messages apart).
fn message(len: usize, seed: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            let mixed = i.wrapping_mul(31) ^ (i >> 8) ^ seed.wrapping_mul(0x9e37_79b9);
            mixed.to_le_bytes()[0]
        })
        .collect()
}

fn stacks() -> (Sim, Stack<SimPort>, Stack<SimPort>) {
    let mut sim = Sim::new(LinkConfig::default());
    let config = |last: u8, addr: Ipv4Addr| {
        let mut config = Config::new_static(
            EthernetAddress([2, 0, 0, 0, 0, last]),
            IpConfig {
                addr,
                prefix_len: 24,
                gateway: None,
            },
        );
        config.tcp = TcpConfig::default();
        config
    };
    let a = Stack::new(sim.wire().port(), config(0xa, IP_A), sim.now());
    let b = Stack::new(sim.wire().port(), config(0xb, IP_B), sim.now());
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b.clone()));
    (sim, a, b)
}

fn server_addr() -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(IP_B, PORT))
}

/// Runs `sim` in steps of simulated time until `done` says so, failing
/// after [`SIM_LIMIT`] or when `failed` has something to say.
fn drive(
    sim: &mut Sim,
    done: impl Fn() -> bool,
    failed: impl Fn() -> Option<String>,
) -> Result<(), String> {
    let start = sim.now();
    while !done() {
        if let Some(why) = failed() {
            return Err(why);
        }
        if sim.now().saturating_since(start) > SIM_LIMIT {
            return Err(format!(
                "the exchange did not finish within {} s of simulated time",
                SIM_LIMIT.as_secs()
            ));
        }
        sim.run_for(Duration::from_millis(1));
    }
    failed().map_or(Ok(()), Err)
}

/// What the bulk receiver saw (shared with the listener's accept function,
/// which must be `Send + Sync`).
#[derive(Default)]
struct BulkProgress {
    bytes: AtomicU64,
    corrupt: AtomicBool,
    aborted: AtomicBool,
}

/// Checks each byte received against the cycle of sent messages.
struct BulkReceiver {
    messages: Arc<Vec<IoBuf>>,
    progress: Arc<BulkProgress>,
    /// Position in the stream.
    offset: u64,
}

impl BulkReceiver {
    fn check(&mut self, mut data: &[u8]) -> bool {
        let len = self.messages[0].len() as u64;
        while !data.is_empty() {
            let index = usize::try_from(self.offset / len).unwrap_or(0) % DISTINCT;
            let within = usize::try_from(self.offset % len).unwrap_or(0);
            let expected = &self.messages[index].as_slice()[within..];
            let n = expected.len().min(data.len());
            if data[..n] != expected[..n] {
                return false;
            }
            data = &data[n..];
            self.offset += n as u64;
        }
        true
    }
}

impl TcpHandler for BulkReceiver {
    fn on_data(&mut self, _conn: &TcpConnection, data: IoChain) {
        for segment in data.segments() {
            if !self.check(segment.as_slice()) {
                self.progress.corrupt.store(true, Ordering::Relaxed);
            }
        }
        self.progress
            .bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, _error: NetError) {
        self.progress.aborted.store(true, Ordering::Relaxed);
    }
}

/// Sends `total` messages (views of the same few buffers: the sender does
/// not copy either) as fast as the send credit allows.
struct BulkSender {
    messages: Arc<Vec<IoBuf>>,
    next: u64,
    total: u64,
    failed: Rc<RefCell<Option<String>>>,
}

impl BulkSender {
    fn push(&mut self, conn: &TcpConnection) {
        // `send_or_buffer` sends what the credit allows and keeps the
        // rest; the credit is then 0 and `on_send_credit` follows when
        // the buffered bytes are out, so at most one message waits.
        while self.next < self.total && conn.send_credit() > 0 {
            let index = usize::try_from(self.next).unwrap_or(0) % DISTINCT;
            let chain = IoChain::from(self.messages[index].clone());
            if let Err(e) = conn.send_or_buffer(chain) {
                *self.failed.borrow_mut() = Some(format!("send failed: {e:?}"));
                return;
            }
            self.next += 1;
        }
    }
}

impl TcpHandler for BulkSender {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.push(conn);
    }

    fn on_data(&mut self, _conn: &TcpConnection, _data: IoChain) {}

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        self.push(conn);
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, error: NetError) {
        *self.failed.borrow_mut() = Some(format!("the sender's connection aborted: {error:?}"));
    }
}

/// Sends `messages` messages of `size` bytes from one stack to the other
/// over one connection; the count of the result is the bytes delivered
/// (all compared with what was sent).
pub fn bulk(size: usize, messages: u64) -> Result<Timed, String> {
    if size == 0 || messages == 0 {
        return Err("bulk: message size and count must be above 0".to_owned());
    }
    let bufs: Arc<Vec<IoBuf>> = Arc::new(
        (0..DISTINCT)
            .map(|seed| IoBuf::from_vec(message(size, seed)))
            .collect(),
    );
    let total_bytes = size as u64 * messages;
    let progress = Arc::new(BulkProgress::default());
    let failed = Rc::new(RefCell::new(None));
    let (mut sim, a, b) = stacks();
    let cpu_start = thread_cpu_time();
    let wall_start = Instant::now();
    {
        let (bufs, progress) = (bufs.clone(), progress.clone());
        b.listen(
            server_addr(),
            Arc::new(move |_conn: &TcpConnection| {
                Box::new(BulkReceiver {
                    messages: bufs.clone(),
                    progress: progress.clone(),
                    offset: 0,
                }) as Box<dyn TcpHandler>
            }),
        )
        .map_err(|e| format!("listen: {e:?}"))?;
    }
    a.connect(
        server_addr(),
        Box::new(BulkSender {
            messages: bufs,
            next: 0,
            total: messages,
            failed: failed.clone(),
        }),
    )
    .map_err(|e| format!("connect: {e:?}"))?;
    drive(
        &mut sim,
        || progress.bytes.load(Ordering::Relaxed) >= total_bytes,
        || {
            if progress.corrupt.load(Ordering::Relaxed) {
                Some("bulk: received bytes differ from those sent".to_owned())
            } else if progress.aborted.load(Ordering::Relaxed) {
                Some("bulk: the receiver's connection aborted".to_owned())
            } else {
                failed.borrow().clone()
            }
        },
    )?;
    let timed = Timed {
        count: progress.bytes.load(Ordering::Relaxed),
        cpu: thread_cpu_time().saturating_sub(cpu_start),
        wall: wall_start.elapsed(),
        frames: a.stats().rx_frames + b.stats().rx_frames,
    };
    if timed.count != total_bytes {
        return Err(format!(
            "bulk: {} bytes delivered, {total_bytes} sent",
            timed.count
        ));
    }
    Ok(timed)
}

/// Echoes what it receives, as the received views (no copy).
struct Echo;

impl TcpHandler for Echo {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        if conn.send_or_buffer(data).is_err() {
            conn.abort();
        }
    }
}

/// The request–response client's state, shared with the driver.
#[derive(Default)]
struct RrState {
    done: u64,
    failed: Option<String>,
}

struct RrClient {
    requests: Vec<IoBuf>,
    size: usize,
    total: u64,
    /// Reply bytes received so far for the request in flight.
    reply: Vec<u8>,
    state: Rc<RefCell<RrState>>,
}

impl RrClient {
    fn send_next(&mut self, conn: &TcpConnection) {
        let done = self.state.borrow().done;
        if done >= self.total {
            return;
        }
        let index = usize::try_from(done).unwrap_or(0) % self.requests.len();
        if let Err(e) = conn.send_or_buffer(IoChain::from(self.requests[index].clone())) {
            self.state.borrow_mut().failed = Some(format!("send failed: {e:?}"));
        }
    }
}

impl TcpHandler for RrClient {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.send_next(conn);
    }

    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        for segment in data.segments() {
            self.reply.extend_from_slice(segment.as_slice());
        }
        if self.reply.len() < self.size {
            return;
        }
        let mut state = self.state.borrow_mut();
        let index = usize::try_from(state.done).unwrap_or(0) % self.requests.len();
        if self.reply != self.requests[index].as_slice() {
            state.failed = Some(format!(
                "request–response: reply {} differs from its request",
                state.done
            ));
            return;
        }
        self.reply.clear();
        state.done += 1;
        drop(state);
        self.send_next(conn);
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, error: NetError) {
        self.state.borrow_mut().failed =
            Some(format!("the client's connection aborted: {error:?}"));
    }
}

/// `transactions` request–response exchanges of `size`-byte messages over
/// one connection, one in flight; the count of the result is the
/// transactions completed (every reply compared with its request).
pub fn request_response(size: usize, transactions: u64) -> Result<Timed, String> {
    if size == 0 || transactions == 0 {
        return Err("request–response: message size and count must be above 0".to_owned());
    }
    let requests: Vec<IoBuf> = (0..DISTINCT)
        .map(|seed| IoBuf::from_vec(message(size, seed)))
        .collect();
    let state = Rc::new(RefCell::new(RrState::default()));
    let (mut sim, a, b) = stacks();
    let cpu_start = thread_cpu_time();
    let wall_start = Instant::now();
    b.listen(
        server_addr(),
        Arc::new(|_conn: &TcpConnection| Box::new(Echo) as Box<dyn TcpHandler>),
    )
    .map_err(|e| format!("listen: {e:?}"))?;
    a.connect(
        server_addr(),
        Box::new(RrClient {
            requests,
            size,
            total: transactions,
            reply: Vec::with_capacity(size),
            state: state.clone(),
        }),
    )
    .map_err(|e| format!("connect: {e:?}"))?;
    drive(
        &mut sim,
        || state.borrow().done >= transactions,
        || state.borrow().failed.clone(),
    )?;
    let timed = Timed {
        count: state.borrow().done,
        cpu: thread_cpu_time().saturating_sub(cpu_start),
        wall: wall_start.elapsed(),
        frames: a.stats().rx_frames + b.stats().rx_frames,
    };
    Ok(timed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_delivers_every_byte() {
        let timed = bulk(65_536, 64).expect("bulk");
        assert_eq!(timed.count, 64 * 65_536);
        assert!(timed.cpu > Duration::ZERO && timed.wall > Duration::ZERO);
    }

    #[test]
    fn bulk_with_messages_that_do_not_fill_segments() {
        let timed = bulk(1_000, 300).expect("bulk");
        assert_eq!(timed.count, 300_000);
    }

    #[test]
    fn request_response_completes_every_transaction() {
        let timed = request_response(64, 500).expect("rr");
        assert_eq!(timed.count, 500);
    }

    #[test]
    fn the_receiver_notices_bytes_out_of_place() {
        let messages: Arc<Vec<IoBuf>> = Arc::new(
            (0..DISTINCT)
                .map(|seed| IoBuf::from_vec(message(100, seed)))
                .collect(),
        );
        let mut receiver = BulkReceiver {
            messages: messages.clone(),
            progress: Arc::default(),
            offset: 0,
        };
        assert!(receiver.check(messages[0].as_slice()));
        assert!(receiver.check(&messages[1].as_slice()[..30]));
        assert!(receiver.check(&messages[1].as_slice()[30..]));
        // Message 3 where message 2 belongs.
        assert!(!receiver.check(messages[3].as_slice()));
    }

    #[test]
    fn bad_sizes_are_refused() {
        let Err(error) = bulk(0, 1) else {
            panic!("size 0 accepted")
        };
        assert_eq!(error, "bulk: message size and count must be above 0");
        let Err(error) = request_response(64, 0) else {
            panic!("count 0 accepted")
        };
        assert_eq!(
            error,
            "request–response: message size and count must be above 0"
        );
    }
}
