//! A cargo-fuzz target's seed corpus replayed as an ordinary test on
//! stable (the fuzz targets themselves need nightly): every file of the
//! corpus goes through the target's checks, and the named seeds the test
//! defines can rewrite the corpus when asked.

use std::fs;
use std::path::{Path, PathBuf};

/// Runs `run` on every file of the corpus directory `dir` (sorted by
/// name), after writing `seeds` there (file name, contents) when the
/// variable `write_env` is set. Panics (fails the test) when the
/// directory cannot be read or holds fewer files than `seeds`.
pub fn replay(dir: &Path, seeds: &[(&str, Vec<u8>)], write_env: &str, mut run: impl FnMut(&[u8])) {
    if std::env::var_os(write_env).is_some() {
        fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for (name, data) in seeds {
            fs::write(dir.join(name), data).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .collect();
    files.sort();
    assert!(
        files.len() >= seeds.len(),
        "only {} corpus files in {} for {} seeds (rewrite them with {write_env}=1)",
        files.len(),
        dir.display(),
        seeds.len()
    );
    for path in &files {
        run(&fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    }
}
