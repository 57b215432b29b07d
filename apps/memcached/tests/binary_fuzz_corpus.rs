//! Replays the seed corpus of the `binary_request` fuzz target
//! (`fuzz/corpus/binary_request/`) through the binary handler on stable,
//! with the fuzz target's checks: no panic, nothing consumed beyond what
//! was given, no reply to an incomplete request, and the same replies
//! whether the stream arrives at once or in reads of the size its first
//! byte chooses.

mod binary_support;

use std::fs;
use std::path::Path;

use binary_support::Harness;

#[test]
fn the_binary_fuzz_corpus_replays_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/binary_request");
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
        let bytewise = Harness::new().deliver(stream.chunks(1));
        let name = path.display();
        assert_eq!(whole.out, split.out, "{name}: replies depend on the reads");
        assert_eq!(
            whole.out, bytewise.out,
            "{name}: replies depend on the reads"
        );
        assert_eq!(whole.closed, split.closed, "{name}");
        assert_eq!(whole.closed, bytewise.closed, "{name}");
        if !whole.closed {
            assert_eq!(whole.left, split.left, "{name}");
        }
        if !whole.out.is_empty() {
            replied += 1;
        }
    }
    // The corpus is made of requests the server answers (a seed that gets
    // no reply at all would be a weak seed).
    assert!(
        replied + 2 >= files.len(),
        "only {replied} of {} seeds got replies",
        files.len()
    );
}
