//! The check every fuzz input gets, shared by the cargo-fuzz targets
//! (`fuzz/fuzz_targets/`) and the corpus replay (`tests/fuzz_corpus.rs`):
//! the first byte chooses a read size, the rest is a client's byte stream.
//! The handler must not panic, must consume no more than it was given
//! (checked by `Harness::drive`), and must reply the same, close the same
//! and leave the same bytes whether the stream arrives at once, in reads of
//! the chosen size, or byte by byte.

use crate::handler_support::{Harness, Run};

/// Checks `data` against fresh servers from `server`; the run that got the
/// whole stream at once (`None` for empty input).
pub fn check(server: fn() -> Harness, data: &[u8]) -> Option<Run> {
    let (&first, stream) = data.split_first()?;
    let read = usize::from(first % 32) + 1;
    let whole = server().deliver([stream]);
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
