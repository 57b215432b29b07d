//! Paths on the command line are the user's: relative to the directory
//! they ran `./ebb` from. The script changes to the repository root before
//! running this CLI (so builds and children find the workspace), and
//! passes the directory it was started in as [`CALLER_DIR_ENV`].

use std::path::{Path, PathBuf};

/// The environment variable `./ebb` sets to the directory it was run
/// from (its `$PWD` before changing to the repository root).
pub(crate) const CALLER_DIR_ENV: &str = "EBB_CALLER_DIR";

/// The directory the user ran `./ebb` from: [`CALLER_DIR_ENV`] when it
/// names an absolute path, else this process's working directory (the
/// CLI run by hand, not through `./ebb`).
pub(crate) fn caller_dir() -> Option<PathBuf> {
    std::env::var_os(CALLER_DIR_ENV)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::current_dir().ok())
}

/// `path` as the user meant it: an absolute path as it is, a relative one
/// joined to `caller_dir` (kept relative only when that is unknown).
pub(crate) fn from_caller(path: &Path, caller_dir: Option<&Path>) -> PathBuf {
    match caller_dir {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_path_is_the_callers_and_an_absolute_one_stays() {
        let caller = Some(Path::new("/home/user/work"));
        assert_eq!(
            from_caller(Path::new("data"), caller),
            Path::new("/home/user/work/data")
        );
        assert_eq!(
            from_caller(Path::new("../data"), caller),
            Path::new("/home/user/work/../data")
        );
        assert_eq!(
            from_caller(Path::new("/srv/data"), caller),
            Path::new("/srv/data")
        );
        assert_eq!(from_caller(Path::new("data"), None), Path::new("data"));
    }
}
