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

/// The longest name (one component), in bytes: Linux's `NAME_MAX`.
pub const MAX_NAME_LEN: usize = 255;

/// Checks `path` names something inside the file system: `.` is its root.
///
/// # Errors
///
/// [`ErrorKind::InvalidPath`]: empty or holding a NUL byte;
/// [`ErrorKind::NameTooLong`]: over [`MAX_PATH_LEN`], or a name over
/// [`MAX_NAME_LEN`];
/// [`ErrorKind::Escape`]: absolute, or with a `..` component (even one
/// that would come back in: what it means depends on symlinks, so it is
/// never guessed).
pub fn check_path(path: &str) -> Result<(), ErrorKind> {
    if path.is_empty() || path.contains('\0') {
        return Err(ErrorKind::InvalidPath);
    }
    if path.len() > MAX_PATH_LEN || path.split('/').any(|name| name.len() > MAX_NAME_LEN) {
        return Err(ErrorKind::NameTooLong);
    }
    if path.starts_with('/') || path.split('/').any(|component| component == "..") {
        return Err(ErrorKind::Escape);
    }
    Ok(())
}

/// Whether a checked path can only name a directory: it ends in `/`, or
/// its last component is `.` (path_resolution(7): a trailing slash asks
/// for a directory; `f/.` looks `.` up in `f`, which must be one).
#[must_use]
pub fn names_directory(path: &str) -> bool {
    path.ends_with('/') || path == "." || path.ends_with("/.")
}

/// The last name of a checked path, for the calls that act on a name
/// rather than on what it resolves to (unlink, mkdir, rename, a create).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastName<'p> {
    /// The directory holding it (`.` for the root).
    pub parent: &'p str,
    /// The name, without slashes.
    pub name: &'p str,
    /// Whether slashes followed it (the name must then be a directory).
    pub trailing_slash: bool,
}

/// Splits `path` into its parent directory and last name.
///
/// # Errors
///
/// [`check_path`]'s; [`ErrorKind::InvalidPath`] when the path names a
/// directory through `.` (`.`, `a/.`): the directory itself has no name
/// to act on here.
pub fn last_name(path: &str) -> Result<LastName<'_>, ErrorKind> {
    check_path(path)?;
    let trimmed = path.trim_end_matches('/');
    let (parent, name) = match trimmed.rsplit_once('/') {
        Some((parent, name)) => (parent.trim_end_matches('/'), name),
        None => (".", trimmed),
    };
    if name.is_empty() || name == "." {
        return Err(ErrorKind::InvalidPath);
    }
    Ok(LastName {
        parent: if parent.is_empty() { "." } else { parent },
        name,
        trailing_slash: trimmed.len() < path.len(),
    })
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
        // Names of 9 bytes and a slash, MAX_PATH_LEN + 1 bytes in all.
        let long: String = (0..=MAX_PATH_LEN)
            .map(|i| if i % 10 == 9 { '/' } else { 'x' })
            .collect();
        assert_eq!(check_path(&long), Err(ErrorKind::NameTooLong));
        assert_eq!(check_path(&long[1..]), Ok(()));
    }

    #[test]
    fn a_name_over_name_max_is_too_long() {
        let name: String = core::iter::repeat_n('n', MAX_NAME_LEN).collect();
        assert_eq!(check_path(&name), Ok(()));
        assert_eq!(
            check_path(&alloc::format!("d/{name}n")),
            Err(ErrorKind::NameTooLong)
        );
    }

    #[test]
    fn trailing_slashes_and_dots_ask_for_a_directory() {
        for dir in ["d/", "d//", ".", "d/.", "d/./", "./"] {
            assert!(names_directory(dir), "{dir}");
        }
        for any in ["d", "d/.x", "d/x.", "..d"] {
            assert!(!names_directory(any), "{any}");
        }
    }

    #[test]
    fn the_last_name_is_split_off_its_directory() {
        let split = |path| last_name(path).map(|l| (l.parent, l.name, l.trailing_slash));
        assert_eq!(split("f"), Ok((".", "f", false)));
        assert_eq!(split("a/b/c"), Ok(("a/b", "c", false)));
        assert_eq!(split("a//c//"), Ok(("a", "c", true)));
        assert_eq!(split("./c"), Ok((".", "c", false)));
        for none in [".", "a/.", "./", "a/./"] {
            assert_eq!(split(none), Err(ErrorKind::InvalidPath), "{none}");
        }
        assert_eq!(split("../c"), Err(ErrorKind::Escape));
    }

    #[test]
    fn components_skip_empty_and_dot_names() {
        let names = |path| components(path).collect::<Vec<_>>();
        assert_eq!(names("a//./b/"), ["a", "b"]);
        assert!(names(".").is_empty());
        assert_eq!(names("..a/b"), ["..a", "b"]);
    }
}
