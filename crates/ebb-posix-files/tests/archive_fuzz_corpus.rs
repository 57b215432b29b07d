//! Replays the seed corpus of the `archive` fuzz target
//! (`fuzz/corpus/archive/`) on stable, with the fuzz target's checks, and
//! checks each seed does what it is named for.
//! `EBB_WRITE_ARCHIVE_CORPUS=1 cargo test -p ebb-posix-files --test
//! archive_fuzz_corpus` rewrites the corpus from [`seeds`].

mod archive_support;

use std::path::{Path, PathBuf};

use archive_support::{archive, run};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/archive")
}

/// Named inputs, each with whether it loads.
fn seeds() -> Vec<(&'static str, Vec<u8>, bool)> {
    let tree = archive(&[
        (".", 0o040_755, b""),
        ("data", 0o040_755, b""),
        ("data/kv.db", 0o100_644, b"SQLite format 3\0"),
    ]);
    let mut truncated = tree.clone();
    truncated.truncate(tree.len() - 20);
    let mut bad_digit = tree.clone();
    bad_digit[10] = b'x';
    vec![
        ("tree", tree, true),
        ("empty", archive(&[]), true),
        ("truncated", truncated, false),
        ("bad_digit", bad_digit, false),
        (
            "climbing",
            archive(&[("a/../../b", 0o100_644, b"x")]),
            false,
        ),
        ("symlink", archive(&[("l", 0o120_777, b"t")]), false),
        (
            "file_then_dir",
            archive(&[("f", 0o100_644, b""), ("f/g", 0o100_644, b"")]),
            false,
        ),
    ]
}

#[test]
fn the_seed_corpus_replays_and_each_seed_does_what_it_is_named_for() {
    let dir = corpus_dir();
    if std::env::var_os("EBB_WRITE_ARCHIVE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes, _) in seeds() {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
    for (name, bytes, loads) in seeds() {
        assert_eq!(run(&bytes).is_ok(), loads, "seed {name}");
        let stored = std::fs::read(dir.join(name)).unwrap_or_else(|e| {
            panic!("corpus file {name}: {e} (rewrite with EBB_WRITE_ARCHIVE_CORPUS=1)")
        });
        assert_eq!(stored, bytes, "corpus file {name} is stale");
    }
    let mut replayed = 0;
    for file in std::fs::read_dir(&dir).unwrap() {
        let _ = run(&std::fs::read(file.unwrap().path()).unwrap());
        replayed += 1;
    }
    assert!(replayed >= seeds().len());
}
