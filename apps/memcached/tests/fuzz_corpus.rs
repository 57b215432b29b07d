//! Replays the seed corpora of the fuzz targets (`fuzz/corpus/text_request/`
//! and `fuzz/corpus/binary_request/`) through the handlers on stable, with
//! the fuzz targets' checks: no panic, nothing consumed beyond what was
//! given, no reply to an incomplete request, and the same replies whether
//! the stream arrives at once, in reads of the size its first byte
//! chooses, or byte by byte.

mod fuzz_check;
mod handler_support;

use std::fs;
use std::path::Path;

use handler_support::Harness;

/// Replays every seed of `fuzz/corpus/TARGET` through fresh servers from
/// `server`; returns how many seeds got a reply, and how many there are.
fn replay(target: &str, server: fn() -> Harness) -> (usize, usize) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
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
        let run = std::panic::catch_unwind(|| fuzz_check::check(server, &data))
            .unwrap_or_else(|_| panic!("{}: the fuzz check failed", path.display()));
        if run.is_some_and(|run| !run.out.is_empty()) {
            replied += 1;
        }
    }
    (replied, files.len())
}

#[test]
fn the_text_fuzz_corpus_replays_cleanly() {
    let (replied, seeds) = replay("text_request", Harness::text);
    assert!(
        replied * 2 > seeds,
        "most seeds should get replies ({replied} of {seeds})"
    );
}

#[test]
fn the_binary_fuzz_corpus_replays_cleanly() {
    let (replied, seeds) = replay("binary_request", Harness::binary);
    // The corpus is made of requests the server answers (a seed that gets
    // no reply at all would be a weak seed).
    assert!(
        replied + 2 >= seeds,
        "only {replied} of {seeds} seeds got replies"
    );
}

#[test]
fn a_long_line_without_newline_closes_but_a_multiget_waits() {
    let run = Harness::text().deliver([&[b'x'; 2049][..]]);
    assert!(run.closed);
    let short = Harness::text().deliver([&[b'x'; 2048][..]]);
    assert!(!short.closed && short.out.is_empty() && short.left == 2048);
    let mut multiget = b"get ".to_vec();
    multiget.extend(std::iter::repeat_n(b"k ", 2000).flatten());
    let run = Harness::text().deliver([&multiget[..]]);
    assert!(!run.closed && run.out.is_empty());
}

#[test]
fn a_long_line_is_answered_when_it_arrives_whole_and_closes_when_split_as_memcached_does() {
    // memcached 1.6.18 checks for `\n` in what one read brought: 3000
    // bytes and their `\n` in one read are an unknown command (`ERROR`);
    // a read that ends after 2048 bytes of them closes the connection.
    let mut long = vec![b'x'; 3000];
    long.extend_from_slice(b"\r\nversion\r\n");
    let whole = Harness::text().deliver([&long[..]]);
    assert!(!whole.closed);
    assert!(
        whole.out.starts_with(b"ERROR\r\nVERSION "),
        "{:?}",
        whole.out
    );
    let split = Harness::text().deliver([&long[..2100], &long[2100..]]);
    assert!(split.closed && split.out.is_empty());
}

#[test]
fn pipelined_requests_in_one_read_all_get_replies() {
    let h = Harness::text();
    let out = h.run(b"set a 0 0 3\r\nabc\r\nset b 5 0 0\r\n\r\nget a b c\r\nmn\r\n");
    assert_eq!(
        out,
        "STORED\r\nSTORED\r\nVALUE a 0 3\r\nabc\r\nVALUE b 5 0\r\n\r\nEND\r\nMN\r\n"
    );
}
