//! Replaying a fuzz target's seed corpus on stable, shared by the corpus
//! tests of the `wire` and `map` targets.

use std::path::Path;

/// Replays `fuzz/corpus/TARGET` with the target's checks (`run`): first
/// writes `seeds` there when the variable `write_var` is set (to rewrite
/// the corpus after a change), then checks the corpus holds at least as
/// many files as there are seeds and runs each file
/// (`ebb_testbed::fuzz_corpus::replay`).
pub fn replay(
    target: &str,
    write_var: &str,
    seeds: &[(&'static str, Vec<u8>)],
    run: impl Fn(&[u8]),
) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    ebb_testbed::fuzz_corpus::replay(&dir, seeds, write_var, run);
}

/// The seed named `name`.
pub fn seed(seeds: &[(&'static str, Vec<u8>)], name: &str) -> Vec<u8> {
    seeds
        .iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no seed named {name}"))
        .1
        .clone()
}
