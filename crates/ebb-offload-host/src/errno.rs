//! Linux errors (errno(3)) as the FileSystem Ebb's typed errors.

use ebb_offload::FsError;
use rustix::io::Errno;

/// What an operation's `errno` means to the client.
pub(crate) fn fs_error(errno: Errno) -> FsError {
    match errno {
        Errno::NOENT => FsError::NotFound,
        Errno::ACCESS | Errno::PERM => FsError::PermissionDenied,
        Errno::EXIST => FsError::Exists,
        Errno::NOTDIR => FsError::NotDir,
        Errno::ISDIR => FsError::IsDir,
        Errno::NOTEMPTY => FsError::NotEmpty,
        Errno::NAMETOOLONG => FsError::NameTooLong,
        Errno::MFILE | Errno::NFILE => FsError::TooManyOpen,
        other => FsError::Io(u16::try_from(other.raw_os_error()).unwrap_or(u16::MAX)),
    }
}

/// What resolving a path's `errno` means: as [`fs_error`], except that
/// EXDEV is openat2(2)'s "the path would leave the directory"
/// (RESOLVE_BENEATH: a `..` above it, an absolute path or symlink, or a
/// symlink whose target lies outside).
pub(crate) fn resolve_error(errno: Errno) -> FsError {
    if errno == Errno::XDEV {
        FsError::Escape
    } else {
        fs_error(errno)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_map_to_their_kinds() {
        assert_eq!(fs_error(Errno::NOENT), FsError::NotFound);
        assert_eq!(fs_error(Errno::ACCESS), FsError::PermissionDenied);
        assert_eq!(fs_error(Errno::PERM), FsError::PermissionDenied);
        assert_eq!(fs_error(Errno::NOTEMPTY), FsError::NotEmpty);
        assert_eq!(fs_error(Errno::NOSPC), FsError::Io(28));
        // Only resolution reads EXDEV as an escape: rename(2) across
        // mounts inside the directory gives it too.
        assert_eq!(fs_error(Errno::XDEV), FsError::Io(18));
        assert_eq!(resolve_error(Errno::XDEV), FsError::Escape);
        assert_eq!(resolve_error(Errno::NOENT), FsError::NotFound);
    }
}
