//! Replays the seed corpus of the `map` fuzz target (`fuzz/corpus/map/`)
//! on stable, with the fuzz target's checks (see `map_wire_support`), and
//! checks the seeds do what they are named for.
//! `EBB_WRITE_MAP_CORPUS=1 cargo test -p ebb-messenger --test
//! map_fuzz_corpus` rewrites the corpus from [`seeds`].

mod corpus_support;
mod map_wire_support;

use ebb_core::{Change, Lease, MapError, NodeId, Swap};
use ebb_messenger::map::{encode_reply, LayoutError, MapReply, MapRequest};
use map_wire_support::{run, Outcome};

/// A request input.
fn request(request: &MapRequest) -> Vec<u8> {
    let number = u8::try_from(request.number().0).unwrap();
    let mut out = vec![number, 0];
    out.extend(request.encode());
    out
}

/// A reply input, to operation `number`.
fn reply(number: u8, reply: &Result<MapReply, MapError>) -> Vec<u8> {
    let mut out = vec![number, 1];
    out.extend(encode_reply(reply));
    out
}

/// The seeds: every operation's request and reply, every error, and
/// malformed ones.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let set = request(&MapRequest::Set {
        key: "nodes/1".into(),
        value: b"up".to_vec(),
        lease: Some(Lease(7)),
    });
    let mut set_bad_lease_tag = set.clone();
    let tag_at = set.len() - 9;
    set_bad_lease_tag[tag_at] = 2;
    let mut set_trailing = set.clone();
    set_trailing.push(0);
    let mut key_not_utf8 = request(&MapRequest::Get { key: "k".into() });
    *key_not_utf8.last_mut().unwrap() = 0xff;
    vec![
        ("empty", vec![]),
        (
            "get",
            request(&MapRequest::Get {
                key: "ebb/40001".into(),
            }),
        ),
        ("set", set.clone()),
        ("set_bad_lease_tag", set_bad_lease_tag),
        ("set_trailing", set_trailing),
        ("set_truncated", set[..set.len() - 3].to_vec()),
        ("key_not_utf8", key_not_utf8),
        ("delete", request(&MapRequest::Delete { key: "k".into() })),
        (
            "compare_and_swap",
            request(&MapRequest::CompareAndSwap {
                key: "ids/next".into(),
                expected: Some(b"32768".to_vec()),
                new: b"32832".to_vec(),
            }),
        ),
        (
            "list",
            request(&MapRequest::List {
                prefix: "nodes/".into(),
            }),
        ),
        (
            "reserve_range",
            request(&MapRequest::ReserveRange {
                node: NodeId(3),
                len: 64,
            }),
        ),
        (
            "grant_lease",
            request(&MapRequest::GrantLease { ttl_ms: 5000 }),
        ),
        ("keep_alive", request(&MapRequest::KeepAlive(Lease(1)))),
        ("revoke", request(&MapRequest::Revoke(Lease(1)))),
        ("watch", request(&MapRequest::Watch { prefix: "".into() })),
        (
            "next_changes",
            request(&MapRequest::NextChanges {
                watch: 1,
                wait_ms: 20_000,
            }),
        ),
        ("unwatch", request(&MapRequest::Unwatch { watch: 1 })),
        ("unknown_operation", vec![13, 0, 1, 2, 3]),
        (
            "reply_value",
            reply(1, &Ok(MapReply::Value(Some(b"v".to_vec())))),
        ),
        ("reply_done", reply(2, &Ok(MapReply::Done))),
        ("reply_deleted", reply(3, &Ok(MapReply::Deleted(true)))),
        (
            "reply_conflict",
            reply(4, &Ok(MapReply::Swap(Swap::Conflict(None)))),
        ),
        (
            "reply_entries",
            reply(
                5,
                &Ok(MapReply::Entries(vec![
                    ("nodes/1".into(), b"a".to_vec()),
                    ("nodes/2".into(), vec![]),
                ])),
            ),
        ),
        ("reply_range", reply(6, &Ok(MapReply::Range(32768..32832)))),
        ("reply_empty_range", reply(6, &Ok(MapReply::Range(9..9)))),
        ("reply_lease", reply(7, &Ok(MapReply::Lease(Lease(5))))),
        ("reply_watching", reply(10, &Ok(MapReply::Watching(1)))),
        (
            "reply_changes",
            reply(
                11,
                &Ok(MapReply::Changes(vec![
                    Change {
                        key: "nodes/1".into(),
                        value: Some(b"up".to_vec()),
                    },
                    Change {
                        key: "nodes/1".into(),
                        value: None,
                    },
                ])),
            ),
        ),
        ("reply_huge_count", vec![5, 1, 0, 0xff, 0xff, 0xff, 0xff]),
        (
            "reply_unreachable",
            reply(
                1,
                &Err(MapError::Unreachable {
                    endpoint: "etcd at 127.0.0.1:2379".into(),
                    reason: "connection refused".into(),
                }),
            ),
        ),
        (
            "reply_may_have_been_applied",
            reply(
                2,
                &Err(MapError::OutcomeUnknown {
                    endpoint: "the hosted node 0 (10.96.0.1:7000)".into(),
                    reason: "no reply within 10000 ms".into(),
                }),
            ),
        ),
        (
            "reply_invalid_key",
            reply(
                2,
                &Err(MapError::InvalidKey {
                    key: "/k".into(),
                    why: "starts with '/'".into(),
                }),
            ),
        ),
        (
            "reply_ids_exhausted",
            reply(
                6,
                &Err(MapError::IdsExhausted {
                    wanted: 64,
                    left: 2,
                }),
            ),
        ),
        (
            "reply_lease_expired",
            reply(8, &Err(MapError::LeaseExpired(Lease(3)))),
        ),
        (
            "reply_corrupt",
            reply(
                6,
                &Err(MapError::Corrupt {
                    key: "ids/next".into(),
                    why: "not decimal".into(),
                }),
            ),
        ),
        (
            "reply_refused",
            reply(4, &Err(MapError::Refused("no".into()))),
        ),
        (
            "reply_watch_ended",
            reply(11, &Err(MapError::WatchEnded("compacted".into()))),
        ),
        ("reply_unknown_error", vec![1, 1, 1, 9]),
    ]
}

#[test]
fn the_corpus_replays_without_a_failed_check() {
    corpus_support::replay("map", "EBB_WRITE_MAP_CORPUS", &seeds(), |data| {
        run(data);
    });
}

#[test]
fn the_seeds_do_what_they_are_named_for() {
    let outcome = |name: &str| run(&corpus_support::seed(&seeds(), name));
    for (name, _) in seeds() {
        let good = !name.contains("bad")
            && !name.contains("trailing")
            && !name.contains("truncated")
            && !name.contains("not_utf8")
            && !name.contains("unknown")
            && !name.contains("empty")
            && !name.contains("huge");
        let decoded = match outcome(name) {
            Outcome::Request(result) => result.is_ok(),
            Outcome::Reply(result) => result.is_ok(),
            Outcome::TooShort => false,
        };
        assert_eq!(decoded, good, "{name}");
    }
    assert_eq!(outcome("empty"), Outcome::TooShort);
    assert_eq!(
        outcome("set_bad_lease_tag"),
        Outcome::Request(Err(LayoutError::BadTag {
            field: "lease",
            tag: 2
        }))
    );
    assert_eq!(
        outcome("set_trailing"),
        Outcome::Request(Err(LayoutError::Trailing { extra: 1 }))
    );
    assert_eq!(
        outcome("set_truncated"),
        Outcome::Request(Err(LayoutError::Truncated {
            field: "lease",
            needed: 8,
            available: 5
        }))
    );
    assert_eq!(
        outcome("key_not_utf8"),
        Outcome::Request(Err(LayoutError::NotUtf8 { field: "key" }))
    );
    assert_eq!(
        outcome("unknown_operation"),
        Outcome::Request(Err(LayoutError::UnknownOperation(13)))
    );
    assert_eq!(
        outcome("reply_empty_range"),
        Outcome::Reply(Err(LayoutError::EmptyRange { start: 9, end: 9 }))
    );
    assert!(matches!(
        outcome("reply_huge_count"),
        Outcome::Reply(Err(LayoutError::Truncated {
            field: "entries",
            ..
        }))
    ));
    assert_eq!(
        outcome("reply_unknown_error"),
        Outcome::Reply(Err(LayoutError::BadTag {
            field: "error",
            tag: 9
        }))
    );
}
