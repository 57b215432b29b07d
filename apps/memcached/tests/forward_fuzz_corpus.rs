//! Replays the seed corpus of the `forward` fuzz target
//! (`fuzz/corpus/forward/`) on stable, with the fuzz target's checks (see
//! `forward_support`), and checks the seeds do what they are named for.
//! `EBB_WRITE_FORWARD_CORPUS=1 cargo test -p memcached --test
//! forward_fuzz_corpus` rewrites the corpus from [`seeds`].

mod forward_support;

use std::path::{Path, PathBuf};

use ebb_core::NodeId;
use forward_support::{run, Outcome};
use memcached::cluster::{
    Command, Create, Entry, ForwardError, ForwardReply, ForwardRequest, Member, ShardMap,
    ShardMapError, StoreMode,
};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/forward")
}

/// An input: the payload length byte, then the control.
fn input(payload: u8, control: &[u8]) -> Vec<u8> {
    let mut out = vec![payload];
    out.extend_from_slice(control);
    out
}

fn request(command: Command<'_>) -> Vec<u8> {
    ForwardRequest { epoch: 4, command }.encode().unwrap()
}

fn entry(len: u32) -> Option<Entry> {
    Some(Entry {
        flags: 5,
        cas: 9,
        len,
    })
}

/// The seeds: named inputs covering each op and status, good and bad.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let get = request(Command::Get {
        cas: true,
        touch: None,
        keys: vec![b"a", b"bb", b"ccc"],
    });
    let store = request(Command::Store {
        mode: StoreMode::Append,
        flags: 3,
        exptime: 100,
        cas: 0,
        key: b"key",
    });
    let mut meta_no_newline = request(Command::Meta { line: b"mg k v\n" });
    *meta_no_newline.last_mut().unwrap() = b' ';
    let mut bad_version = get.clone();
    bad_version[0] = 9;
    let mut arith_stray_initial = request(Command::Arith {
        incr: true,
        delta: 1,
        cas: 0,
        create: None,
        key: b"n",
    });
    // The initial value's first byte, after the create flag (byte 27).
    arith_stray_initial[28] = 1;
    let mut bad_flag = get.clone();
    bad_flag[10] = 2;
    let mut no_keys = get.clone();
    no_keys.truncate(22);
    no_keys[20..22].copy_from_slice(&0u16.to_le_bytes());
    let mut stray_expiry = get.clone();
    stray_expiry[12] = 1;
    let mut bad_mode = store.clone();
    bad_mode[10] = 7;
    let map = ShardMap::new(
        3,
        (1..=3)
            .map(|n| Member {
                node: NodeId(n),
                shard_ebb: 32_768 + 64 * n,
            })
            .collect(),
    )
    .unwrap()
    .encode();
    let values = ForwardReply::Values(vec![entry(3), None, entry(0)])
        .encode()
        .unwrap();
    vec![
        ("get", input(0, &get)),
        (
            "gat",
            input(
                0,
                &request(Command::Get {
                    cas: false,
                    touch: Some(-1),
                    keys: vec![b"k"],
                }),
            ),
        ),
        ("store", input(10, &store)),
        (
            "delete",
            input(0, &request(Command::Delete { cas: 7, key: b"d" })),
        ),
        (
            "arith",
            input(
                0,
                &request(Command::Arith {
                    incr: false,
                    delta: u64::MAX,
                    cas: 0,
                    create: None,
                    key: b"n",
                }),
            ),
        ),
        (
            "arith_create",
            input(
                0,
                &request(Command::Arith {
                    incr: true,
                    delta: 1,
                    cas: 3,
                    create: Some(Create {
                        initial: 10,
                        exptime: 60,
                    }),
                    key: b"n",
                }),
            ),
        ),
        ("arith_stray_initial", input(0, &arith_stray_initial)),
        ("flush", input(0, &request(Command::Flush { delay: 0 }))),
        (
            "meta_set",
            input(
                4,
                &request(Command::Meta {
                    line: b"ms key 2 T0 F5 q\r\n",
                }),
            ),
        ),
        ("meta_no_newline", input(0, &meta_no_newline)),
        (
            "flush_with_payload",
            input(1, &request(Command::Flush { delay: 5 })),
        ),
        (
            "touch",
            input(
                0,
                &request(Command::Touch {
                    exptime: 30,
                    key: b"t",
                }),
            ),
        ),
        ("bad_version", input(0, &bad_version)),
        ("bad_flag", input(0, &bad_flag)),
        ("no_keys", input(0, &no_keys)),
        ("stray_expiry", input(0, &stray_expiry)),
        ("bad_mode", input(0, &bad_mode)),
        ("truncated", input(0, &get[..15])),
        ("payload_on_get", input(1, &get)),
        ("values", input(3, &values)),
        ("values_short_payload", input(2, &values)),
        (
            "wrong_epoch",
            input(0, &ForwardReply::WrongEpoch(8).encode().unwrap()),
        ),
        (
            "number",
            input(
                0,
                &ForwardReply::Number { value: 42, cas: 6 }.encode().unwrap(),
            ),
        ),
        (
            "stored",
            input(0, &ForwardReply::Stored(12).encode().unwrap()),
        ),
        (
            "flushed",
            input(0, &ForwardReply::Flushed.encode().unwrap()),
        ),
        (
            "meta_reply",
            input(7, &ForwardReply::Meta.encode().unwrap()),
        ),
        ("unknown_status", input(0, &[2, 99])),
        ("shard_map", map.clone()),
        ("shard_map_truncated", map[..map.len() - 3].to_vec()),
        ("empty", vec![]),
    ]
}

#[test]
fn the_forward_fuzz_corpus_replays_cleanly() {
    let seeds = seeds();
    ebb_testbed::fuzz_corpus::replay(&corpus_dir(), &seeds, "EBB_WRITE_FORWARD_CORPUS", |data| {
        let _ = run(data);
    });
}

#[test]
fn the_seeds_do_what_they_are_named_for() {
    let outcome = |name: &str| {
        let (_, data) = seeds().into_iter().find(|(n, _)| *n == name).unwrap();
        run(&data)
    };
    let request = |name: &str| outcome(name).request.unwrap();
    let reply = |name: &str| outcome(name).reply.unwrap();
    for good in [
        "get",
        "gat",
        "store",
        "delete",
        "arith",
        "arith_create",
        "touch",
        "flush",
        "meta_set",
    ] {
        assert_eq!(request(good), Ok(()), "{good}");
    }
    assert_eq!(
        request("bad_version"),
        Err(ForwardError::Version { found: 9 })
    );
    assert_eq!(
        request("bad_flag"),
        Err(ForwardError::BadFlag {
            field: "cas",
            value: 2
        })
    );
    assert_eq!(request("no_keys"), Err(ForwardError::KeyCount { count: 0 }));
    assert_eq!(
        request("stray_expiry"),
        Err(ForwardError::ExpiryWithoutTouch)
    );
    assert_eq!(
        request("bad_mode"),
        Err(ForwardError::UnknownMode { mode: 7 })
    );
    assert_eq!(
        request("truncated"),
        Err(ForwardError::Truncated {
            needed: 20,
            available: 15
        })
    );
    assert_eq!(
        request("payload_on_get"),
        Err(ForwardError::UnexpectedPayload { len: 1 })
    );
    assert_eq!(reply("values"), Ok(()));
    assert_eq!(
        reply("values_short_payload"),
        Err(ForwardError::PayloadMismatch {
            said: 3,
            payload: 2
        })
    );
    assert_eq!(reply("wrong_epoch"), Ok(()));
    assert_eq!(reply("number"), Ok(()));
    assert_eq!(reply("stored"), Ok(()));
    assert_eq!(reply("flushed"), Ok(()));
    assert_eq!(reply("meta_reply"), Ok(()));
    assert_eq!(
        request("meta_no_newline"),
        Err(ForwardError::BadMetaLine { len: 7 })
    );
    assert_eq!(
        request("arith_stray_initial"),
        Err(ForwardError::CreateFieldsWithoutCreate)
    );
    assert_eq!(
        request("flush_with_payload"),
        Err(ForwardError::UnexpectedPayload { len: 1 })
    );
    assert_eq!(
        reply("unknown_status"),
        Err(ForwardError::UnknownStatus { status: 99 })
    );
    assert_eq!(outcome("shard_map").shard_map, Some(Ok(())));
    assert_eq!(
        outcome("shard_map_truncated").shard_map,
        Some(Err(ShardMapError::Truncated {
            needed: 39,
            available: 36
        }))
    );
    assert_eq!(outcome("empty"), Outcome::default());
}
