//! Paths: a relative path joined to a base, then `.`, `..` and repeated
//! slashes resolved lexically (the tree has no symbolic links, so this is
//! what the kernel's walk would find; `..` of the root is the root,
//! path_resolution(7)).

use alloc::vec::Vec;

use ebb_posix::errno::{ENAMETOOLONG, ENOENT};

/// Linux's PATH_MAX (with its NUL) and NAME_MAX.
pub const PATH_MAX: usize = 4096;
/// The longest name of one component.
pub const NAME_MAX: usize = 255;

/// The components of `path` taken from `base` (an absolute, resolved
/// path's components) when `path` is relative: `ENOENT` for an empty
/// path (as Linux), `ENAMETOOLONG` past the limits.
pub fn resolve<'a>(base: &[&'a [u8]], path: &'a [u8]) -> Result<Vec<&'a [u8]>, isize> {
    if path.is_empty() {
        return Err(ENOENT);
    }
    if path.len() >= PATH_MAX {
        return Err(ENAMETOOLONG);
    }
    let mut parts: Vec<&[u8]> = if path[0] == b'/' {
        Vec::new()
    } else {
        base.to_vec()
    };
    for part in path.split(|&byte| byte == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop();
            }
            name if name.len() > NAME_MAX => return Err(ENAMETOOLONG),
            name => parts.push(name),
        }
    }
    Ok(parts)
}

/// Whether `path` ends in a slash (then it must name a directory).
#[must_use]
pub fn wants_directory(path: &[u8]) -> bool {
    path.last() == Some(&b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_and_absolute_paths_resolve() {
        let base: [&[u8]; 2] = [b"tmp", b"d"];
        assert_eq!(resolve(&base, b"f").unwrap(), [&b"tmp"[..], b"d", b"f"]);
        assert_eq!(
            resolve(&base, b"../e/./g//").unwrap(),
            [&b"tmp"[..], b"e", b"g"]
        );
        assert_eq!(resolve(&base, b"/x/../../y").unwrap(), [&b"y"[..]]);
        assert!(resolve(&base, b"/").unwrap().is_empty());
        assert_eq!(resolve(&base, b""), Err(ENOENT));
        assert_eq!(resolve(&base, &[b'a'; 256]), Err(ENAMETOOLONG));
        assert_eq!(resolve(&base, &[b'/'; 4096]), Err(ENAMETOOLONG));
        assert!(wants_directory(b"d/"));
        assert!(!wants_directory(b"d"));
    }
}
