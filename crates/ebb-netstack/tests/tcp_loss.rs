//! TCP over a faulty simulated link: loss, reordering, duplication and
//! delay; the byte streams arrive intact (RFC 6298 retransmission, RFC
//! 5681/6582 recovery); retransmissions resend the application's buffers.

// Test data takes the low bits of counters on purpose.
#![allow(clippy::cast_possible_truncation)]

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_netstack::device::FaultConfig;
use ebb_netstack::sim::{LinkConfig, Sim};
use ebb_netstack::tcp::{State, TraceKind};
use ebb_netstack::Stack;

fn lossy(seed: u64, loss_pct: u8) -> LinkConfig {
    LinkConfig {
        faults: FaultConfig {
            seed,
            loss_pct,
            ..FaultConfig::default()
        },
        latency: Duration::from_millis(5),
        bandwidth_bps: 100_000_000,
    }
}

fn retransmissions(t: &Transfer) -> u64 {
    [&t.a, &t.b]
        .iter()
        .map(|s| {
            s.tcp(|tcp| {
                tcp.trace()
                    .iter()
                    .filter(|e| {
                        matches!(
                            e.kind,
                            TraceKind::Sent {
                                retransmission: true,
                                ..
                            }
                        )
                    })
                    .count() as u64
            })
        })
        .sum()
}

#[test]
fn one_percent_loss_delivers_both_streams() {
    let up = pattern(2_000_000, 11);
    let down = pattern(1_000_000, 12);
    let t = transfer(
        lossy(1, 1),
        test_tcp(),
        test_tcp(),
        &up,
        &down,
        Duration::from_secs(120),
    );
    assert_intact(&t, &up, &down);
    assert!(retransmissions(&t) > 0, "losses were repaired");
    let fast = t.a.tcp(|tcp| {
        tcp.trace()
            .iter()
            .filter(|e| matches!(e.kind, TraceKind::FastRetransmit { .. }))
            .count()
    });
    assert!(
        fast > 0,
        "most single losses are repaired by fast retransmit"
    );
}

#[test]
fn ten_percent_loss_delivers_both_streams() {
    for seed in 1..=3 {
        let up = pattern(300_000, 21);
        let down = pattern(200_000, 22);
        let t = transfer(
            lossy(seed, 10),
            test_tcp(),
            test_tcp(),
            &up,
            &down,
            Duration::from_secs(600),
        );
        assert_intact(&t, &up, &down);
        assert!(retransmissions(&t) > 10);
    }
}

#[test]
fn reordering_duplication_and_delay_deliver_in_order() {
    for seed in 1..=3 {
        let link = LinkConfig {
            faults: FaultConfig {
                seed,
                duplicate_pct: 10,
                reorder_pct: 10,
                reorder_delay: Duration::from_millis(3),
                max_delay: Duration::from_millis(2),
                ..FaultConfig::default()
            },
            latency: Duration::from_millis(5),
            bandwidth_bps: 100_000_000,
        };
        let up = pattern(500_000, 31);
        let down = pattern(400_000, 32);
        let t = transfer(
            link,
            test_tcp(),
            test_tcp(),
            &up,
            &down,
            Duration::from_secs(120),
        );
        assert_intact(&t, &up, &down);
    }
}

#[test]
fn corrupted_frames_are_dropped_and_repaired() {
    let link = LinkConfig {
        faults: FaultConfig {
            seed: 5,
            corrupt_pct: 5,
            ..FaultConfig::default()
        },
        latency: Duration::from_millis(1),
        bandwidth_bps: 0,
    };
    let up = pattern(200_000, 41);
    let down = pattern(100_000, 42);
    let t = transfer(
        link,
        test_tcp(),
        test_tcp(),
        &up,
        &down,
        Duration::from_secs(120),
    );
    assert_intact(&t, &up, &down);
}

#[test]
fn retransmissions_resend_the_same_buffers() {
    let mut sim = Sim::new(LinkConfig::default());
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
    sim.add(Box::new(a.clone()));
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (_port, _a_nxt, _x_nxt) = establish_with_raw(&mut sim, &a, &raw, &log);
    let payload = IoBuf::from_vec(pattern(800, 9));
    let conn = log.borrow().conn.clone().unwrap();
    tx.borrow_mut().clear();
    conn.send(IoChain::from(payload.clone())).unwrap();
    // X never acknowledges: A retransmits after each RTO.
    run_ms(&mut sim, 5000);
    let frames = tx.borrow();
    let data_frames: Vec<_> = frames.iter().filter(|f| f.len() > 1).collect();
    assert!(
        data_frames.len() >= 3,
        "first transmission and retransmissions"
    );
    for frame in data_frames {
        assert_eq!(
            frame[1],
            (payload.as_ptr() as usize, 800),
            "the same buffer"
        );
    }
    assert_eq!(only_state(&a), Some(State::Established));
}

#[test]
fn a_timed_out_fin_is_resent_with_the_data_before_it() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (port, a_nxt, x_nxt) = establish_with_raw(&mut sim, &a, &raw, &log);
    let conn = log.borrow().conn.clone().unwrap();
    conn.send(IoChain::from(IoBuf::from_vec(pattern(300, 4))))
        .unwrap();
    conn.close();
    run_ms(&mut sim, 1);
    let first = raw.take();
    let sent: usize = first.iter().map(|s| s.payload.len()).sum();
    assert_eq!(sent, 300);
    assert!(first.last().unwrap().flags.fin);
    // X's ACK is lost: the timeout resends both as one segment, so that X
    // answers once (two answers to a peer in LAST-ACK would make the
    // second find the connection gone and draw an RST).
    run_ms(&mut sim, 3000);
    let again = raw.take();
    assert!(!again.is_empty(), "a retransmission");
    for segment in &again {
        assert_eq!(segment.seq.0, a_nxt);
        assert!(segment.flags.fin, "the FIN goes with the data");
        assert_eq!(segment.payload.len(), 300);
    }
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), x_nxt, Some(a_nxt + 301), NONE),
    );
    run_ms(&mut sim, 1);
    assert_eq!(only_state(&a), Some(State::FinWait2));
    assert!(raw.take().iter().all(|s| !s.flags.rst));
}
