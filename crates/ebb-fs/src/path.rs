//! Which paths the interface takes: relative to the file system's root,
//! `/`-separated, no `..`. Every backend checks them the same way before
//! it resolves anything, so a path means the same thing wherever the
//! files are (a remote backend then lets its kernel resolve what passes,
//! which also refuses symlinks pointing out: see `ebb-offload-host`).

use crate::ErrorKind;

/// The longest path the interface carries, in bytes: two of them (a
/// rename) and a request's fixed fields fit in the Messenger's default
/// control limit of 4 KiB; Linux's own `PATH_MAX` is 4096 with the NUL.
pub const MAX_PATH_LEN: usize = 2000;

/// Checks `path` names something inside the file system: `.` is its root.
///
/// # Errors
///
/// [`ErrorKind::InvalidPath`]: empty or holding a NUL byte;
/// [`ErrorKind::NameTooLong`]: over [`MAX_PATH_LEN`];
/// [`ErrorKind::Escape`]: absolute, or with a `..` component (even one
/// that would come back in: what it means depends on symlinks, so it is
/// never guessed).
pub fn check_path(path: &str) -> Result<(), ErrorKind> {
    if path.is_empty() || path.contains('\0') {
        return Err(ErrorKind::InvalidPath);
    }
    if path.len() > MAX_PATH_LEN {
        return Err(ErrorKind::NameTooLong);
    }
    if path.starts_with('/') || path.split('/').any(|component| component == "..") {
        return Err(ErrorKind::Escape);
    }
    Ok(())
}

/// The names a checked path walks through from the root, without the
/// empty and `.` components (`a//./b/` is `a`, `b`; `.` is none).
pub fn components(path: &str) -> impl Iterator<Item = &str> {
    path.split('/')
        .filter(|component| !component.is_empty() && *component != ".")
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;
    use alloc::vec::Vec;

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
            assert_eq!(check_path(escape), Err(ErrorKind::Escape), "{escape}");
        }
        assert_eq!(check_path(""), Err(ErrorKind::InvalidPath));
        assert_eq!(check_path("a\0b"), Err(ErrorKind::InvalidPath));
        let long: String = core::iter::repeat_n('x', MAX_PATH_LEN + 1).collect();
        assert_eq!(check_path(&long), Err(ErrorKind::NameTooLong));
        assert_eq!(check_path(&long[1..]), Ok(()));
    }

    #[test]
    fn components_skip_empty_and_dot_names() {
        let names = |path| components(path).collect::<Vec<_>>();
        assert_eq!(names("a//./b/"), ["a", "b"]);
        assert!(names(".").is_empty());
        assert_eq!(names("..a/b"), ["..a", "b"]);
    }
}
