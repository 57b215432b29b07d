//! TCP on the simulated link: handshakes, data both ways, orderly close
//! from either side, RST rules (RFC 9293 §3.10.7, RFC 5961), MSS, zero
//! copy.

// Test data takes the low bits of counters on purpose.
#![allow(clippy::cast_possible_truncation)]

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::*;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetError, NetStack};
use ebb_netstack::sim::{LinkConfig, Sim};
use ebb_netstack::tcp::segment::Flags;
use ebb_netstack::tcp::{State, TraceKind};
use ebb_netstack::Stack;

#[test]
fn handshake_active_and_passive() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, Recorder::new);
    let log = Log::default();
    let conn = a
        .connect(sock(IP_B, 80), Box::new(Recorder::new(log.clone())))
        .unwrap();
    assert_eq!(only_state(&a), Some(State::SynSent));
    run_ms(&mut sim, 10);
    assert!(log.borrow().connected, "on_connected after SYN,ACK");
    assert_eq!(accepted(80).len(), 1, "the listener accepted one");
    assert_eq!(only_state(&a), Some(State::Established));
    assert_eq!(only_state(&b), Some(State::Established));
    assert_eq!(conn.peer_addr(), sock(IP_B, 80));
    assert_eq!(conn.local_addr().ip(), std::net::IpAddr::V4(IP_A));
    let server = accepted(80)[0].borrow().conn.clone().unwrap();
    assert_eq!(server.peer_addr(), conn.local_addr());
    // Window scaling was negotiated (both offered it, RFC 7323 §2).
    let info = a.tcp(|t| t.info(t.ids()[0])).unwrap();
    assert!(info.snd_wscale > 0 && info.rcv_wscale > 0);
    assert_eq!(info.smss, 1460, "MSS from a 1500-byte MTU");
}

#[test]
fn data_both_ways_and_close() {
    let up = pattern(300_000, 1);
    let down = pattern(200_000, 2);
    let mut t = transfer(
        LinkConfig::default(),
        test_tcp(),
        test_tcp(),
        &up,
        &down,
        std::time::Duration::from_secs(2),
    );
    assert_intact(&t, &up, &down);
    // Both closed at about the same time: each ends in TIME-WAIT or CLOSED.
    for stack in [&t.a, &t.b] {
        assert!(matches!(only_state(stack), None | Some(State::TimeWait)));
    }
    let (a, b, sim) = (&t.a, &t.b, &mut t.sim);
    sim.run_for(std::time::Duration::from_secs(61));
    assert_eq!(a.tcp(|t| t.len()) + b.tcp(|t| t.len()), 0, "2·MSL later");
}

#[test]
fn orderly_close_from_the_client() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    // The server does not close when the client does: half-close.
    listen_recording(&b, 80, |log| Recorder {
        close_back: false,
        ..Recorder::new(log)
    });
    let log = Log::default();
    let conn = a
        .connect(sock(IP_B, 80), Box::new(Recorder::new(log.clone())))
        .unwrap();
    run_ms(&mut sim, 10);
    conn.send(IoChain::from(IoBuf::from_vec(b"bye".to_vec())))
        .unwrap();
    conn.close();
    assert_eq!(only_state(&a), Some(State::FinWait1));
    run_ms(&mut sim, 10);
    assert_eq!(only_state(&a), Some(State::FinWait2));
    assert_eq!(only_state(&b), Some(State::CloseWait));
    let server = accepted(80)[0].clone();
    assert!(server.borrow().peer_closed);
    assert_eq!(server.borrow().data, b"bye");
    // In CLOSE-WAIT the server may still send (half-close).
    let server_conn = server.borrow().conn.clone().unwrap();
    server_conn
        .send(IoChain::from(IoBuf::from_vec(b"still here".to_vec())))
        .unwrap();
    run_ms(&mut sim, 10);
    assert_eq!(log.borrow().data, b"still here");
    server_conn.close();
    assert_eq!(only_state(&b), Some(State::LastAck));
    run_ms(&mut sim, 10);
    assert_eq!(only_state(&b), None, "LAST-ACK → CLOSED");
    assert_eq!(only_state(&a), Some(State::TimeWait));
    assert!(log.borrow().peer_closed);
    assert!(
        log.borrow().dropped && server.borrow().dropped,
        "both handlers are released once both sides closed"
    );
    sim.run_for(std::time::Duration::from_secs(59));
    assert_eq!(only_state(&a), Some(State::TimeWait), "2·MSL is 60 s");
    sim.run_for(std::time::Duration::from_secs(2));
    assert_eq!(only_state(&a), None);
    assert!(a.tcp(|t| t.is_empty()) && b.tcp(|t| t.is_empty()));
}

#[test]
fn orderly_close_from_the_server() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, |log| Recorder {
        to_send: Some(IoChain::from(IoBuf::from_vec(b"hello".to_vec()))),
        close_after_send: true,
        ..Recorder::new(log)
    });
    let log = Log::default();
    a.connect(
        sock(IP_B, 80),
        Box::new(Recorder {
            close_back: false,
            ..Recorder::new(log.clone())
        }),
    )
    .unwrap();
    run_ms(&mut sim, 10);
    assert_eq!(log.borrow().data, b"hello");
    assert!(log.borrow().peer_closed);
    assert_eq!(only_state(&a), Some(State::CloseWait));
    assert_eq!(only_state(&b), Some(State::FinWait2));
    log.borrow().conn.clone().unwrap().close();
    run_ms(&mut sim, 10);
    assert_eq!(only_state(&a), None);
    assert_eq!(only_state(&b), Some(State::TimeWait));
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let link = LinkConfig {
        latency: std::time::Duration::from_millis(1),
        ..LinkConfig::default()
    };
    let (mut sim, a, b) = two_stacks(link, test_tcp(), test_tcp());
    listen_recording(&b, 80, |log| Recorder {
        close_back: false,
        ..Recorder::new(log)
    });
    let log = Log::default();
    let conn = a
        .connect(
            sock(IP_B, 80),
            Box::new(Recorder {
                close_back: false,
                ..Recorder::new(log.clone())
            }),
        )
        .unwrap();
    run_ms(&mut sim, 10);
    let server = accepted(80)[0].borrow().conn.clone().unwrap();
    // Both close before either FIN arrives.
    conn.close();
    server.close();
    assert_eq!(only_state(&a), Some(State::FinWait1));
    assert_eq!(only_state(&b), Some(State::FinWait1));
    // The FINs cross: each arrives before the other's ACK.
    sim.run_for(std::time::Duration::from_micros(1500));
    assert_eq!(only_state(&a), Some(State::Closing));
    assert_eq!(only_state(&b), Some(State::Closing));
    run_ms(&mut sim, 10);
    assert_eq!(only_state(&a), Some(State::TimeWait));
    assert_eq!(only_state(&b), Some(State::TimeWait));
    assert!(log.borrow().peer_closed);
}

#[test]
fn simultaneous_open() {
    // Both sides connect to each other's port at once (RFC 9293 §3.5,
    // Figure 7): there is no listener, the SYNs cross.
    let mut tcp = test_tcp();
    tcp.seed = 1;
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), tcp, test_tcp());
    // A's first ephemeral port is 49152, B's too: A connects from 49152 to
    // B:49152 and B from 49152 to A:49152.
    let la = Log::default();
    let lb = Log::default();
    let ca = a
        .connect(sock(IP_B, 49_152), Box::new(Recorder::new(la.clone())))
        .unwrap();
    let cb = b
        .connect(sock(IP_A, 49_152), Box::new(Recorder::new(lb.clone())))
        .unwrap();
    assert_eq!(ca.local_addr().port(), 49_152);
    assert_eq!(cb.local_addr().port(), 49_152);
    run_ms(&mut sim, 10);
    assert!(la.borrow().connected && lb.borrow().connected);
    assert_eq!(only_state(&a), Some(State::Established));
    assert_eq!(only_state(&b), Some(State::Established));
    ca.send(IoChain::from(IoBuf::from_vec(b"ping".to_vec())))
        .unwrap();
    run_ms(&mut sim, 100);
    assert_eq!(lb.borrow().data, b"ping");
}

#[test]
fn connecting_to_a_closed_port_is_refused_by_rst() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let log = Log::default();
    a.connect(sock(IP_B, 81), Box::new(Recorder::new(log.clone())))
        .unwrap();
    run_ms(&mut sim, 10);
    assert_eq!(log.borrow().aborted, Some(NetError::ConnectionRefused));
    assert_eq!(only_state(&a), None);
    assert_eq!(b.tcp(|t| t.stats().resets_sent), 1);
}

#[test]
fn rst_in_syn_sent_needs_an_acceptable_ack() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (iss, port) = connect_to_raw(&mut sim, &a, &raw, &log);
    // RST with an ACK that does not cover our SYN: ignored (§3.10.7.3).
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), 0, Some(iss.wrapping_add(7)), RST),
    );
    run_ms(&mut sim, 1);
    assert_eq!(only_state(&a), Some(State::SynSent));
    assert!(log.borrow().aborted.is_none());
    // An unacceptable ACK without RST is answered by RST <SEQ=SEG.ACK>.
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), 5, Some(iss.wrapping_add(9)), NONE),
    );
    run_ms(&mut sim, 1);
    let answer = raw.take();
    assert!(answer[0].flags.rst);
    assert_eq!(answer[0].seq.0, iss.wrapping_add(9));
    // RST without ACK in SYN-SENT: ignored.
    raw.send(MAC_A, &from_x(80, (IP_A, port), 0, None, RST));
    run_ms(&mut sim, 1);
    assert_eq!(only_state(&a), Some(State::SynSent));
    // RST,ACK acknowledging the SYN: refused.
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), 0, Some(iss.wrapping_add(1)), RST),
    );
    run_ms(&mut sim, 1);
    assert_eq!(log.borrow().aborted, Some(NetError::ConnectionRefused));
    assert_eq!(only_state(&a), None);
}

#[test]
fn rst_acceptance_in_synchronized_states() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (port, _a_nxt, x_nxt) = establish_with_raw(&mut sim, &a, &raw, &log);
    // Out of the window: ignored, no answer.
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), x_nxt.wrapping_add(1 << 30), None, RST),
    );
    run_ms(&mut sim, 1);
    assert_eq!(only_state(&a), Some(State::Established));
    assert!(raw.take().is_empty());
    // In the window but not RCV.NXT: a challenge ACK (RFC 5961 §3.2).
    raw.send(MAC_A, &from_x(80, (IP_A, port), x_nxt + 10, None, RST));
    run_ms(&mut sim, 1);
    assert_eq!(only_state(&a), Some(State::Established));
    let challenge = raw.take();
    assert_eq!(challenge.len(), 1);
    assert!(challenge[0].flags.ack && !challenge[0].flags.rst);
    assert_eq!(challenge[0].ack.0, x_nxt);
    // A second challenge within 500 ms is not answered (RFC 5961 §7).
    raw.send(MAC_A, &from_x(80, (IP_A, port), x_nxt + 11, None, RST));
    run_ms(&mut sim, 1);
    assert!(raw.take().is_empty());
    // A SYN in a synchronized state also gets a challenge ACK (RFC 5961 §4).
    run_ms(&mut sim, 500);
    raw.send(MAC_A, &from_x(80, (IP_A, port), x_nxt + 5, None, SYN));
    run_ms(&mut sim, 1);
    assert_eq!(only_state(&a), Some(State::Established));
    assert_eq!(raw.take().len(), 1);
    // Exactly RCV.NXT: reset.
    raw.send(MAC_A, &from_x(80, (IP_A, port), x_nxt, None, RST));
    run_ms(&mut sim, 1);
    assert_eq!(log.borrow().aborted, Some(NetError::ConnectionReset));
    assert_eq!(only_state(&a), None);
}

#[test]
fn out_of_window_data_is_acknowledged_not_accepted() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (port, a_nxt, x_nxt) = establish_with_raw(&mut sim, &a, &raw, &log);
    let mut old = from_x(80, (IP_A, port), x_nxt.wrapping_sub(100), Some(a_nxt), NONE);
    old.payload = IoChain::from(IoBuf::from_vec(vec![9; 50]));
    raw.send(MAC_A, &old);
    // Answers to unusable segments are at most one per 500 ms.
    run_ms(&mut sim, 600);
    let mut far = from_x(
        80,
        (IP_A, port),
        x_nxt.wrapping_add(1 << 28),
        Some(a_nxt),
        NONE,
    );
    far.payload = IoChain::from(IoBuf::from_vec(vec![9; 50]));
    raw.send(MAC_A, &far);
    run_ms(&mut sim, 1);
    let acks = raw.take();
    assert_eq!(acks.len(), 2, "each unacceptable segment gets an ACK");
    assert!(acks
        .iter()
        .all(|s| s.ack.0 == x_nxt && s.payload.is_empty()));
    assert!(log.borrow().data.is_empty());
    // An ACK for data never sent: ACK and drop.
    run_ms(&mut sim, 600);
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), x_nxt, Some(a_nxt + 1000), NONE),
    );
    run_ms(&mut sim, 1);
    assert_eq!(raw.take().len(), 1);
    assert_eq!(only_state(&a), Some(State::Established));
    // Data overlapping RCV.NXT is trimmed to what is new.
    let mut overlap = from_x(80, (IP_A, port), x_nxt.wrapping_sub(2), Some(a_nxt), NONE);
    overlap.payload = IoChain::from(IoBuf::from_vec(b"xxnew".to_vec()));
    raw.send(MAC_A, &overlap);
    run_ms(&mut sim, 1);
    assert_eq!(log.borrow().data, b"new");
}

#[test]
fn listener_answers_ack_with_rst_and_ignores_rst() {
    let (mut sim, _a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, Recorder::new);
    let raw = Raw::new(&mut sim);
    raw.send(MAC_B, &from_x(5000, (IP_B, 80), 1, None, RST));
    run_ms(&mut sim, 1);
    assert!(raw.take().is_empty(), "a RST to a listener is ignored");
    raw.send(MAC_B, &from_x(5000, (IP_B, 80), 1, Some(777), NONE));
    run_ms(&mut sim, 1);
    let rst = raw.take();
    assert!(rst[0].flags.rst && rst[0].seq.0 == 777);
    // To a closed port without ACK: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><RST,ACK>.
    let mut data = from_x(5000, (IP_B, 99), 40, None, FIN);
    data.payload = IoChain::from(IoBuf::from_vec(vec![0; 10]));
    raw.send(MAC_B, &data);
    run_ms(&mut sim, 1);
    let rst = raw.take();
    assert!(rst[0].flags.rst && rst[0].flags.ack);
    assert_eq!((rst[0].seq.0, rst[0].ack.0), (0, 51));
}

#[test]
fn mss_is_clamped_to_the_smaller_side() {
    let mut small = test_tcp();
    small.mss = Some(500);
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), small);
    let data = pattern(20_000, 3);
    listen_recording(&b, 80, Recorder::new);
    a.connect(
        sock(IP_B, 80),
        Box::new(Recorder {
            to_send: Some(chunks(&data, 20_000)),
            ..Recorder::new(Log::default())
        }),
    )
    .unwrap();
    run_ms(&mut sim, 500);
    assert!(accepted(80)[0].borrow().data == data);
    let (smss_a, smss_b) = (
        a.tcp(|t| t.info(t.ids()[0]).unwrap().smss),
        b.tcp(|t| t.info(t.ids()[0]).unwrap().smss),
    );
    assert_eq!((smss_a, smss_b), (500, 500));
    let largest = a.tcp(|t| {
        t.trace()
            .iter()
            .filter_map(|e| match e.kind {
                TraceKind::Sent { len, .. } => Some(len),
                _ => None,
            })
            .max()
    });
    assert_eq!(largest, Some(500));
}

#[test]
fn without_an_mss_option_the_peer_gets_536() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (iss, port) = connect_to_raw(&mut sim, &a, &raw, &log);
    raw.send(
        MAC_A,
        &from_x(
            80,
            (IP_A, port),
            1,
            Some(iss.wrapping_add(1)),
            Flags { syn: true, ..NONE },
        ),
    );
    run_ms(&mut sim, 1);
    let info = a.tcp(|t| t.info(t.ids()[0])).unwrap();
    assert_eq!(info.smss, 536, "RFC 9293 §3.7.1 default");
    assert_eq!(info.snd_wscale, 0, "no scaling: the peer did not offer it");
    assert_eq!(info.rcv_wscale, 0);
}

#[test]
fn received_data_are_views_of_receive_buffers_and_sends_are_not_copied() {
    let mut sim = Sim::new(LinkConfig::default());
    let rx = Rc::new(RefCell::new(Vec::new()));
    let tx = Rc::new(RefCell::new(Vec::new()));
    let a = Stack::new(
        Spy {
            inner: sim.wire().port(),
            rx: Rc::new(RefCell::new(Vec::new())),
            tx: tx.clone(),
        },
        config(MAC_A, IP_A, test_tcp()),
        sim.now(),
    );
    let b = Stack::new(
        Spy {
            inner: sim.wire().port(),
            rx: rx.clone(),
            tx: Rc::new(RefCell::new(Vec::new())),
        },
        config(MAC_B, IP_B, test_tcp()),
        sim.now(),
    );
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b.clone()));
    listen_recording(&b, 80, Recorder::new);
    let log = Log::default();
    let conn = a
        .connect(sock(IP_B, 80), Box::new(Recorder::new(log.clone())))
        .unwrap();
    run_ms(&mut sim, 10);
    let payload = IoBuf::from_vec(pattern(4000, 5));
    conn.send(IoChain::from(payload.clone())).unwrap();
    run_ms(&mut sim, 10);
    let server = accepted(80)[0].clone();
    assert!(server.borrow().data == payload.as_slice());
    // Every received view lies inside a frame buffer B's device received.
    let frames = rx.borrow();
    for &(ptr, len) in &server.borrow().views {
        assert!(
            frames
                .iter()
                .any(|&(f, flen)| ptr >= f && ptr + len <= f + flen),
            "a view into a receive buffer"
        );
    }
    // Every data segment A sent chained a view of the application's buffer.
    let base = payload.as_ptr() as usize;
    let data_frames: Vec<_> = tx
        .borrow()
        .iter()
        .filter(|f| f.len() > 1)
        .cloned()
        .collect();
    assert_eq!(data_frames.len(), 3, "4000 bytes in 1460-byte segments");
    let mut offset = 0;
    for frame in &data_frames {
        assert_eq!(frame[1].0, base + offset, "the payload is not copied");
        offset += frame[1].1;
    }
    assert_eq!(offset, 4000);
}

#[test]
fn sequence_numbers_wrap_around() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (iss, port) = connect_to_raw(&mut sim, &a, &raw, &log);
    // X's ISS sits just below 2^32: its data crosses the wrap.
    let x_iss = u32::MAX - 14;
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), x_iss, Some(iss.wrapping_add(1)), SYN),
    );
    run_ms(&mut sim, 1);
    assert_eq!(only_state(&a), Some(State::Established));
    raw.take();
    let a_nxt = iss.wrapping_add(1);
    let mut x_nxt = x_iss.wrapping_add(1);
    // Send the second segment first: it is held out of order across the
    // wrap, then the first fills the hole.
    let mut second = from_x(80, (IP_A, port), x_nxt.wrapping_add(10), Some(a_nxt), NONE);
    second.payload = IoChain::from(IoBuf::from_vec(b"0123456789".to_vec()));
    raw.send(MAC_A, &second);
    let mut first = from_x(80, (IP_A, port), x_nxt, Some(a_nxt), NONE);
    first.payload = IoChain::from(IoBuf::from_vec(b"abcdefghij".to_vec()));
    raw.send(MAC_A, &first);
    run_ms(&mut sim, 1);
    x_nxt = x_nxt.wrapping_add(20);
    assert!(x_nxt < 10, "the stream crossed 2^32");
    assert_eq!(log.borrow().data, b"abcdefghij0123456789");
    let acks = raw.take();
    assert_eq!(acks.last().unwrap().ack.0, x_nxt);
    // And A's data is acknowledged across the wrap as well.
    let conn = log.borrow().conn.clone().unwrap();
    conn.send(IoChain::from(IoBuf::from_vec(b"pong".to_vec())))
        .unwrap();
    run_ms(&mut sim, 1);
    let data = raw.take();
    assert_eq!(data[0].seq.0, a_nxt);
    assert_eq!(data[0].ack.0, x_nxt);
}

/// The time `stamped_clock` reads (a `fn` cannot capture).
static CLOCK_NOW: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn stamped_clock() -> ebb_event::Instant {
    ebb_event::Instant(CLOCK_NOW.load(std::sync::atomic::Ordering::Relaxed))
}

#[test]
fn a_send_between_polls_is_stamped_with_the_clock_not_the_last_poll() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, Recorder::new);
    let conn = a
        .connect(sock(IP_B, 80), Box::new(Recorder::new(Log::default())))
        .unwrap();
    run_ms(&mut sim, 10);
    assert_eq!(only_state(&a), Some(State::Established));
    // As on a node that halted for 5 s and woke on an application timer:
    // the stack was last polled at the simulation's time, the clock says
    // 5 s later.
    let woke = sim.now().0 + 5_000_000_000;
    CLOCK_NOW.store(woke, std::sync::atomic::Ordering::Relaxed);
    a.set_clock(stamped_clock);
    conn.send(IoChain::from(IoBuf::copy_from_slice(b"ping")))
        .unwrap();
    let sent_at = a.tcp(|t| {
        t.trace()
            .iter()
            .rev()
            .find(|e| matches!(e.kind, TraceKind::Sent { len: 4, .. }))
            .map(|e| e.at)
    });
    assert_eq!(sent_at, Some(ebb_event::Instant(woke)));
    // Its retransmission deadline (RFC 6298 §5.1) runs from then: the
    // next poll, 1 ms later, does not find it due (stamped with the last
    // poll's time, it was 5 s overdue and went out again).
    a.poll(ebb_event::Instant(woke + 1_000_000));
    let info = a.tcp(|t| t.info(t.ids()[0])).unwrap();
    assert_eq!(info.retransmissions, 0);
}
