//! Replays the seed corpus of the `request` fuzz target
//! (`fuzz/corpus/request/`) on stable, with the fuzz target's checks (see
//! `wire_support`), and checks the seeds do what they are named for.
//! `EBB_WRITE_OFFLOAD_CORPUS=1 cargo test --release -p ebb-offload --test
//! wire_fuzz_corpus` rewrites the corpus from [`seeds`].

mod wire_support;

use std::path::{Path, PathBuf};

use ebb_offload::{
    encode_listing, DecodeError, DirEntry, FileKind, FsError, Handle, OpenFlags, Reply, Request,
    Stat,
};
use wire_support::run;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/request")
}

/// An input: the message number, then the bytes.
fn input(number: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![number];
    out.extend_from_slice(bytes);
    out
}

fn request(request: &Request) -> Vec<u8> {
    input(
        u8::try_from(request.number().0).unwrap(),
        &request.encode().unwrap(),
    )
}

/// The seeds: named inputs covering each operation and each check.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let open = request(&Request::Open {
        path: "data/in.bin".into(),
        flags: OpenFlags::READ | OpenFlags::WRITE | OpenFlags::CREATE,
        mode: 0o644,
    });
    let mut bad_flags = open.clone();
    bad_flags[1] = 0x40;
    let mut bad_mode = open.clone();
    bad_mode[7] = 1;
    let mut not_utf8 = open.clone();
    *not_utf8.last_mut().unwrap() = 0xff;
    let mut trailing = request(&Request::Close { handle: Handle(3) });
    trailing.push(0);
    let mut reserved = request(&Request::Pwrite {
        handle: Handle(1),
        offset: 9,
    });
    reserved[5] = 1;
    let stat = Reply::Stat(Stat {
        kind: FileKind::File,
        mode: 0o600,
        size: 64 << 20,
        modified_secs: 1_700_000_000,
        modified_nanos: 5,
    })
    .encode();
    let mut listing = vec![2, 0];
    listing.extend_from_slice(&encode_listing(&[
        DirEntry {
            name: "a".into(),
            kind: FileKind::Dir,
        },
        DirEntry {
            name: "link".into(),
            kind: FileKind::Symlink,
        },
    ]));
    vec![
        ("open", open.clone()),
        ("open_bad_flags", bad_flags),
        ("open_bad_mode", bad_mode),
        ("open_path_not_utf8", not_utf8),
        ("open_truncated", open[..9].to_vec()),
        (
            "read",
            request(&Request::Read {
                handle: Handle(1),
                len: 4 << 20,
            }),
        ),
        (
            "pread",
            request(&Request::Pread {
                handle: Handle(1),
                len: 1,
                offset: u64::MAX,
            }),
        ),
        ("write", request(&Request::Write { handle: Handle(2) })),
        ("pwrite_reserved", reserved),
        (
            "stat_escape",
            request(&Request::Stat {
                path: "../etc/passwd".into(),
            }),
        ),
        ("readdir", request(&Request::ReadDir { path: ".".into() })),
        ("close_trailing", trailing),
        ("unlink", request(&Request::Unlink { path: "a/b".into() })),
        (
            "mkdir",
            request(&Request::Mkdir {
                path: "new".into(),
                mode: 0o755,
            }),
        ),
        (
            "rename",
            request(&Request::Rename {
                from: "a".into(),
                to: "b".into(),
            }),
        ),
        ("unknown_number", input(12, &[1, 2, 3, 4])),
        ("reply_stat", input(6, &stat)),
        (
            "reply_failed_io",
            input(3, &Reply::Failed(FsError::Io(5)).encode()),
        ),
        ("reply_unknown_status", input(3, &[99, 0, 0, 0])),
        ("listing", input(7, &listing)),
        ("listing_dotdot", input(7, &[1, 0, 2, 2, 0, b'.', b'.'])),
        ("empty", vec![]),
    ]
}

#[test]
fn the_request_fuzz_corpus_replays_cleanly() {
    ebb_testbed::fuzz_corpus::replay(
        &corpus_dir(),
        &seeds(),
        "EBB_WRITE_OFFLOAD_CORPUS",
        |data| {
            run(data);
        },
    );
}

#[test]
fn the_seeds_do_what_they_are_named_for() {
    let outcome = |name: &str| {
        let (_, data) = seeds().into_iter().find(|(n, _)| *n == name).unwrap();
        run(&data)
    };
    let request = |name: &str| outcome(name).request.unwrap();
    assert!(matches!(request("open"), Ok(Request::Open { .. })));
    assert_eq!(
        request("open_bad_flags"),
        Err(DecodeError::BadFlags { flags: 0x40 })
    );
    assert_eq!(
        request("open_bad_mode"),
        Err(DecodeError::BadMode {
            mode: 0o644 | 0x1_0000
        })
    );
    assert_eq!(request("open_path_not_utf8"), Err(DecodeError::PathNotUtf8));
    assert!(matches!(
        request("open_truncated"),
        Err(DecodeError::Truncated { .. })
    ));
    for ok in [
        "read",
        "pread",
        "write",
        "stat_escape",
        "readdir",
        "unlink",
        "mkdir",
        "rename",
    ] {
        assert!(request(ok).is_ok(), "{ok}: {:?}", request(ok));
    }
    assert_eq!(
        request("pwrite_reserved"),
        Err(DecodeError::Reserved { value: 1 })
    );
    assert_eq!(
        request("close_trailing"),
        Err(DecodeError::Trailing { extra: 1 })
    );
    assert_eq!(
        request("unknown_number"),
        Err(DecodeError::UnknownMessage { number: 12 })
    );
    assert!(matches!(
        outcome("reply_stat").reply,
        Some(Ok(Reply::Stat(Stat { size, .. }))) if size == 64 << 20
    ));
    assert_eq!(
        outcome("reply_failed_io").reply,
        Some(Ok(Reply::Failed(FsError::Io(5))))
    );
    assert_eq!(
        outcome("reply_unknown_status").reply,
        Some(Err(DecodeError::UnknownStatus {
            status: 99,
            errno: 0
        }))
    );
    assert_eq!(outcome("listing").listing, Some(Ok(2)));
    assert_eq!(
        outcome("listing_dotdot").listing,
        Some(Err(DecodeError::BadName))
    );
    assert_eq!(outcome("empty"), wire_support::Outcome::default());
}
