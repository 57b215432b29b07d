//! TCP against hostile or broken peers: SYN floods keep state bounded, a
//! peer that never reads keeps our memory bounded, bogus options and
//! random segments are survived; and a property test over random link
//! faults: both streams always arrive intact and in order, and both ends
//! finish in CLOSED or TIME-WAIT.

// Test data takes the low bits of counters on purpose.
#![allow(clippy::cast_possible_truncation)]

mod common;

use std::time::Duration;

use common::*;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetStack, TcpConnection, TcpHandler};
use ebb_netstack::device::{Device, FaultConfig};
use ebb_netstack::rng::Rng;
use ebb_netstack::sim::LinkConfig;
use ebb_netstack::tcp::segment::{Flags, OutSegment};
use ebb_netstack::tcp::{Seq, State, TcpConfig};
use proptest::prelude::*;

/// A SYN beyond the backlog is dropped, not lost for good: once the
/// handshakes before it complete (they leave the backlog and go straight
/// to the application; there is no accept queue to overflow), the peer's
/// retransmitted SYN (RFC 6298 §2.1) is answered and accepted.
#[test]
fn a_syn_dropped_at_a_full_backlog_is_answered_when_resent() {
    let tcp = TcpConfig {
        syn_backlog: 2,
        ..test_tcp()
    };
    let (mut sim, _a, b) = two_stacks(LinkConfig::default(), test_tcp(), tcp);
    listen_recording(&b, 80, Recorder::new);
    let raw = Raw::new(&mut sim);
    let syn = |port: u16| from_x(port, (IP_B, 80), u32::from(port) * 1000, None, SYN);
    for port in [5001, 5002, 5003] {
        raw.send(MAC_B, &syn(port));
    }
    run_ms(&mut sim, 1);
    let answers = raw.take();
    let answered: Vec<u16> = answers.iter().map(|s| s.dst_port).collect();
    assert_eq!(
        answered,
        [5001, 5002],
        "the third SYN found the backlog full"
    );
    assert!(answers.iter().all(|s| s.flags.syn && s.flags.ack));
    assert_eq!(b.tcp(|t| t.stats().syn_backlog_full), 1);
    // The first two complete their handshakes and are accepted.
    for synack in &answers {
        let port = synack.dst_port;
        let ack = from_x(
            port,
            (IP_B, 80),
            u32::from(port) * 1000 + 1,
            Some(synack.seq.0.wrapping_add(1)),
            NONE,
        );
        raw.send(MAC_B, &ack);
    }
    run_ms(&mut sim, 1);
    assert_eq!(accepted(80).len(), 2);
    assert_eq!(
        b.tcp(|t| t.half_open(80)),
        0,
        "accepted: out of the backlog"
    );
    // The third peer resends its SYN: answered, and its handshake completes.
    raw.send(MAC_B, &syn(5003));
    run_ms(&mut sim, 1);
    let synack = raw.take();
    assert_eq!(synack.len(), 1);
    assert!(synack[0].flags.syn && synack[0].flags.ack && synack[0].dst_port == 5003);
    let ack = from_x(
        5003,
        (IP_B, 80),
        5_003_001,
        Some(synack[0].seq.0.wrapping_add(1)),
        NONE,
    );
    raw.send(MAC_B, &ack);
    run_ms(&mut sim, 1);
    assert_eq!(
        accepted(80).len(),
        3,
        "the resent SYN's connection is accepted"
    );
    assert!(accepted(80)
        .iter()
        .all(|log| log.borrow().aborted.is_none()));
}

#[test]
fn syn_flood_keeps_state_bounded_and_expires() {
    let mut tcp = test_tcp();
    tcp.syn_backlog = 64;
    tcp.trace_capacity = 0;
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), tcp);
    listen_recording(&b, 80, Recorder::new);
    let raw = Raw::new(&mut sim);
    for i in 0..10_000u32 {
        let port = 1024 + (i % 60_000) as u16;
        raw.send(
            MAC_B,
            &from_x(port, (IP_B, 80), i.wrapping_mul(7919), None, SYN),
        );
        if i % 100 == 0 {
            run_ms(&mut sim, 1);
            assert!(b.tcp(|t| t.len()) <= 64);
        }
    }
    run_ms(&mut sim, 1);
    assert_eq!(b.tcp(|t| t.half_open(80)), 64, "the backlog is full");
    assert_eq!(b.tcp(|t| t.len()), 64);
    assert!(b.tcp(|t| t.stats().syn_backlog_full) >= 9_900);
    drop(raw.take());
    // The half-open connections give up after their SYN,ACK retries.
    sim.run_for(Duration::from_secs(30 * 60));
    assert_eq!(b.tcp(|t| t.len()), 0);
    assert_eq!(b.tcp(|t| t.half_open(80)), 0);
    drop(raw.take());
    // The listener works again.
    let log = Log::default();
    a.connect(sock(IP_B, 80), Box::new(Recorder::new(log.clone())))
        .unwrap();
    run_ms(&mut sim, 10);
    assert!(log.borrow().connected);
}

/// Sends as much as the credit allows, whenever it allows it.
struct Greedy {
    accepted: std::rc::Rc<std::cell::Cell<usize>>,
}

impl Greedy {
    fn fill(&self, conn: &TcpConnection) {
        loop {
            let credit = conn.send_credit();
            if credit == 0 {
                // Ask to be told when credit grows.
                let _ = conn.send(IoChain::from(IoBuf::from_vec(vec![0; 1])));
                return;
            }
            conn.send(IoChain::from(IoBuf::from_vec(vec![7; credit.min(65_536)])))
                .unwrap();
            self.accepted.set(self.accepted.get() + credit.min(65_536));
        }
    }
}

impl TcpHandler for Greedy {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.fill(conn);
    }
    fn on_data(&mut self, _conn: &TcpConnection, _data: IoChain) {}
    fn on_send_credit(&mut self, conn: &TcpConnection) {
        self.fill(conn);
    }
}

#[test]
fn a_peer_that_never_reads_keeps_our_memory_bounded() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, |log| Recorder {
        pause: true,
        ..Recorder::new(log)
    });
    let accepted = std::rc::Rc::new(std::cell::Cell::new(0));
    a.connect(
        sock(IP_B, 80),
        Box::new(Greedy {
            accepted: accepted.clone(),
        }),
    )
    .unwrap();
    sim.run_for(Duration::from_secs(120));
    let window = TcpConfig::default().recv_buffer;
    let a_info = a.tcp(|t| t.info(t.ids()[0]).unwrap());
    let b_info = b.tcp(|t| t.info(t.ids()[0]).unwrap());
    assert_eq!(a_info.state, State::Established);
    assert_eq!(b_info.held, window, "the receiver holds one window");
    assert!(a_info.send_queued <= window, "{}", a_info.send_queued);
    assert!(
        accepted.get() <= 2 * window,
        "the sender took {} bytes",
        accepted.get()
    );
    assert_eq!(a_info.snd_wnd, 0);
}

#[test]
fn bogus_options_do_not_stop_a_handshake() {
    let (mut sim, _a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, Recorder::new);
    let raw = Raw::new(&mut sim);
    let syn = from_x(4000, (IP_B, 80), 1, None, SYN);
    let mut frame = tcp_frame(MAC_X, MAC_B, &syn);
    // Give it 8 bytes of options: an MSS with length 0, then garbage.
    let tcp = 14 + 20;
    frame[tcp + 12] = 0x70;
    frame.splice(tcp + 20..tcp + 20, [2u8, 0, 0xff, 0xff, 3, 9, 1, 1]);
    let total = (frame.len() - 14) as u16;
    frame[16..18].copy_from_slice(&total.to_be_bytes());
    smoltcp::wire::Ipv4Packet::new_unchecked(&mut frame[14..34]).fill_checksum();
    let mut packet = smoltcp::wire::TcpPacket::new_unchecked(&mut frame[tcp..]);
    packet.fill_checksum(&IP_X.into(), &IP_B.into());
    raw.0
        .borrow_mut()
        .port
        .transmit(sim.now(), IoChain::from(IoBuf::from_vec(frame)));
    run_ms(&mut sim, 1);
    let answer = raw.take();
    assert_eq!(answer.len(), 1);
    assert!(
        answer[0].flags.syn && answer[0].flags.ack,
        "SYN,ACK despite the options"
    );
    assert_eq!(
        answer[0].window_scale, None,
        "no scaling offered back: none was parsed"
    );
    let smss = b.tcp(|t| t.info(t.ids()[0]).unwrap().smss);
    assert_eq!(smss, 536, "no MSS parsed: the default");
}

#[test]
fn random_segments_are_survived() {
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, Recorder::new);
    let log = Log::default();
    a.connect(sock(IP_B, 80), Box::new(Recorder::new(log.clone())))
        .unwrap();
    run_ms(&mut sim, 10);
    let raw = Raw::new(&mut sim);
    let mut rng = Rng::new(42);
    for _ in 0..5_000 {
        let bits = rng.next_u32();
        let mut seg = OutSegment {
            src: (
                IP_X,
                if bits & 1 == 0 {
                    4000
                } else {
                    (bits >> 8) as u16
                },
            ),
            dst: (
                IP_B,
                if bits & 2 == 0 {
                    80
                } else {
                    (bits >> 16) as u16
                },
            ),
            seq: Seq(rng.next_u32()),
            ack: Seq(rng.next_u32()),
            flags: Flags {
                syn: bits & 4 != 0,
                ack: bits & 8 != 0,
                fin: bits & 16 != 0,
                rst: bits & 32 != 0,
                psh: bits & 64 != 0,
            },
            window: (bits >> 3) as u16,
            mss: (bits & 128 != 0).then_some((bits >> 12) as u16),
            window_scale: (bits & 256 != 0).then_some((bits >> 20) as u8),
            payload: IoChain::new(),
        };
        if bits & 512 != 0 {
            seg.payload = IoChain::from(IoBuf::from_vec(vec![1; (bits >> 22) as usize % 1400]));
        }
        raw.send(MAC_B, &seg);
        if rng.chance(5) {
            run_ms(&mut sim, 1);
        }
    }
    sim.run_for(Duration::from_secs(600));
    assert!(b.tcp(|t| t.len()) <= 1 + TcpConfig::default().syn_backlog);
    // The real connection was not disturbed.
    let conn = log.borrow().conn.clone().unwrap();
    conn.send(IoChain::from(IoBuf::from_vec(b"still fine".to_vec())))
        .unwrap();
    run_ms(&mut sim, 100);
    assert_eq!(accepted(80)[0].borrow().data, b"still fine");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_fault_schedule_delivers_both_streams(
        seed in any::<u64>(),
        loss_pct in 0u8..15,
        duplicate_pct in 0u8..15,
        reorder_pct in 0u8..20,
        max_delay_us in 0u64..5_000,
        latency_us in 0u64..20_000,
        up_len in 0usize..150_000,
        down_len in 0usize..150_000,
        delayed_ack_ms in 0u64..100,
    ) {
        let link = LinkConfig {
            faults: FaultConfig {
                seed,
                loss_pct,
                duplicate_pct,
                reorder_pct,
                reorder_delay: Duration::from_millis(4),
                max_delay: Duration::from_micros(max_delay_us),
                ..FaultConfig::default()
            },
            latency: Duration::from_micros(latency_us),
            bandwidth_bps: 50_000_000,
        };
        let mut tcp = test_tcp();
        tcp.delayed_ack = Duration::from_millis(delayed_ack_ms);
        tcp.trace_capacity = 0;
        let up = pattern(up_len, 1);
        let down = pattern(down_len, 2);
        let mut t = transfer(link, tcp, tcp, &up, &down, Duration::from_secs(900));
        assert_intact(&t, &up, &down);
        // Give the last ACKs time to get through (or their FINs to be
        // retransmitted and acknowledged). Under heavy loss a FIN's
        // retransmission timer backs off (RFC 6298 §5.5): three losses in a
        // row already put the next try ~25 s out, so allow several
        // back-offs (simulated time; costs nothing).
        t.sim.run_for(Duration::from_secs(240));
        for stack in [&t.a, &t.b] {
            for state in stack.tcp(|x| x.ids().iter().filter_map(|id| x.state(*id)).collect::<Vec<_>>()) {
                prop_assert_eq!(state, State::TimeWait);
            }
        }
        t.sim.run_for(Duration::from_secs(61));
        prop_assert!(t.a.tcp(|x| x.is_empty()) && t.b.tcp(|x| x.is_empty()), "all CLOSED");
    }
}

#[test]
fn near_miss_segments_into_a_live_connection_keep_invariants() {
    // X spoofs A's address and throws segments near the live connection's
    // sequence space at B: every combination of flags, options, lengths,
    // sequence and acknowledgment numbers around the real ones. B must not
    // panic and its variables must stay consistent and bounded.
    let (mut sim, a, b) = two_stacks(LinkConfig::default(), test_tcp(), test_tcp());
    listen_recording(&b, 80, |log| Recorder {
        to_send: Some(chunks(&pattern(200_000, 1), 10_000)),
        ..Recorder::new(log)
    });
    let log = Log::default();
    let conn = a
        .connect(sock(IP_B, 80), Box::new(Recorder::new(log.clone())))
        .unwrap();
    run_ms(&mut sim, 1);
    let a_port = conn.local_addr().port();
    let raw = Raw::new(&mut sim);
    let mut rng = Rng::new(7);
    let recv_buffer = TcpConfig::default().recv_buffer;
    for round in 0..20_000u32 {
        let Some(info) = b.tcp(|t| t.ids().first().and_then(|id| t.info(*id))) else {
            break; // reset by a lucky RST: fine, nothing more to check
        };
        let near = |rng: &mut Rng, base: Seq| {
            let offset = (rng.next_u32() % 200_000) as usize;
            if rng.chance(50) {
                base.wrapping_add(offset)
            } else {
                Seq(base.0.wrapping_sub(offset as u32))
            }
        };
        let bits = rng.next_u32();
        let mut seg = OutSegment {
            src: (IP_A, a_port),
            dst: (IP_B, 80),
            seq: near(&mut rng, info.rcv_nxt),
            ack: near(&mut rng, info.snd_una),
            flags: Flags {
                syn: bits & 1 != 0 && bits & 2 != 0,
                ack: bits & 4 != 0,
                fin: bits & 8 != 0,
                rst: bits & 16 != 0 && bits & 32 != 0,
                psh: bits & 64 != 0,
            },
            window: (bits >> 16) as u16,
            mss: (bits & 128 != 0).then_some((bits >> 8) as u16),
            window_scale: (bits & 256 != 0).then_some((bits >> 24) as u8),
            payload: IoChain::new(),
        };
        if bits & 512 != 0 {
            seg.payload = IoChain::from(IoBuf::from_vec(vec![0; (bits >> 20) as usize % 1460]));
        }
        raw.send(MAC_B, &seg);
        if round % 16 == 0 {
            sim.run_for(Duration::from_millis(7));
        } else {
            sim.run_for(Duration::from_micros(1));
        }
        if let Some(i) = b.tcp(|t| t.ids().first().and_then(|id| t.info(*id))) {
            assert!(i.snd_una.le(i.snd_nxt), "{i:?}");
            assert!(i.held <= recv_buffer);
            assert!(i.out_of_order <= 512 * 1460);
            assert!(i.send_queued <= 200_000);
        }
    }
    drop(raw.take());
    sim.run_for(Duration::from_secs(600));
    assert!(b.tcp(|t| t.len()) <= 1);
}
