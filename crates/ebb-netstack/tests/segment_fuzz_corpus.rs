//! Replays the seed corpus of the `segment` fuzz target
//! (`fuzz/corpus/segment/`) through the stack on stable, with the fuzz
//! target's checks (no panic, a bounded connection table, every frame sent
//! well-formed; see `segment_support`), and checks the seeds do what they
//! are named for. `EBB_WRITE_SEGMENT_CORPUS=1 cargo test -p ebb-netstack
//! --test segment_fuzz_corpus` rewrites the corpus from [`seeds`].

mod segment_support;

use std::fs;
use std::path::{Path, PathBuf};

use segment_support::flags::{ACK, FIN, PSH, RST, SYN};
use segment_support::{
    join_records, run, split_records, tcp_of, Outcome, Record, Seg, ACK_RELATIVE, BAD_CHECKSUM,
    DEAF_PORT, ECHO_PORT, LONG_ADVANCE, MAX_CONNECTIONS, PEER_PORT, TO_ACTIVE,
};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/segment")
}

/// MSS 1460 and window scale 7 (RFC 9293 §3.2, RFC 7323 §2.2).
const SYN_OPTIONS: &[u8] = &[2, 4, 0x05, 0xb4, 1, 3, 3, 7];
const PEER_ISS: u32 = 5000;

fn record(control: u8, advance: u8, seg: &Seg<'_>) -> Record {
    Record {
        control,
        advance,
        tcp: seg.bytes(),
    }
}

/// The peer's half of a handshake with our listener on `port` from
/// `src_port`: SYN, then the ACK of our SYN,ACK.
fn handshake(port: u16, src_port: u16) -> Vec<Record> {
    vec![
        record(
            0,
            1,
            &Seg {
                src_port,
                dst_port: port,
                seq: PEER_ISS,
                flags: SYN,
                window: 65_535,
                options: SYN_OPTIONS,
                ..Seg::default()
            },
        ),
        record(
            ACK_RELATIVE,
            1,
            &Seg {
                src_port,
                dst_port: port,
                seq: PEER_ISS + 1,
                ack: 0,
                flags: ACK,
                window: 512,
                ..Seg::default()
            },
        ),
    ]
}

/// A segment on an established connection from `src_port` to `port`:
/// `sent` bytes of ours acknowledged, at offset `offset` of the peer's
/// stream.
fn data(port: u16, src_port: u16, offset: u32, sent: u32, flags: u8, payload: &[u8]) -> Record {
    record(
        ACK_RELATIVE,
        1,
        &Seg {
            src_port,
            dst_port: port,
            seq: PEER_ISS + 1 + offset,
            ack: sent,
            flags: ACK | flags,
            window: 512,
            payload,
            ..Seg::default()
        },
    )
}

/// Named inputs; see each one's comment.
fn seeds() -> Vec<(&'static str, Vec<Record>)> {
    let mut seeds = Vec::new();
    // Handshake, 5 bytes echoed, the peer closes, we close, the peer ACKs.
    let mut echo = handshake(ECHO_PORT, 4000);
    echo.push(data(ECHO_PORT, 4000, 0, 0, PSH, b"hello"));
    echo.push(data(ECHO_PORT, 4000, 5, 5, FIN, b""));
    echo.push(data(ECHO_PORT, 4000, 6, 6, 0, b""));
    seeds.push(("echo_and_close", echo));
    // 40 SYNs from different ports that never complete: the backlog (4)
    // and the table (16) bound the state.
    let flood = (0..40)
        .map(|i| {
            record(
                0,
                1,
                &Seg {
                    src_port: 10_000 + i,
                    dst_port: ECHO_PORT,
                    seq: PEER_ISS,
                    flags: SYN,
                    window: 65_535,
                    ..Seg::default()
                },
            )
        })
        .collect();
    seeds.push(("syn_flood", flood));
    // Bogus options: zero length, length 1, a length running past the
    // header, MSS with the wrong length, window scale above 14.
    let bogus: Vec<Record> = [
        &[2u8, 0, 0, 0][..],
        &[2, 1, 0, 0],
        &[3, 200, 0, 0],
        &[2, 3, 5, 0],
        &[3, 3, 200, 0],
        &[1, 1, 1, 1, 1, 1, 1, 0],
    ]
    .iter()
    .enumerate()
    .map(|(i, options)| {
        record(
            0,
            1,
            &Seg {
                src_port: 4100 + u16::try_from(i).expect("few"),
                dst_port: ECHO_PORT,
                seq: PEER_ISS,
                flags: SYN,
                window: 1000,
                options,
                ..Seg::default()
            },
        )
    })
    .collect();
    seeds.push(("bogus_options", bogus));
    // Established, then an RST outside the window (ignored, RFC 5961
    // §3.2), one inside but not exact (challenge ACK), then the exact one.
    let mut resets = handshake(ECHO_PORT, 4200);
    for (offset, window) in [(1_000_000u32, 0u16), (10, 0), (0, 0)] {
        resets.push(record(
            0,
            1,
            &Seg {
                src_port: 4200,
                dst_port: ECHO_PORT,
                seq: PEER_ISS + 1 + offset,
                flags: RST,
                window,
                ..Seg::default()
            },
        ));
    }
    seeds.push(("rst_in_and_out_of_window", resets));
    // Established, then data out of the window, duplicated, reordered,
    // and an ACK of data we never sent.
    let mut window = handshake(ECHO_PORT, 4300);
    window.push(data(ECHO_PORT, 4300, 3_000_000, 0, 0, b"far"));
    window.push(data(ECHO_PORT, 4300, 5, 0, 0, b"later"));
    window.push(data(ECHO_PORT, 4300, 0, 0, 0, b"first"));
    window.push(data(ECHO_PORT, 4300, 0, 0, 0, b"first"));
    window.push(data(ECHO_PORT, 4300, 10, 1_000_000, 0, b"ahead"));
    seeds.push(("out_of_window_and_reordered", window));
    // A listener that never reads: its window closes; the peer probes
    // with one byte past it as time passes (RFC 9293 §3.8.6.1).
    let mut deaf = handshake(DEAF_PORT, 4400);
    let chunk = [0x5a; 1400];
    for i in 0..60 {
        deaf.push(data(DEAF_PORT, 4400, i * 1400, 0, 0, &chunk));
    }
    for i in 0..5 {
        let mut probe = data(DEAF_PORT, 4400, 60 * 1400 + i, 0, 0, b"?");
        probe.control |= LONG_ADVANCE;
        probe.advance = 200;
        deaf.push(probe);
    }
    seeds.push(("peer_that_floods_a_deaf_listener", deaf));
    // Our active connection's SYN answered with SYN,ACK, then data and FIN.
    let mut active = vec![record(
        TO_ACTIVE | ACK_RELATIVE,
        1,
        &Seg {
            src_port: PEER_PORT,
            seq: PEER_ISS,
            ack: 0,
            flags: SYN | ACK,
            window: 65_535,
            options: SYN_OPTIONS,
            ..Seg::default()
        },
    )];
    let mut answer = data(0, PEER_PORT, 0, 0, PSH, b"from the peer");
    answer.control |= TO_ACTIVE;
    active.push(answer);
    seeds.push(("active_open_answered", active));
    // Our SYN refused with RST,ACK (RFC 9293 §3.10.7.3, SYN-SENT).
    seeds.push((
        "active_open_refused",
        vec![record(
            TO_ACTIVE | ACK_RELATIVE,
            1,
            &Seg {
                src_port: PEER_PORT,
                flags: RST | ACK,
                ..Seg::default()
            },
        )],
    ));
    // Truncated headers, a data offset under 5 and past the end, a bad
    // checksum, a segment to a closed port, and time for every timer.
    let mut short = Seg {
        src_port: 4500,
        dst_port: ECHO_PORT,
        seq: PEER_ISS,
        flags: SYN,
        ..Seg::default()
    }
    .bytes();
    short.truncate(13);
    let mut low_offset = data(ECHO_PORT, 4501, 0, 0, 0, b"xx");
    low_offset.tcp[12] = 0x20;
    let mut high_offset = data(ECHO_PORT, 4502, 0, 0, 0, b"xx");
    high_offset.tcp[12] = 0xf0;
    let mut bad_sum = record(
        0,
        1,
        &Seg {
            src_port: 4503,
            dst_port: ECHO_PORT,
            seq: PEER_ISS,
            flags: SYN,
            ..Seg::default()
        },
    );
    bad_sum.control |= BAD_CHECKSUM;
    bad_sum.tcp[16] = 0xde;
    let closed = record(
        LONG_ADVANCE,
        255,
        &Seg {
            src_port: 4504,
            dst_port: 9,
            seq: PEER_ISS,
            flags: ACK,
            ack: 77,
            ..Seg::default()
        },
    );
    seeds.push((
        "malformed_and_closed_port",
        vec![
            Record {
                control: 0,
                advance: 1,
                tcp: short,
            },
            low_offset,
            high_offset,
            bad_sum,
            closed,
        ],
    ));
    seeds
}

/// Payload bytes of the TCP segments our stack sent.
fn payload_sent(outcome: &Outcome) -> Vec<u8> {
    let mut bytes = Vec::new();
    for frame in &outcome.sent {
        if let Some(tcp) = tcp_of(frame) {
            bytes.extend_from_slice(tcp.payload());
        }
    }
    bytes
}

fn flags_sent(outcome: &Outcome, want: impl Fn(&smoltcp::wire::TcpPacket<&[u8]>) -> bool) -> usize {
    outcome
        .sent
        .iter()
        .filter_map(|frame| tcp_of(frame))
        .filter(|tcp| want(tcp))
        .count()
}

#[test]
fn the_segment_fuzz_corpus_replays_cleanly() {
    if std::env::var_os("EBB_WRITE_SEGMENT_CORPUS").is_some() {
        fs::create_dir_all(corpus_dir()).unwrap();
        for (name, records) in seeds() {
            fs::write(corpus_dir().join(name), join_records(&records)).unwrap();
        }
    }
    let mut replayed = 0;
    for entry in fs::read_dir(corpus_dir()).expect("the committed corpus") {
        let path = entry.unwrap().path();
        let input = fs::read(&path).unwrap();
        let outcome = run(&input);
        assert!(outcome.most_connections <= MAX_CONNECTIONS);
        replayed += 1;
    }
    assert!(replayed >= seeds().len(), "the corpus holds every seed");
}

#[test]
fn the_seeds_do_what_they_are_named_for() {
    let seeds: Vec<(&str, Outcome)> = seeds()
        .into_iter()
        .map(|(name, records)| (name, run(&join_records(&records))))
        .collect();
    let outcome = |wanted: &str| {
        &seeds
            .iter()
            .find(|(name, _)| *name == wanted)
            .expect("a seed")
            .1
    };
    let echo = outcome("echo_and_close");
    assert_eq!(echo.stats.accepted, 1);
    assert!(payload_sent(echo).ends_with(b"hello"), "the echo");
    assert_eq!(flags_sent(echo, |tcp| tcp.fin()), 1, "our FIN");

    let flood = outcome("syn_flood");
    assert!(flood.stats.syn_backlog_full > 0, "{:?}", flood.stats);
    assert!(flood.most_connections <= MAX_CONNECTIONS);

    let bogus = outcome("bogus_options");
    assert!(
        flags_sent(bogus, |tcp| tcp.syn() && tcp.ack()) >= 1,
        "SYN,ACKs despite bogus options"
    );

    let resets = outcome("rst_in_and_out_of_window");
    assert_eq!(resets.stats.accepted, 1);
    assert!(
        resets.most_connections >= 2,
        "the connection and the active one"
    );

    let window = outcome("out_of_window_and_reordered");
    assert!(
        payload_sent(window).starts_with(b"firstlater"),
        "in order, once, nothing from outside the window"
    );

    let deaf = outcome("peer_that_floods_a_deaf_listener");
    let zero_windows = flags_sent(deaf, |tcp| tcp.window_len() == 0 && !tcp.syn());
    assert!(zero_windows > 0, "the deaf listener's window closed");

    let active = outcome("active_open_answered");
    assert_eq!(active.stats.connected, 1);
    let sent = payload_sent(active);
    assert!(
        sent.windows(13).any(|bytes| bytes == b"from the peer"),
        "echoed: {sent:?}"
    );

    let refused = outcome("active_open_refused");
    assert_eq!(refused.stats.connected, 0);

    let malformed = outcome("malformed_and_closed_port");
    assert!(malformed.stats.resets_sent >= 1, "RST for the closed port");
}

#[test]
fn records_split_and_join() {
    let records = vec![
        Record {
            control: 1,
            advance: 2,
            tcp: vec![1, 2, 3],
        },
        Record {
            control: 0,
            advance: 0,
            tcp: Vec::new(),
        },
    ];
    let joined = join_records(&records);
    let split = split_records(&joined);
    assert_eq!(split.len(), 2);
    assert_eq!(split[0].tcp, [1, 2, 3]);
    assert_eq!(split[1].control, 0);
    assert!(
        split_records(&[1, 2, 0]).is_empty(),
        "a partial header is no record"
    );
}
