//! The `ebb-net` interface contract on Ebbflow's TCP, exercised the way
//! `apps/memcached` uses it: `send_or_buffer` replies, pause receiving when
//! the send credit is used up, resume on `on_send_credit`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use ebb_iobuf::IoChain;
use ebb_net::{NetStack, TcpConnection, TcpHandler};
use ebb_netstack::device::FaultConfig;
use ebb_netstack::sim::LinkConfig;

/// Pauses taken by the servers (shared by the Send + Sync accept function).
static PAUSES: AtomicUsize = AtomicUsize::new(0);

/// An echo server written like memcached's `Connection::process`.
struct CreditAwareEcho {
    paused: bool,
}

impl TcpHandler for CreditAwareEcho {
    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        // Echo the received views themselves: no copy on either side.
        if conn.send_or_buffer(data).is_err() {
            conn.abort();
            return;
        }
        if conn.send_credit() == 0 && !self.paused {
            self.paused = true;
            PAUSES.fetch_add(1, Ordering::Relaxed);
            conn.pause_receive();
        }
    }

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        if self.paused {
            self.paused = false;
            conn.resume_receive();
        }
    }
}

#[test]
fn a_server_that_pauses_on_zero_credit_echoes_everything() {
    for loss_pct in [0, 2] {
        let link = LinkConfig {
            faults: FaultConfig {
                seed: 3,
                loss_pct,
                ..FaultConfig::default()
            },
            latency: Duration::from_millis(2),
            bandwidth_bps: 1_000_000_000,
        };
        // The client's small receive buffer limits the echo's send window,
        // so the server runs out of credit while requests keep coming.
        let mut client_tcp = test_tcp();
        client_tcp.recv_buffer = 64 << 10;
        let (mut sim, a, b) = two_stacks(link, client_tcp, test_tcp());
        let pauses_before = PAUSES.load(Ordering::Relaxed);
        b.listen(
            sock(IP_B, 7),
            std::sync::Arc::new(|_conn: &TcpConnection| {
                Box::new(CreditAwareEcho { paused: false }) as Box<dyn TcpHandler>
            }),
        )
        .unwrap();
        let data = pattern(4 << 20, 5);
        let log = Log::default();
        a.connect(
            sock(IP_B, 7),
            Box::new(Recorder {
                to_send: Some(chunks(&data, 1000)),
                ..Recorder::new(log.clone())
            }),
        )
        .unwrap();
        sim.run_for(Duration::from_secs(60));
        assert_eq!(log.borrow().data.len(), data.len(), "loss {loss_pct} %");
        assert!(log.borrow().data == data);
        assert!(
            PAUSES.load(Ordering::Relaxed) > pauses_before,
            "the credit ran out and receiving paused"
        );
    }
}

thread_local! {
    /// The connection the holding server accepted, to resume it later (the
    /// simulation runs on this thread).
    static HELD_CONNECTION: std::cell::RefCell<Option<TcpConnection>> =
        const { std::cell::RefCell::new(None) };
    /// The segment count of each chain the holding server received.
    static DELIVERED_SEGMENTS: std::cell::RefCell<Vec<(usize, usize)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Records what it gets (its accept function paused it).
struct PausedAtOnce;

impl TcpHandler for PausedAtOnce {
    fn on_data(&mut self, _conn: &TcpConnection, data: IoChain) {
        DELIVERED_SEGMENTS.with(|d| d.borrow_mut().push((data.len(), data.segment_count())));
    }
}

/// Issue 15, defect 8: a paused connection used to keep every received
/// frame's buffer until it resumed (up to its window: hundreds of frames),
/// which natively emptied virtio-net's receive ring. What it holds is now
/// gathered into memory of its own every 16 segments, so the chain it
/// delivers on resuming has at most 17 segments however much it held.
#[test]
fn a_paused_connection_holds_its_data_in_few_buffers() {
    let link = LinkConfig {
        faults: FaultConfig::default(),
        latency: Duration::from_millis(1),
        bandwidth_bps: 1_000_000_000,
    };
    let (mut sim, a, b) = two_stacks(link, test_tcp(), test_tcp());
    b.listen(
        sock(IP_B, 9),
        std::sync::Arc::new(|conn: &TcpConnection| {
            conn.pause_receive();
            HELD_CONNECTION.with(|held| *held.borrow_mut() = Some(conn.clone()));
            Box::new(PausedAtOnce) as Box<dyn TcpHandler>
        }),
    )
    .unwrap();
    let data = pattern(512 << 10, 7);
    a.connect(
        sock(IP_B, 9),
        Box::new(Recorder {
            to_send: Some(chunks(&data, 1000)),
            ..Recorder::new(Log::default())
        }),
    )
    .unwrap();
    sim.run_for(Duration::from_secs(2));
    assert!(
        DELIVERED_SEGMENTS.with(|d| d.borrow().is_empty()),
        "nothing is delivered while paused: {:?}",
        DELIVERED_SEGMENTS.with(|d| d.borrow().clone())
    );
    let conn = HELD_CONNECTION
        .with(|held| held.borrow_mut().take())
        .expect("accepted");
    conn.resume_receive();
    sim.run_for(Duration::from_secs(2));
    let delivered = DELIVERED_SEGMENTS.with(|d| d.borrow().clone());
    let (held_bytes, held_segments) = delivered[0];
    assert_eq!(
        held_bytes,
        data.len(),
        "all of it was held (it fits the window)"
    );
    assert!(held_segments <= 17, "held in {held_segments} segments");
    assert_eq!(
        delivered.iter().map(|(len, _)| len).sum::<usize>(),
        data.len()
    );
}

thread_local! {
    /// The connection the late answerer paused, to answer and resume later.
    static LATE_CONNECTION: std::cell::RefCell<Option<TcpConnection>> =
        const { std::cell::RefCell::new(None) };
}

/// Pauses on a request and answers later, as a memcached node does with a
/// get it forwards to the key's owner.
struct AnswersLater;

impl TcpHandler for AnswersLater {
    fn on_data(&mut self, conn: &TcpConnection, _data: IoChain) {
        conn.pause_receive();
        LATE_CONNECTION.with(|late| *late.borrow_mut() = Some(conn.clone()));
    }
}

/// A pause that held nothing leaves the window the peer knows as it was:
/// resuming sends no window update, so the answer (which carries the ACK)
/// is the only segment (RFC 9293 §3.8.6.2.2). It used to be followed by a
/// bare ACK, one more frame per forwarded get.
#[test]
fn resuming_after_a_pause_that_held_nothing_sends_no_bare_ack() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    b.listen(
        sock(IP_B, 11),
        std::sync::Arc::new(|_conn: &TcpConnection| Box::new(AnswersLater) as Box<dyn TcpHandler>),
    )
    .unwrap();
    let log = Log::default();
    a.connect(
        sock(IP_B, 11),
        Box::new(Recorder {
            to_send: Some(chunks(b"get k\r\n", 100)),
            ..Recorder::new(log.clone())
        }),
    )
    .unwrap();
    sim.run_for(Duration::from_millis(10));
    let conn = LATE_CONNECTION
        .with(|late| late.borrow_mut().take())
        .expect("the request arrived");
    let sent_before = b.tcp(|t| t.trace().len());
    conn.send(IoChain::from(ebb_iobuf::IoBuf::copy_from_slice(b"END\r\n")))
        .unwrap();
    conn.resume_receive();
    let sent: Vec<_> = b.tcp(|t| {
        t.trace()[sent_before..]
            .iter()
            .filter_map(|e| match e.kind {
                ebb_netstack::tcp::TraceKind::Sent { len, .. } => Some(len),
                _ => None,
            })
            .collect()
    });
    assert_eq!(sent, vec![5], "the answer alone, no bare ACK after it");
    sim.run_for(Duration::from_millis(10));
    assert_eq!(log.borrow().data, b"END\r\n");
}

/// Closing a listener frees its port (a server that re-binds, as Redis's
/// `CONFIG SET bind` does, listens on the same port again); established
/// connections are not the listener's and stay.
#[test]
fn a_port_unlistened_is_free_to_listen_on_again() {
    let (_sim, _a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let accept =
        || std::sync::Arc::new(|_: &TcpConnection| Box::new(PausedAtOnce) as Box<dyn TcpHandler>);
    b.listen(sock(IP_B, 6379), accept()).unwrap();
    assert!(matches!(
        b.listen(sock(IP_B, 6379), accept()),
        Err(ebb_net::NetError::AddrInUse)
    ));
    b.unlisten(sock(IP_B, 6379)).unwrap();
    b.listen(sock(IP_B, 6379), accept()).unwrap();
}
