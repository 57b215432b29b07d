//! Replays the seed corpus of the `text_request` fuzz target
//! (`fuzz/corpus/text_request/`) through the text handler on stable, with
//! the fuzz target's checks: no panic, nothing consumed beyond what was
//! given, no reply to an incomplete request, and the same replies whether
//! the stream arrives at once or in reads of the size its first byte
//! chooses.

mod text_support;

use std::fs;
use std::path::Path;

use text_support::Harness;

#[test]
fn the_text_fuzz_corpus_replays_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/text_request");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|error| panic!("{}: {error}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 20,
        "only {} corpus files in {}",
        files.len(),
        dir.display()
    );
    let mut replied = 0;
    for path in &files {
        let data = fs::read(path).unwrap();
        let Some((&first, stream)) = data.split_first() else {
            continue;
        };
        let read = usize::from(first % 32) + 1;
        let whole = Harness::new().deliver([stream]);
        let split = Harness::new().deliver(stream.chunks(read));
        assert!(whole.left <= stream.len(), "{}", path.display());
        assert_eq!(
            whole.out,
            split.out,
            "{}: replies depend on how the stream was cut",
            path.display()
        );
        assert_eq!(whole.closed, split.closed, "{}", path.display());
        if !whole.out.is_empty() {
            replied += 1;
        }
    }
    assert!(
        replied * 2 > files.len(),
        "most seeds should get replies ({replied} of {})",
        files.len()
    );
}

#[test]
fn a_long_line_without_newline_closes_but_a_multiget_waits() {
    let run = Harness::new().deliver([&[b'x'; 2049][..]]);
    assert!(run.closed);
    let short = Harness::new().deliver([&[b'x'; 2048][..]]);
    assert!(!short.closed && short.out.is_empty() && short.left == 2048);
    let mut multiget = b"get ".to_vec();
    multiget.extend(std::iter::repeat_n(b"k ", 2000).flatten());
    let run = Harness::new().deliver([&multiget[..]]);
    assert!(!run.closed && run.out.is_empty());
}

#[test]
fn pipelined_requests_in_one_read_all_get_replies() {
    let h = Harness::new();
    let out = h.run(b"set a 0 0 3\r\nabc\r\nset b 5 0 0\r\n\r\nget a b c\r\nmn\r\n");
    assert_eq!(
        out,
        "STORED\r\nSTORED\r\nVALUE a 0 3\r\nabc\r\nVALUE b 5 0\r\n\r\nEND\r\nMN\r\n"
    );
}
