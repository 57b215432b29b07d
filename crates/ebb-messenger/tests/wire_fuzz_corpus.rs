//! Replays the seed corpus of the `wire` fuzz target (`fuzz/corpus/wire/`)
//! on stable, with the fuzz target's checks (see `wire_support`), and
//! checks the seeds do what they are named for.
//! `EBB_WRITE_WIRE_CORPUS=1 cargo test -p ebb-messenger --test
//! wire_fuzz_corpus` rewrites the corpus from [`seeds`].

mod corpus_support;
mod wire_support;

use std::net::{Ipv4Addr, SocketAddrV4};

use ebb_core::NodeId;
use ebb_iobuf::{IoBuf, IoChain};

use ebb_messenger::{
    encode_message, Announce, AnnounceReply, ErrorReply, Header, Hello, Kind, Limits, LostNotice,
    MessageNumber, NodeEntry, Refusal, WireError,
};
use wire_support::{run, LIMITS};

fn header(kind: Kind, correlation: u64) -> Header {
    Header {
        kind,
        destination: 0x8000,
        message: MessageNumber(1),
        source: NodeId(2),
        correlation,
        control_len: 0,
        payload_len: 0,
        core: None,
    }
}

fn message(kind: Kind, correlation: u64, control: &[u8], payload: &[u8]) -> Vec<u8> {
    let payload = IoChain::from(IoBuf::copy_from_slice(payload));
    encode_message(header(kind, correlation), control, payload, &LIMITS)
        .unwrap()
        .to_vec()
}

fn entry(node: u32) -> NodeEntry {
    NodeEntry {
        node: NodeId(node),
        addr: SocketAddrV4::new(Ipv4Addr::new(10, 99, 0, 10), 7100),
        cores: 2,
    }
}

/// An input: the piece size byte, then the stream.
fn input(piece: u8, parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![piece];
    for part in parts {
        out.extend_from_slice(part);
    }
    out
}

/// The seeds: named inputs covering each check, good and bad.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let hello = Hello {
        limits: Limits::DEFAULT,
    }
    .encode();
    let call = message(Kind::Call, 1, b"", b"ping");
    let mut bad_magic = call.clone();
    bad_magic[0] = b'X';
    let mut version_2 = call.clone();
    version_2[4] = 2;
    let mut bad_flags = call.clone();
    bad_flags[6] = 3;
    let mut reserved = call.clone();
    reserved[38] = 1;
    let mut named_core = call.clone();
    named_core[36] = 2;
    let mut long_control = call.clone();
    long_control[20] = 65;
    let mut long_payload = call.clone();
    long_payload[32..36].copy_from_slice(&4097u32.to_le_bytes());
    vec![
        ("hello", input(0, &[message(Kind::Hello, 0, &hello, b"")])),
        ("call_in_pieces", input(3, std::slice::from_ref(&call))),
        (
            "conversation",
            input(
                16,
                &[
                    message(Kind::Hello, 0, &hello, b""),
                    call.clone(),
                    message(Kind::Reply, 1, b"", &[7; 300]),
                    message(Kind::OneWay, 0, b"ctl", b""),
                    message(
                        Kind::ErrorReply,
                        2,
                        &ErrorReply::UnknownEbb(0x8000).encode(),
                        b"",
                    ),
                ],
            ),
        ),
        ("bad_magic", input(5, &[bad_magic])),
        ("version_2", input(1, &[version_2])),
        ("bad_flags", input(7, &[bad_flags])),
        ("reserved", input(9, &[reserved])),
        ("named_core", input(6, &[named_core])),
        ("control_too_long", input(2, &[long_control])),
        ("payload_too_long", input(40, &[long_payload])),
        ("truncated", input(11, &[call[..30].to_vec()])),
        (
            "error_reply_control",
            input(0, &[ErrorReply::Refused(9).encode().to_vec()]),
        ),
        ("empty", vec![]),
        ("announce", input(0, &[Announce(entry(3)).encode()])),
        (
            "announce_reply",
            input(
                0,
                &[AnnounceReply::Accepted {
                    ebb_ids: (32_832, 32_896),
                    directory: vec![entry(1), entry(2)],
                }
                .encode()],
            ),
        ),
        (
            "announce_refused",
            input(0, &[AnnounceReply::Refused(Refusal::Duplicate).encode()]),
        ),
        (
            "announce_malformed",
            input(0, &[AnnounceReply::Refused(Refusal::Malformed).encode()]),
        ),
        (
            "lost_notice",
            input(0, &[LostNotice(NodeId(2)).encode().to_vec()]),
        ),
    ]
}

#[test]
fn the_wire_fuzz_corpus_replays_cleanly() {
    corpus_support::replay("wire", "EBB_WRITE_WIRE_CORPUS", &seeds(), |data| {
        run(data);
    });
}

#[test]
fn the_seeds_do_what_they_are_named_for() {
    let outcome = |name: &str| run(&corpus_support::seed(&seeds(), name));
    assert_eq!(outcome("hello").frames, 1);
    assert_eq!(outcome("call_in_pieces").frames, 1);
    let conversation = outcome("conversation");
    assert_eq!((conversation.frames, conversation.error), (5, None));
    let error = |name: &str| outcome(name).error;
    assert_eq!(
        error("bad_magic"),
        Some(WireError::BadMagic { found: *b"XBBM" })
    );
    assert_eq!(
        error("version_2"),
        Some(WireError::Version { theirs: 2, ours: 1 })
    );
    assert_eq!(error("bad_flags"), Some(WireError::BadFlags { flags: 3 }));
    assert_eq!(error("reserved"), Some(WireError::Reserved { value: 1 }));
    let named_core = outcome("named_core");
    assert_eq!((named_core.frames, named_core.error), (1, None));
    assert_eq!(
        named_core.header.map(|h| h.map(|h| h.core)),
        Some(Ok(Some(1)))
    );
    assert_eq!(
        error("control_too_long"),
        Some(WireError::ControlTooLong { len: 65, limit: 64 })
    );
    assert_eq!(
        error("payload_too_long"),
        Some(WireError::PayloadTooLong {
            len: 4097,
            limit: 4096
        })
    );
    let truncated = outcome("truncated");
    assert_eq!((truncated.frames, truncated.error), (0, None));
    assert_eq!(
        truncated.header,
        Some(Err(WireError::Truncated {
            needed: 40,
            available: 30
        }))
    );
    assert_eq!(outcome("empty"), wire_support::Outcome::default());
}
