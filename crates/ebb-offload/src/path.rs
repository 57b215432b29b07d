//! Which paths a request may name: the FileSystem interface's own rule
//! ([`ebb_fs::check_path`]: relative to the shared directory,
//! `/`-separated, no `..`), checked by the server before it resolves
//! anything. The server then resolves what passes with
//! `openat2(RESOLVE_BENEATH)`, which also refuses symlinks pointing out
//! (see `ebb-offload-host`): this check gives `..` and absolute paths
//! their own error before any system call.

use crate::FsError;

/// [`ebb_fs::check_path`], with the protocol's error.
///
/// # Errors
///
/// [`FsError::InvalidPath`]: empty or holding a NUL byte;
/// [`FsError::NameTooLong`]: over [`ebb_fs::MAX_PATH_LEN`];
/// [`FsError::Escape`]: absolute, or with a `..` component.
pub fn check_path(path: &str) -> Result<(), FsError> {
    ebb_fs::check_path(path).map_err(FsError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interfaces_rule_with_the_protocols_errors() {
        assert_eq!(check_path("a/b"), Ok(()));
        assert_eq!(check_path("../x"), Err(FsError::Escape));
        assert_eq!(check_path(""), Err(FsError::InvalidPath));
    }
}
