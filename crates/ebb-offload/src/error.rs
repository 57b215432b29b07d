//! The FileSystem Ebb's errors. Each is a sentence; callers match on the
//! variants. [`FsError`]'s first variants travel on the wire as a status
//! code (the table in the README); the last ones are the client's own
//! (the Messenger failed, the call took too long, the reply was garbage).

use core::fmt;

use ebb_core::NodeId;
use ebb_fs::{ErrorKind, FileSystemError};
use ebb_messenger::MessengerError;

/// Why a file operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsError {
    /// Status 1, ENOENT: no such file or directory.
    NotFound,
    /// Status 2, EACCES or EPERM: the hosted node's permissions refuse it.
    PermissionDenied,
    /// Status 3, EEXIST: the file exists (an exclusive create, a mkdir).
    Exists,
    /// Status 4, ENOTDIR: a component of the path is not a directory.
    NotDir,
    /// Status 5, EISDIR: the path is a directory (open, unlink).
    IsDir,
    /// Status 6, ENOTEMPTY: the directory is not empty (rename over it).
    NotEmpty,
    /// Status 7: the handle is not one this node opened, or was closed.
    BadHandle,
    /// Status 8: the path leaves the shared directory (`..`, an absolute
    /// path, or a symlink pointing out of it).
    Escape,
    /// Status 9: the path is empty or holds a NUL byte.
    InvalidPath,
    /// Status 10: more bytes than one request may carry.
    TooLarge,
    /// Status 11, ENAMETOOLONG: the path is longer than the protocol or
    /// the hosted node allows.
    NameTooLong,
    /// Status 12, EMFILE: this node has as many files open as it may.
    TooManyOpen,
    /// Status 13: the request did not decode on the hosted node.
    BadRequest,
    /// Status 14: the path names something that is neither a regular file
    /// nor a directory (a FIFO or device could block the hosted node).
    NotAFile,
    /// Status 15: another Linux error, by its errno.
    Io(u16),
    /// No directory is shared: the hosted node serves no FileSystem.
    NotShared,
    /// The hosted node is lost (its launcher saw it end).
    NodeLost {
        /// The node.
        node: NodeId,
    },
    /// The Messenger could not carry the call (the hosted node is
    /// unreachable, the connection dropped, ...).
    Unreachable(MessengerError),
    /// No reply within the call's bound.
    TimedOut {
        /// The node called.
        node: NodeId,
        /// The bound, in milliseconds.
        waited_ms: u64,
    },
    /// The hosted node's reply did not decode.
    BadReply(DecodeError),
    /// Called off an Ebbflow core: the Messenger has no representative
    /// here.
    NotOnCore,
}

impl FsError {
    /// The status code on the wire, for the errors that travel (`None`
    /// for the client's own).
    #[must_use]
    pub fn code(&self) -> Option<(u16, u16)> {
        let status = match self {
            FsError::NotFound => 1,
            FsError::PermissionDenied => 2,
            FsError::Exists => 3,
            FsError::NotDir => 4,
            FsError::IsDir => 5,
            FsError::NotEmpty => 6,
            FsError::BadHandle => 7,
            FsError::Escape => 8,
            FsError::InvalidPath => 9,
            FsError::TooLarge => 10,
            FsError::NameTooLong => 11,
            FsError::TooManyOpen => 12,
            FsError::BadRequest => 13,
            FsError::NotAFile => 14,
            FsError::Io(errno) => return Some((15, *errno)),
            _ => return None,
        };
        Some((status, 0))
    }

    /// The error a status code and errno on the wire name: `None` for
    /// status 0, a status this version does not know, an errno with
    /// another status than 15, or status 15 with errno 0.
    #[must_use]
    pub fn from_code(status: u16, errno: u16) -> Option<FsError> {
        let error = match (status, errno) {
            (15, 0) => return None,
            (15, errno) => return Some(FsError::Io(errno)),
            (_, 1..) => return None,
            (1, 0) => FsError::NotFound,
            (2, 0) => FsError::PermissionDenied,
            (3, 0) => FsError::Exists,
            (4, 0) => FsError::NotDir,
            (5, 0) => FsError::IsDir,
            (6, 0) => FsError::NotEmpty,
            (7, 0) => FsError::BadHandle,
            (8, 0) => FsError::Escape,
            (9, 0) => FsError::InvalidPath,
            (10, 0) => FsError::TooLarge,
            (11, 0) => FsError::NameTooLong,
            (12, 0) => FsError::TooManyOpen,
            (13, 0) => FsError::BadRequest,
            (14, 0) => FsError::NotAFile,
            _ => return None,
        };
        Some(error)
    }

    /// What a failed Messenger call means for a file operation.
    #[must_use]
    pub fn from_messenger(error: MessengerError) -> FsError {
        match error {
            MessengerError::UnknownEbb { .. } => FsError::NotShared,
            MessengerError::NodeLost { node } => FsError::NodeLost { node },
            other => FsError::Unreachable(other),
        }
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::NotFound => f.write_str("no such file or directory (ENOENT)"),
            FsError::PermissionDenied => {
                f.write_str("permission denied on the hosted node (EACCES)")
            }
            FsError::Exists => f.write_str("the file exists (EEXIST)"),
            FsError::NotDir => f.write_str("a component of the path is not a directory (ENOTDIR)"),
            FsError::IsDir => f.write_str("the path is a directory (EISDIR)"),
            FsError::NotEmpty => f.write_str("the directory is not empty (ENOTEMPTY)"),
            FsError::BadHandle => {
                f.write_str("the handle is not open on this node (closed, or never opened)")
            }
            FsError::Escape => f.write_str(
                "the path leaves the shared directory (`..`, an absolute path or a symlink \
                 pointing out): refused",
            ),
            FsError::InvalidPath => f.write_str("the path is empty or holds a NUL byte"),
            FsError::TooLarge => f.write_str("more bytes than one request may carry"),
            FsError::NameTooLong => f.write_str("the path is too long (ENAMETOOLONG)"),
            FsError::TooManyOpen => {
                f.write_str("this node has as many files open on the hosted node as it may (EMFILE)")
            }
            FsError::BadRequest => f.write_str("the hosted node could not decode the request"),
            FsError::NotAFile => {
                f.write_str("the path is neither a regular file nor a directory: refused")
            }
            FsError::Io(errno) => write!(f, "the hosted node's Linux error {errno}"),
            FsError::NotShared => f.write_str(
                "no directory is shared: the hosted node serves no FileSystem (start the cluster \
                 with --share DIR)",
            ),
            FsError::NodeLost { node } => write!(f, "node {node}, serving the files, is lost"),
            FsError::Unreachable(error) => write!(f, "the file server is unreachable: {error}"),
            FsError::TimedOut { node, waited_ms } => {
                write!(f, "node {node} did not answer a file operation within {waited_ms} ms")
            }
            FsError::BadReply(error) => write!(f, "the file server's reply does not decode: {error}"),
            FsError::NotOnCore => f.write_str(
                "the FileSystem was used off an Ebbflow core: its Messenger has no representative here",
            ),
        }
    }
}

impl core::error::Error for FsError {}

impl FileSystemError for FsError {
    fn kind(&self) -> ErrorKind {
        match self {
            FsError::NotFound => ErrorKind::NotFound,
            FsError::PermissionDenied => ErrorKind::PermissionDenied,
            FsError::Exists => ErrorKind::Exists,
            FsError::NotDir => ErrorKind::NotDir,
            FsError::IsDir => ErrorKind::IsDir,
            FsError::NotEmpty => ErrorKind::NotEmpty,
            FsError::BadHandle => ErrorKind::BadHandle,
            FsError::Escape => ErrorKind::Escape,
            FsError::InvalidPath => ErrorKind::InvalidPath,
            FsError::TooLarge => ErrorKind::TooLarge,
            FsError::NameTooLong => ErrorKind::NameTooLong,
            FsError::TooManyOpen => ErrorKind::TooManyOpen,
            FsError::BadRequest => ErrorKind::InvalidArgument,
            FsError::NotAFile => ErrorKind::NotAFile,
            // The server names the errnos it expects; another (EBADF for a
            // read of a write-only file, EINVAL for a directory renamed
            // under itself) still has its kind.
            FsError::Io(errno) => ErrorKind::from_errno(*errno),
            FsError::NotShared
            | FsError::NodeLost { .. }
            | FsError::Unreachable(_)
            | FsError::TimedOut { .. }
            | FsError::BadReply(_)
            | FsError::NotOnCore => ErrorKind::Unavailable,
        }
    }
}

/// The protocol's error for an interface's kind: each travels as its own
/// status, except [`ErrorKind::Unavailable`], which only a client meets
/// (it is [`FsError::Unreachable`]'s kind, and never sent).
impl From<ErrorKind> for FsError {
    fn from(kind: ErrorKind) -> FsError {
        match kind {
            ErrorKind::NotFound => FsError::NotFound,
            ErrorKind::PermissionDenied => FsError::PermissionDenied,
            ErrorKind::Exists => FsError::Exists,
            ErrorKind::NotDir => FsError::NotDir,
            ErrorKind::IsDir => FsError::IsDir,
            ErrorKind::NotEmpty => FsError::NotEmpty,
            ErrorKind::BadHandle => FsError::BadHandle,
            ErrorKind::Escape => FsError::Escape,
            ErrorKind::InvalidPath => FsError::InvalidPath,
            ErrorKind::InvalidArgument => FsError::BadRequest,
            ErrorKind::TooLarge => FsError::TooLarge,
            ErrorKind::NameTooLong => FsError::NameTooLong,
            ErrorKind::TooManyOpen => FsError::TooManyOpen,
            ErrorKind::NotAFile => FsError::NotAFile,
            ErrorKind::Io(errno) => FsError::Io(errno),
            ErrorKind::Unavailable => FsError::Io(5),
        }
    }
}

/// Why bytes are not a valid FileSystem message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the structure needs.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes there were.
        available: usize,
    },
    /// Bytes left over after the structure.
    Trailing {
        /// How many.
        extra: usize,
    },
    /// The message number names no operation.
    UnknownMessage {
        /// The number.
        number: u32,
    },
    /// Open flags with bits this version does not know, or none of read
    /// and write.
    BadFlags {
        /// The flags.
        flags: u32,
    },
    /// A mode with bits beyond those allowed: a request's read, write and
    /// execute bits (0o777: no set-user-ID, set-group-ID or sticky bit), a
    /// stat reply's permission bits (0o7777).
    BadMode {
        /// The mode.
        mode: u32,
    },
    /// A path longer than [`crate::MAX_PATH_LEN`].
    PathTooLong {
        /// Its length.
        len: usize,
    },
    /// A path that is not UTF-8.
    PathNotUtf8,
    /// A reserved field is not zero.
    Reserved {
        /// The value found.
        value: u32,
    },
    /// A status code this version does not know.
    UnknownStatus {
        /// The status.
        status: u16,
        /// The errno beside it.
        errno: u16,
    },
    /// A file kind this version does not know.
    UnknownKind {
        /// The kind.
        kind: u8,
    },
    /// Nanoseconds of a time at or over one second.
    BadNanos {
        /// The value.
        nanos: u32,
    },
    /// A directory entry's name that is empty, `.`, `..`, holds a `/` or
    /// NUL byte, or is not UTF-8.
    BadName,
    /// More bytes than the request asked for.
    Overlong {
        /// Bytes asked for (or sent).
        asked: usize,
        /// Bytes the reply carries (or says it wrote).
        got: usize,
    },
    /// A reply of another operation's kind.
    WrongKind,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::Truncated { needed, available } => write!(
                f,
                "truncated: the structure needs {needed} bytes but only {available} are there"
            ),
            DecodeError::Trailing { extra } => {
                write!(f, "{extra} bytes are left over after the structure")
            }
            DecodeError::UnknownMessage { number } => {
                write!(f, "message number {number} names no file operation")
            }
            DecodeError::BadFlags { flags } => write!(
                f,
                "open flags {flags:#x} have unknown bits or neither read nor write"
            ),
            DecodeError::BadMode { mode } => {
                write!(
                    f,
                    "mode {mode:#o} has bits beyond those allowed (a request: 0o777, no set-ID or sticky bit; a stat: 0o7777)"
                )
            }
            DecodeError::PathTooLong { len } => write!(
                f,
                "a path of {len} bytes is over the limit of {} bytes",
                crate::MAX_PATH_LEN
            ),
            DecodeError::PathNotUtf8 => f.write_str("a path is not UTF-8"),
            DecodeError::Reserved { value } => {
                write!(f, "a reserved field is {value:#x}, not zero")
            }
            DecodeError::UnknownStatus { status, errno } => write!(
                f,
                "status {status} with errno {errno} is not one this version knows"
            ),
            DecodeError::UnknownKind { kind } => {
                write!(f, "file kind {kind} is not one this version knows")
            }
            DecodeError::BadNanos { nanos } => {
                write!(f, "{nanos} nanoseconds is not under one second")
            }
            DecodeError::BadName => f.write_str(
                "a directory entry's name is empty, `.`, `..`, holds `/` or NUL, or is not UTF-8",
            ),
            DecodeError::Overlong { asked, got } => {
                write!(f, "{got} bytes in reply to a request of {asked}")
            }
            DecodeError::WrongKind => f.write_str("a reply of another operation's kind"),
        }
    }
}

impl core::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use ebb_messenger::Unreachable;

    #[test]
    fn codes_round_trip_and_messenger_failures_are_typed() {
        for status in 1..=14 {
            let error = FsError::from_code(status, 0).unwrap();
            assert_eq!(error.code(), Some((status, 0)));
        }
        assert_eq!(FsError::from_code(15, 5), Some(FsError::Io(5)));
        assert_eq!(FsError::from_code(15, 0), None);
        assert_eq!(FsError::from_code(1, 2), None);
        assert_eq!(FsError::from_code(16, 0), None);
        assert_eq!(FsError::NotShared.code(), None);
        assert_eq!(
            FsError::from_messenger(MessengerError::UnknownEbb {
                node: NodeId(0),
                ebb: 20
            }),
            FsError::NotShared
        );
        assert_eq!(
            FsError::from_messenger(MessengerError::NodeLost { node: NodeId(0) }),
            FsError::NodeLost { node: NodeId(0) }
        );
        let unreachable = MessengerError::Unreachable {
            node: NodeId(0),
            reason: Unreachable::NotInDirectory,
        };
        assert_eq!(
            FsError::from_messenger(unreachable.clone()),
            FsError::Unreachable(unreachable)
        );
        assert_eq!(
            FsError::NodeLost { node: NodeId(0) }.to_string(),
            "node 0, serving the files, is lost"
        );
    }
}
