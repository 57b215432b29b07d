//! Why a file operation failed, the same words for every backend. A
//! backend's own error type says more (a remote one names the node that
//! did not answer) and maps to an [`ErrorKind`]; the POSIX personality
//! returns the kind's errno.

use core::fmt;

/// What went wrong, whatever the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// ENOENT: no such file or directory.
    NotFound,
    /// EACCES: the backend's permissions refuse it.
    PermissionDenied,
    /// EEXIST: the file exists (an exclusive create, a mkdir).
    Exists,
    /// ENOTDIR: a component of the path is not a directory.
    NotDir,
    /// EISDIR: the path is a directory (open, unlink).
    IsDir,
    /// ENOTEMPTY: the directory is not empty (rename over it).
    NotEmpty,
    /// EBADF: the handle is not open (closed, or never opened).
    BadHandle,
    /// The path leaves the file system (`..`, an absolute path, or a
    /// symlink pointing out): [`crate::check_path`].
    Escape,
    /// The path is empty or holds a NUL byte.
    InvalidPath,
    /// An argument the backend refuses (a mode with set-ID bits, flags it
    /// does not know).
    InvalidArgument,
    /// EFBIG: more bytes than one request or one file may hold.
    TooLarge,
    /// ENAMETOOLONG: the path is longer than the backend allows.
    NameTooLong,
    /// EMFILE: as many files are open as the backend allows.
    TooManyOpen,
    /// The path names something that is neither a regular file nor a
    /// directory (a FIFO or device could block the backend).
    NotAFile,
    /// Another Linux error, by its errno.
    Io(u16),
    /// The file system cannot be reached: a remote backend's node is
    /// lost, unreachable, did not answer in time, or answered garbage.
    Unavailable,
}

impl ErrorKind {
    /// The Linux errno (`include/uapi/asm-generic/errno-base.h`,
    /// `errno.h`) a system call returns for it.
    #[must_use]
    pub fn errno(self) -> u16 {
        match self {
            // Linux's open("") is ENOENT; a NUL cannot reach a system
            // call, so ENOENT covers both.
            ErrorKind::NotFound | ErrorKind::InvalidPath => 2,
            ErrorKind::NotAFile => 6,  // ENXIO, as open(2) of a socket
            ErrorKind::BadHandle => 9, // EBADF
            ErrorKind::PermissionDenied | ErrorKind::Escape => 13, // EACCES
            ErrorKind::Exists => 17,   // EEXIST
            ErrorKind::NotDir => 20,   // ENOTDIR
            ErrorKind::IsDir => 21,    // EISDIR
            ErrorKind::InvalidArgument => 22, // EINVAL
            ErrorKind::TooManyOpen => 24, // EMFILE
            ErrorKind::TooLarge => 27, // EFBIG
            ErrorKind::NameTooLong => 36, // ENAMETOOLONG
            ErrorKind::NotEmpty => 39, // ENOTEMPTY
            ErrorKind::Io(errno) => errno,
            ErrorKind::Unavailable => 5, // EIO
        }
    }

    /// The kind a Linux errno names (the reverse of [`ErrorKind::errno`]
    /// where it is one to one; any other errno is [`ErrorKind::Io`]).
    #[must_use]
    pub fn from_errno(errno: u16) -> ErrorKind {
        match errno {
            1 | 13 => ErrorKind::PermissionDenied, // EPERM, EACCES
            2 => ErrorKind::NotFound,
            6 => ErrorKind::NotAFile,
            9 => ErrorKind::BadHandle,
            17 => ErrorKind::Exists,
            20 => ErrorKind::NotDir,
            21 => ErrorKind::IsDir,
            22 => ErrorKind::InvalidArgument,
            23 | 24 => ErrorKind::TooManyOpen, // ENFILE, EMFILE
            27 => ErrorKind::TooLarge,
            36 => ErrorKind::NameTooLong,
            39 => ErrorKind::NotEmpty,
            other => ErrorKind::Io(other),
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::NotFound => f.write_str("no such file or directory (ENOENT)"),
            ErrorKind::PermissionDenied => f.write_str("permission denied (EACCES)"),
            ErrorKind::Exists => f.write_str("the file exists (EEXIST)"),
            ErrorKind::NotDir => {
                f.write_str("a component of the path is not a directory (ENOTDIR)")
            }
            ErrorKind::IsDir => f.write_str("the path is a directory (EISDIR)"),
            ErrorKind::NotEmpty => f.write_str("the directory is not empty (ENOTEMPTY)"),
            ErrorKind::BadHandle => f.write_str("the handle is not open (EBADF)"),
            ErrorKind::Escape => f.write_str(
                "the path leaves the file system (`..`, an absolute path or a symlink pointing \
                 out): refused",
            ),
            ErrorKind::InvalidPath => f.write_str("the path is empty or holds a NUL byte"),
            ErrorKind::InvalidArgument => f.write_str("an argument the file system refuses"),
            ErrorKind::TooLarge => f.write_str("more bytes than the file system takes (EFBIG)"),
            ErrorKind::NameTooLong => f.write_str("the path is too long (ENAMETOOLONG)"),
            ErrorKind::TooManyOpen => f.write_str("as many files are open as may be (EMFILE)"),
            ErrorKind::NotAFile => {
                f.write_str("the path is neither a regular file nor a directory: refused")
            }
            ErrorKind::Io(errno) => write!(f, "Linux error {errno}"),
            ErrorKind::Unavailable => f.write_str("the file system cannot be reached"),
        }
    }
}

impl core::error::Error for ErrorKind {}

/// A backend's error: anything it says, and the [`ErrorKind`] it is.
pub trait FileSystemError: fmt::Display + fmt::Debug {
    /// What kind of failure it is.
    fn kind(&self) -> ErrorKind;
}

impl FileSystemError for ErrorKind {
    fn kind(&self) -> ErrorKind {
        *self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_go_there_and_back_where_one_to_one() {
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::PermissionDenied,
            ErrorKind::Exists,
            ErrorKind::NotDir,
            ErrorKind::IsDir,
            ErrorKind::NotEmpty,
            ErrorKind::BadHandle,
            ErrorKind::InvalidArgument,
            ErrorKind::TooLarge,
            ErrorKind::NameTooLong,
            ErrorKind::TooManyOpen,
            ErrorKind::NotAFile,
            ErrorKind::Io(28),
        ] {
            assert_eq!(ErrorKind::from_errno(kind.errno()), kind, "{kind}");
        }
        assert_eq!(ErrorKind::Escape.errno(), 13);
        assert_eq!(ErrorKind::Unavailable.errno(), 5);
        assert_eq!(ErrorKind::from_errno(1), ErrorKind::PermissionDenied);
    }
}
