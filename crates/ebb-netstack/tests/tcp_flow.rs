//! Flow and congestion control on the simulated clock, asserted from the
//! stack's trace: slow start (RFC 5681 §3.1 with RFC 3465 byte counting),
//! fast retransmit (RFC 5681 §3.2), RTO back-off and Karn's rule (RFC
//! 6298), delayed ACKs (RFC 1122 §4.2.3.2), zero-window probes (RFC 9293
//! §3.8.6.1), window scaling (RFC 7323) with a 64 MiB transfer.

// Test data takes the low bits of counters on purpose.
#![allow(clippy::cast_possible_truncation)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::NetStack;
use ebb_netstack::sim::{LinkConfig, SimPort};
use ebb_netstack::tcp::{State, TraceEvent, TraceKind};
use ebb_netstack::{Instant, Stack};

fn trace(stack: &Stack<SimPort>) -> Vec<TraceEvent> {
    stack.tcp(|t| t.trace().to_vec())
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn slow_start_doubles_cwnd_every_rtt() {
    let link = LinkConfig {
        latency: ms(10),
        ..LinkConfig::default()
    };
    let mut every_segment = test_tcp();
    every_segment.delayed_ack = Duration::ZERO;
    let (mut sim, a, b) = two_stacks(link, test_tcp(), every_segment);
    listen_recording(&b, 80, Recorder::new);
    a.connect(
        sock(IP_B, 80),
        Box::new(Recorder {
            to_send: Some(chunks(&pattern(4_000_000, 1), 65_536)),
            ..Recorder::new(Log::default())
        }),
    )
    .unwrap();
    sim.run_for(ms(200));
    // The last cwnd at each instant ACKs arrived: one instant per round
    // trip, since the whole flight leaves at once on an unlimited link.
    let mut per_instant: BTreeMap<Instant, usize> = BTreeMap::new();
    for e in trace(&a) {
        if let TraceKind::Cwnd { cwnd, ssthresh } = e.kind {
            assert_eq!(ssthresh, usize::MAX, "no loss: still in slow start");
            per_instant.insert(e.at, cwnd);
        }
    }
    let rounds: Vec<usize> = per_instant.values().copied().collect();
    assert!(rounds.len() >= 6, "{rounds:?}");
    assert_eq!(rounds[0], 2 * 4380, "IW = 3 segments of 1460, doubled");
    for pair in rounds.windows(2).take(5) {
        assert_eq!(pair[1], 2 * pair[0], "cwnd doubles per RTT: {rounds:?}");
    }
    // The rounds are one RTT (20 ms) apart.
    let instants: Vec<Instant> = per_instant.keys().copied().collect();
    for pair in instants.windows(2).take(5) {
        assert_eq!(pair[1] - pair[0], ms(20));
    }
}

#[test]
fn slow_start_doubles_cwnd_every_rtt_with_delayed_acks_too() {
    // The receiver ACKs every second segment (and an odd last one 40 ms
    // later); byte counting with L = 2·SMSS (RFC 3465) still doubles cwnd
    // per round trip. RTT 100 ms, so each round's ACKs fall in its bucket.
    let link = LinkConfig {
        latency: ms(50),
        ..LinkConfig::default()
    };
    let (mut sim, a, b) = two_stacks(link, test_tcp(), test_tcp());
    listen_recording(&b, 80, Recorder::new);
    a.connect(
        sock(IP_B, 80),
        Box::new(Recorder {
            to_send: Some(chunks(&pattern(4_000_000, 1), 65_536)),
            ..Recorder::new(Log::default())
        }),
    )
    .unwrap();
    sim.run_for(ms(800));
    let cwnds: Vec<(Instant, usize)> = trace(&a)
        .into_iter()
        .filter_map(|e| match e.kind {
            TraceKind::Cwnd { cwnd, .. } => Some((e.at, cwnd)),
            _ => None,
        })
        .collect();
    let first = cwnds[0].0;
    let mut per_round: BTreeMap<u64, usize> = BTreeMap::new();
    for (at, cwnd) in cwnds {
        per_round.insert((at - first).as_millis() as u64 / 100, cwnd);
    }
    let rounds: Vec<usize> = per_round.values().copied().collect();
    assert!(rounds.len() >= 5, "{rounds:?}");
    for pair in rounds.windows(2).take(4) {
        assert_eq!(pair[1], 2 * pair[0], "cwnd doubles per RTT: {rounds:?}");
    }
}

#[test]
fn three_duplicate_acks_trigger_fast_retransmit_and_halve_ssthresh() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (port, a_nxt, x_nxt) = establish_with_raw(&mut sim, &a, &raw, &log);
    let conn = log.borrow().conn.clone().unwrap();
    conn.send_or_buffer(chunks(&pattern(50_000, 7), 50_000))
        .unwrap();
    run_ms(&mut sim, 1);
    let first = raw.take();
    assert_eq!(first.len(), 4, "IW for SMSS 1000: 4 segments");
    // ACK the first segment: slow start opens cwnd by one more SMSS.
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), x_nxt, Some(a_nxt + 1000), NONE),
    );
    run_ms(&mut sim, 1);
    let sent = raw.take();
    assert_eq!(sent.len(), 2);
    let flight = a.tcp(|t| {
        let i = t.info(t.ids()[0]).unwrap();
        i.snd_nxt.since(i.snd_una)
    });
    assert_eq!(flight, 5000);
    // The second segment was "lost": three duplicate ACKs for it.
    for n in 1..=3 {
        raw.send(
            MAC_A,
            &from_x(80, (IP_A, port), x_nxt, Some(a_nxt + 1000), NONE),
        );
        run_ms(&mut sim, 1);
        let out = raw.take();
        if n < 3 {
            assert!(out.is_empty(), "no retransmission before the third");
        } else {
            assert_eq!(out[0].seq.0, a_nxt + 1000, "fast retransmit of SND.UNA");
            assert_eq!(out[0].payload.len(), 1000);
        }
    }
    let fast: Vec<_> = trace(&a)
        .into_iter()
        .filter_map(|e| match e.kind {
            TraceKind::FastRetransmit { seq, ssthresh } => Some((seq.0, ssthresh)),
            _ => None,
        })
        .collect();
    assert_eq!(
        fast,
        vec![(a_nxt + 1000, 2500)],
        "ssthresh = FlightSize / 2"
    );
    let info = a.tcp(|t| t.info(t.ids()[0]).unwrap());
    assert_eq!(info.cwnd, 2500 + 3 * 1000, "cwnd = ssthresh + 3·SMSS");
    // A full ACK ends recovery with cwnd deflated to ssthresh at most.
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), x_nxt, Some(a_nxt + 6000), NONE),
    );
    run_ms(&mut sim, 1);
    let info = a.tcp(|t| t.info(t.ids()[0]).unwrap());
    assert!(info.cwnd <= 2500);
}

#[test]
fn successive_timeouts_double_the_rto() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    establish_with_raw(&mut sim, &a, &raw, &log);
    let conn = log.borrow().conn.clone().unwrap();
    let start = sim.now();
    conn.send(IoChain::from(IoBuf::from_vec(vec![1; 100])))
        .unwrap();
    // X never answers.
    sim.run_for(Duration::from_secs(30));
    let timeouts: Vec<(Instant, Duration)> = trace(&a)
        .into_iter()
        .filter_map(|e| match e.kind {
            TraceKind::Timeout { rto } => Some((e.at, rto)),
            _ => None,
        })
        .collect();
    // The handshake's RTT sample was ~0, so the RTO is the 200 ms minimum.
    let expected: Vec<Duration> = [200, 400, 800, 1600, 3200, 6400]
        .into_iter()
        .map(ms)
        .collect();
    let rtos: Vec<Duration> = timeouts.iter().map(|t| t.1).take(6).collect();
    assert_eq!(rtos, expected);
    let mut at = start;
    for (when, rto) in timeouts.iter().take(6) {
        assert_eq!(*when - at, *rto, "each expiry one (doubled) RTO later");
        at = *when;
    }
    // The retransmissions reached X each time.
    let retransmitted = raw.take().iter().filter(|s| s.payload.len() == 100).count();
    assert!(retransmitted >= 7);
}

#[test]
fn karns_rule_takes_no_sample_from_a_retransmitted_segment() {
    let (mut sim, a, _b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    let raw = Raw::new(&mut sim);
    let log = Log::default();
    let (port, a_nxt, x_nxt) = establish_with_raw(&mut sim, &a, &raw, &log);
    let conn = log.borrow().conn.clone().unwrap();
    let samples = |a: &Stack<SimPort>| {
        trace(a)
            .into_iter()
            .filter_map(|e| match e.kind {
                TraceKind::RttSample { rtt, .. } => Some(rtt),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let before = samples(&a).len();
    conn.send(IoChain::from(IoBuf::from_vec(vec![1; 100])))
        .unwrap();
    sim.run_for(ms(250)); // one RTO (200 ms): retransmitted once
    assert_eq!(a.tcp(|t| t.info(t.ids()[0]).unwrap().retransmissions), 1);
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), x_nxt, Some(a_nxt + 100), NONE),
    );
    run_ms(&mut sim, 1);
    assert_eq!(
        samples(&a).len(),
        before,
        "no sample: the segment was sent twice"
    );
    // New data acknowledged 30 ms later gives a sample of exactly 30 ms.
    conn.send(IoChain::from(IoBuf::from_vec(vec![2; 100])))
        .unwrap();
    run_ms(&mut sim, 30);
    raw.send(
        MAC_A,
        &from_x(80, (IP_A, port), x_nxt, Some(a_nxt + 200), NONE),
    );
    run_ms(&mut sim, 1);
    let after = samples(&a);
    assert_eq!(after.len(), before + 1);
    assert_eq!(after[after.len() - 1], ms(30));
}

#[test]
fn delayed_ack_timing() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, Recorder::new);
    let log = Log::default();
    let conn = a
        .connect(sock(IP_B, 80), Box::new(Recorder::new(log.clone())))
        .unwrap();
    run_ms(&mut sim, 100);
    let mark = b.tcp(|t| t.trace().len());
    conn.send(IoChain::from(IoBuf::from_vec(vec![1; 10])))
        .unwrap();
    run_ms(&mut sim, 100);
    let events: Vec<TraceEvent> = trace(&b)[mark..].to_vec();
    let received = events
        .iter()
        .find(|e| matches!(e.kind, TraceKind::Received { len: 10, .. }))
        .unwrap()
        .at;
    let acks: Vec<Instant> = events
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::Sent { len: 0, .. }))
        .map(|e| e.at)
        .collect();
    assert_eq!(acks.len(), 1);
    assert_eq!(
        acks[0] - received,
        ms(40),
        "one small segment: ACK after the delay"
    );
    // Two full-sized segments: the second is acknowledged at once.
    let mark = b.tcp(|t| t.trace().len());
    conn.send(IoChain::from(IoBuf::from_vec(vec![1; 2920])))
        .unwrap();
    run_ms(&mut sim, 100);
    let events: Vec<TraceEvent> = trace(&b)[mark..].to_vec();
    let second = events
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::Received { len: 1460, .. }))
        .nth(1)
        .unwrap()
        .at;
    let ack = events
        .iter()
        .find(|e| matches!(e.kind, TraceKind::Sent { len: 0, .. }))
        .unwrap()
        .at;
    assert_eq!(
        ack, second,
        "every second full-sized segment is ACKed at once"
    );
}

#[test]
fn zero_window_probes_until_the_receiver_reads_again() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    // B pauses receiving as soon as it accepts: it never reads.
    listen_recording(&b, 80, |log| Recorder {
        pause: true,
        ..Recorder::new(log)
    });
    let data = pattern(3 << 20, 9);
    let client = Log::default();
    a.connect(
        sock(IP_B, 80),
        Box::new(Recorder {
            to_send: Some(chunks(&data, 100_000)),
            close_after_send: true,
            ..Recorder::new(client.clone())
        }),
    )
    .unwrap();
    sim.run_for(Duration::from_secs(60));
    let server = accepted(80)[0].clone();
    let conn = server.borrow().conn.clone().unwrap();
    let b_info = b.tcp(|t| t.info(t.ids()[0]).unwrap());
    assert!(
        server.borrow().data.is_empty(),
        "nothing delivered while paused"
    );
    assert_eq!(b_info.held, 1 << 20, "held exactly the receive buffer");
    assert_eq!(b_info.rcv_wnd, 0);
    let a_info = a.tcp(|t| t.info(t.ids()[0]).unwrap());
    assert_eq!(a_info.snd_wnd, 0);
    assert_eq!(a_info.state, State::FinWait1, "alive: probes get answers");
    // Probes: one-byte segments, further and further apart.
    let probes: Vec<Instant> = trace(&a)
        .into_iter()
        .filter(|e| matches!(e.kind, TraceKind::Sent { len: 1, .. }))
        .map(|e| e.at)
        .collect();
    assert!(probes.len() >= 4, "{probes:?}");
    let gaps: Vec<Duration> = probes.windows(2).map(|p| p[1] - p[0]).collect();
    assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "{gaps:?}");
    conn.resume_receive();
    sim.run_for(Duration::from_secs(5));
    assert_eq!(server.borrow().data.len(), data.len());
    assert!(server.borrow().data == data);
    assert!(server.borrow().peer_closed);
}

#[test]
fn window_scaling_carries_64_mib() {
    let link = LinkConfig {
        latency: ms(1),
        ..LinkConfig::default()
    };
    let up = pattern(64 << 20, 17);
    let mut t = transfer(
        link,
        test_tcp(),
        test_tcp(),
        &up,
        b"done",
        Duration::from_secs(30),
    );
    assert_intact(&t, &up, b"done");
    // B advertised windows beyond 16 bits: scaling was in effect.
    let shift = t.b.tcp(|tcp| tcp.info(tcp.ids()[0]).unwrap().rcv_wscale);
    assert_eq!(shift, 5, "1 MiB needs a shift of 5");
    let widest = trace(&t.b)
        .iter()
        .filter_map(|e| match e.kind {
            TraceKind::Sent { window, flags, .. } if !flags.syn => {
                Some(usize::from(window) << shift)
            }
            _ => None,
        })
        .max()
        .unwrap();
    assert_eq!(widest, 1 << 20);
    t.sim.run_for(Duration::from_secs(61));
    assert!(t.a.tcp(|x| x.is_empty()) && t.b.tcp(|x| x.is_empty()));
}

/// Drops the `n`-th frame this device transmits.
struct DropNth<D> {
    inner: D,
    n: usize,
    sent: usize,
}

impl<D: ebb_netstack::Device> ebb_netstack::Device for DropNth<D> {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        self.inner.receive(now)
    }
    fn transmit(&mut self, now: Instant, frame: IoChain) {
        self.sent += 1;
        if self.sent != self.n {
            self.inner.transmit(now, frame);
        }
    }
    fn capabilities(&self) -> ebb_netstack::DeviceCapabilities {
        self.inner.capabilities()
    }
}

#[test]
fn after_fast_recovery_cwnd_grows_one_smss_per_rtt() {
    let link = LinkConfig {
        latency: ms(10),
        ..LinkConfig::default()
    };
    let mut sim = ebb_netstack::sim::Sim::new(link);
    let a = Stack::new(
        DropNth {
            inner: sim.wire().port(),
            n: 40,
            sent: 0,
        },
        config(MAC_A, IP_A, test_tcp()),
        sim.now(),
    );
    let mut every_segment = test_tcp();
    every_segment.delayed_ack = Duration::ZERO;
    let b = Stack::new(
        sim.wire().port(),
        config(MAC_B, IP_B, every_segment),
        sim.now(),
    );
    sim.add(Box::new(a.clone()));
    sim.add(Box::new(b.clone()));
    listen_recording(&b, 80, Recorder::new);
    let data = pattern(30 << 20, 3);
    a.connect(
        sock(IP_B, 80),
        Box::new(Recorder {
            to_send: Some(chunks(&data, 65_536)),
            ..Recorder::new(Log::default())
        }),
    )
    .unwrap();
    sim.run_for(Duration::from_secs(2));
    let events = a.tcp(|t| t.trace().to_vec());
    let (fast_at, ssthresh) = events
        .iter()
        .find_map(|e| match e.kind {
            TraceKind::FastRetransmit { ssthresh, .. } => Some((e.at, ssthresh)),
            _ => None,
        })
        .expect("the dropped segment was fast-retransmitted");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, TraceKind::Timeout { .. })),
        "no timeout was needed"
    );
    // After recovery: congestion avoidance, ssthresh fixed, cwnd sampled
    // once per RTT (20 ms) grows by one SMSS per RTT.
    let cwnd_at = |t: Instant| {
        events
            .iter()
            .rev()
            .filter(|e| e.at <= t)
            .find_map(|e| match e.kind {
                TraceKind::Cwnd { cwnd, ssthresh: s } => Some((cwnd, s)),
                _ => None,
            })
            .unwrap()
    };
    let start = fast_at + ms(100);
    let samples: Vec<(usize, usize)> = (0..10).map(|k| cwnd_at(start + ms(20) * k)).collect();
    assert!(samples.iter().all(|(_, s)| *s == ssthresh), "{samples:?}");
    assert!(
        samples.iter().all(|(c, _)| *c >= ssthresh),
        "out of recovery: {samples:?}"
    );
    let growth: Vec<usize> = samples.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(
        growth.iter().all(|g| *g <= 1460),
        "at most one SMSS per RTT: {growth:?}"
    );
    let total: usize = growth.iter().sum();
    assert!(
        (7 * 1460..=9 * 1460).contains(&total),
        "about one SMSS per RTT over 9 RTTs: {growth:?}"
    );
}
