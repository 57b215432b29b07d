//! The check every fuzz input gets, shared by the cargo-fuzz targets
//! (`fuzz/fuzz_targets/`) and the corpus replay (`tests/fuzz_corpus.rs`):
//! the first byte chooses a read size, the rest is a client's byte stream.
//! The handler must not panic, must consume no more than it was given
//! (checked by `Harness::drive`), and must reply the same, close the same
//! and leave the same bytes whether the stream arrives at once, in reads of
//! the chosen size, or byte by byte — unless the stream has a run of more
//! than 2048 bytes without `\n`: memcached closes on such a request line
//! when a read ends inside it and answers it when it arrives whole, and we
//! do as memcached does (`protocol/text/line.rs`, `LINE_MAX`).

use crate::handler_support::{Harness, Run};

/// Checks `data` against fresh servers from `server`; the run that got the
/// whole stream at once (`None` for empty input).
pub fn check(server: fn() -> Harness, data: &[u8]) -> Option<Run> {
    let (&first, stream) = data.split_first()?;
    let read = usize::from(first % 32) + 1;
    let whole = server().deliver([stream]);
    if has_long_line(stream) {
        return Some(whole);
    }
    let split = server().deliver(stream.chunks(read));
    let bytewise = server().deliver(stream.chunks(1));
    assert!(whole.left <= stream.len());
    for cut in [&split, &bytewise] {
        assert_eq!(whole.out, cut.out, "replies depend on the reads");
        assert_eq!(whole.closed, cut.closed, "closing depends on the reads");
    }
    if !whole.closed {
        assert_eq!(whole.left, split.left, "what is left depends on the reads");
    }
    Some(whole)
}

/// Whether `stream` has more than memcached's 2048 line bytes without a
/// `\n`, where the replies depend on the reads (see the module's notes).
fn has_long_line(stream: &[u8]) -> bool {
    stream.split(|&b| b == b'\n').any(|line| line.len() > 2048)
}
