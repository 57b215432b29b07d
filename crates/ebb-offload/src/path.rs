//! Which paths a request may name, checked by the server before it
//! resolves anything (and by the tests): relative to the shared
//! directory, `/`-separated, no `..`. The server then resolves what
//! passes with `openat2(RESOLVE_BENEATH)`, which also refuses symlinks
//! pointing out (see `ebb-offload-host`): this check gives `..` and
//! absolute paths their own error before any system call.

use crate::FsError;

/// The longest path a request carries, in bytes. Two of them (a rename)
/// and the fixed fields fit in the Messenger's default control limit of
/// 4 KiB; Linux's own `PATH_MAX` is 4096 with the NUL.
pub const MAX_PATH_LEN: usize = 2000;

/// Checks `path` names something inside the shared directory: `.` is the
/// directory itself.
///
/// # Errors
///
/// [`FsError::InvalidPath`]: empty or holding a NUL byte;
/// [`FsError::NameTooLong`]: over [`MAX_PATH_LEN`]; [`FsError::Escape`]:
/// absolute, or with a `..` component (even one that would come back in:
/// what it means depends on symlinks, so it is never guessed).
pub fn check_path(path: &str) -> Result<(), FsError> {
    if path.is_empty() || path.contains('\0') {
        return Err(FsError::InvalidPath);
    }
    if path.len() > MAX_PATH_LEN {
        return Err(FsError::NameTooLong);
    }
    if path.starts_with('/') || path.split('/').any(|component| component == "..") {
        return Err(FsError::Escape);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn relative_paths_pass_and_escapes_do_not() {
        for good in [
            ".", "a", "a/b", "a/./b", "a//b", "a/b/", "..a", "a..", "a/...b",
        ] {
            assert_eq!(check_path(good), Ok(()), "{good}");
        }
        for escape in [
            "/",
            "/etc/passwd",
            "..",
            "../x",
            "a/../../x",
            "a/..",
            "a/../b",
        ] {
            assert_eq!(check_path(escape), Err(FsError::Escape), "{escape}");
        }
        assert_eq!(check_path(""), Err(FsError::InvalidPath));
        assert_eq!(check_path("a\0b"), Err(FsError::InvalidPath));
        let long: String = core::iter::repeat_n('x', MAX_PATH_LEN + 1).collect();
        assert_eq!(check_path(&long), Err(FsError::NameTooLong));
        assert_eq!(check_path(&long[1..]), Ok(()));
    }
}
