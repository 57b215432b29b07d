//! Round trips timed from inside a node, for `./ebb bench messenger`: the
//! same code times Messenger calls to a node's echo Ebb ([`crate::node`])
//! and a plain TCP ping-pong with the same node's TCP echo, on the hosted
//! frontend and on a native node (echo's `--ping-node`, [`run`]).
//!
//! The baselines are fair by construction: the same payload (one buffer
//! of `size` bytes), one connection, one outstanding call or ping, the
//! same event loop and network stack, the same clock
//! ([`ebb_event::now`]). Warm-up round trips (the first opens the
//! connection) are not recorded. Statistics are left to the benchmark:
//! a node prints its raw samples ([`print_samples`]).

use alloc::boxed::Box;
use alloc::format;
use alloc::rc::Rc;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::net::SocketAddr;

use ebb_app::net::api::{IoBuf, IoChain, NetError, TcpConnection, TcpHandler};
use ebb_core::{EbbId, NodeId};
use ebb_event::{now, oneshot, spawn_task, Instant, Sender};
use ebb_messenger::MessengerRep;

use crate::node::ECHO;

/// Round trips made before the recorded ones.
pub const WARMUP: usize = 20;
/// The size of a latency round trip's payload (issue 16's 64 bytes).
pub const SMALL: usize = 64;
/// The size of a goodput round trip's payload.
pub const LARGE: usize = 1 << 20;
/// Goodput round trips (after one warm-up).
pub const LARGE_COUNT: usize = 8;
/// Calls in flight in the pipelined measurement.
pub const DEPTH: usize = 16;

/// What to measure against one node: its echo Ebb for the Messenger, its
/// TCP echo for the plain ping-pong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The node.
    pub node: NodeId,
    /// Its Messenger echo Ebb.
    pub ebb: EbbId,
    /// Its TCP echo server.
    pub tcp: SocketAddr,
}

/// One kind of round trip: its name in the printed lines, the payload
/// size and the recorded samples in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Samples {
    /// `messenger` or `tcp`.
    pub kind: &'static str,
    /// Payload bytes each way.
    pub size: usize,
    /// Round-trip times, ns, in the order made.
    pub ns: Vec<u64>,
}

fn elapsed_ns(since: Instant) -> u64 {
    u64::try_from(now().saturating_since(since).as_nanos()).unwrap_or(u64::MAX)
}

fn payload(size: usize) -> IoBuf {
    IoBuf::from_vec(vec![0xa5; size])
}

/// `count` Messenger calls of `size` bytes to `target`'s echo Ebb, one at
/// a time, after `warmup` unrecorded ones.
///
/// # Errors
///
/// A call failed, or a reply was not the request's size.
pub async fn messenger_round_trips(
    rep: &'static MessengerRep,
    target: Target,
    size: usize,
    warmup: usize,
    count: usize,
) -> Result<Samples, String> {
    let data = payload(size);
    let mut ns = Vec::with_capacity(count);
    for trip in 0..warmup + count {
        let body = IoChain::from(data.clone());
        let started = now();
        let reply = rep
            .call(target.node, target.ebb, ECHO, body)
            .await
            .map_err(|error| format!("Messenger call to node {}: {error}", target.node))?;
        let took = elapsed_ns(started);
        if reply.payload.len() != size {
            return Err(format!(
                "node {} echoed {} bytes of {size}",
                target.node,
                reply.payload.len()
            ));
        }
        if trip >= warmup {
            ns.push(took);
        }
    }
    Ok(Samples {
        kind: "messenger",
        size,
        ns,
    })
}

/// `calls` Messenger calls of `size` bytes to `target`'s echo Ebb with
/// [`DEPTH`] in flight (as many tasks, each calling in turn); returns the
/// nanoseconds they all took.
///
/// # Errors
///
/// A call failed.
pub async fn messenger_pipelined(
    rep: &'static MessengerRep,
    target: Target,
    size: usize,
    calls: usize,
) -> Result<u64, String> {
    let data = payload(size);
    let started = now();
    let mut tasks = Vec::with_capacity(DEPTH);
    for lane in 0..DEPTH {
        let data = data.clone();
        let share = calls / DEPTH + usize::from(lane < calls % DEPTH);
        tasks.push(spawn_task(async move {
            for _ in 0..share {
                rep.call(target.node, target.ebb, ECHO, IoChain::from(data.clone()))
                    .await?;
            }
            Ok::<(), ebb_messenger::MessengerError>(())
        }));
    }
    for task in tasks {
        task.await
            .map_err(|_| String::from("a pipelined call's task ended early"))?
            .map_err(|error| {
                format!("pipelined Messenger call to node {}: {error}", target.node)
            })?;
    }
    Ok(elapsed_ns(started))
}

/// `count` ping-pongs of `size` bytes with the TCP echo at `target.tcp`
/// on one connection, after `warmup` unrecorded ones.
///
/// # Errors
///
/// The connection failed or ended early.
pub async fn tcp_round_trips(
    target: Target,
    size: usize,
    warmup: usize,
    count: usize,
) -> Result<Samples, String> {
    let (done, finished) = oneshot();
    let client = PingClient {
        state: Rc::new(RefCell::new(Pinging {
            data: payload(size),
            received: 0,
            left: warmup + count,
            warmup,
            started: Instant(0),
            ns: Vec::with_capacity(count),
            done: Some(done),
        })),
    };
    ebb_app::net::api::connect(target.tcp, Box::new(client))
        .map_err(|error| format!("TCP connect to {}: {error}", target.tcp))?;
    let ns = finished
        .await
        .map_err(|_| format!("the TCP ping-pong with {} ended", target.tcp))??;
    Ok(Samples {
        kind: "tcp",
        size,
        ns,
    })
}

/// The TCP ping-pong's state, shared by its handler's callbacks.
struct Pinging {
    data: IoBuf,
    /// Bytes of the current echo received so far.
    received: usize,
    /// Round trips still to make, the current one included.
    left: usize,
    /// Round trips still unrecorded.
    warmup: usize,
    started: Instant,
    ns: Vec<u64>,
    done: Option<Sender<Result<Vec<u64>, String>>>,
}

impl Pinging {
    fn ping(&mut self, conn: &TcpConnection) {
        self.received = 0;
        self.started = now();
        if conn
            .send_or_buffer(IoChain::from(self.data.clone()))
            .is_err()
        {
            self.finish(Err(String::from("the ping could not be sent")));
            conn.abort();
        }
    }

    fn finish(&mut self, outcome: Result<Vec<u64>, String>) {
        if let Some(done) = self.done.take() {
            done.send(outcome);
        }
    }
}

struct PingClient {
    state: Rc<RefCell<Pinging>>,
}

impl TcpHandler for PingClient {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.state.borrow_mut().ping(conn);
    }

    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        let mut state = self.state.borrow_mut();
        state.received += data.len();
        if state.received < state.data.len() {
            return;
        }
        let took = elapsed_ns(state.started);
        if state.received > state.data.len() {
            state.finish(Err(String::from("the echo sent more than the ping")));
            conn.abort();
            return;
        }
        if state.warmup > 0 {
            state.warmup -= 1;
        } else {
            state.ns.push(took);
        }
        state.left -= 1;
        if state.left == 0 {
            let ns = core::mem::take(&mut state.ns);
            state.finish(Ok(ns));
            conn.close();
        } else {
            state.ping(conn);
        }
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        self.state
            .borrow_mut()
            .finish(Err(String::from("the echo closed the connection")));
        conn.close();
    }

    fn on_aborted(&mut self, _conn: &TcpConnection, error: NetError) {
        self.state
            .borrow_mut()
            .finish(Err(format!("the connection failed: {error}")));
    }
}

/// Everything the benchmark measures from one node against `target`, in
/// a fixed order: 64-byte round trips of both kinds alternating in two
/// halves (so that neither always goes first), pipelined 64-byte calls
/// (`count` × 4), then [`LARGE`]-byte round trips of both kinds.
///
/// # Errors
///
/// The first measurement that failed.
pub async fn measure(
    rep: &'static MessengerRep,
    target: Target,
    count: usize,
) -> Result<(Vec<Samples>, u64), String> {
    let half = count / 2;
    let mut samples = Vec::new();
    samples.push(messenger_round_trips(rep, target, SMALL, WARMUP, half).await?);
    samples.push(tcp_round_trips(target, SMALL, WARMUP, half).await?);
    let mut tcp = tcp_round_trips(target, SMALL, WARMUP, count - half).await?;
    let mut messenger = messenger_round_trips(rep, target, SMALL, WARMUP, count - half).await?;
    samples[0].ns.append(&mut messenger.ns);
    samples[1].ns.append(&mut tcp.ns);
    let pipelined_ns = messenger_pipelined(rep, target, SMALL, count * 4).await?;
    samples.push(messenger_round_trips(rep, target, LARGE, 1, LARGE_COUNT).await?);
    samples.push(tcp_round_trips(target, LARGE, 1, LARGE_COUNT).await?);
    Ok((samples, pipelined_ns))
}

/// The line prefix of printed samples: `ping KIND SIZE ns: N N N...`.
pub const SAMPLES_LINE: &str = "ping";
/// The last line a pinging node prints.
pub const DONE_LINE: &str = "ping done";

/// Prints `samples` on the console, a line per 64 samples (a node's
/// results reach the benchmark through its console log).
pub fn print_samples(samples: &Samples) {
    for chunk in samples.ns.chunks(64) {
        let mut line = format!("{SAMPLES_LINE} {} {} ns:", samples.kind, samples.size);
        for ns in chunk {
            line.push(' ');
            line.push_str(&format!("{ns}"));
        }
        ebb_app::info!("{line}");
    }
}

/// The native side of the benchmark (echo's `--ping-node`): measures
/// against `target` and prints the samples, the pipelined calls' time
/// (`ping pipelined CALLS ns: N`) and [`DONE_LINE`].
///
/// # Errors
///
/// A measurement failed.
pub async fn run(rep: &'static MessengerRep, target: Target, count: usize) -> Result<(), String> {
    let (samples, pipelined_ns) = measure(rep, target, count).await?;
    for samples in &samples {
        print_samples(samples);
    }
    ebb_app::info!("{SAMPLES_LINE} pipelined {} ns: {pipelined_ns}", count * 4);
    ebb_app::info!("{DONE_LINE}");
    Ok(())
}
