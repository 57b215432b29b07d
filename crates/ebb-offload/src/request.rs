//! The FileSystem Ebb's requests: one Messenger message number per
//! operation, and its control structure in a fixed little-endian layout
//! (as the Messenger's own, `docs/messenger.md`). Paths are a u16 length
//! and that many bytes of UTF-8. The data a write carries is the
//! message's payload, never the control.
//!
//! | number | operation | control | payload |
//! | --- | --- | --- | --- |
//! | 1 | [`OPEN`] | flags u32, mode u32, path | — |
//! | 2 | [`READ`] | handle u32, length u32 | — |
//! | 3 | [`PREAD`] | handle u32, length u32, offset u64 | — |
//! | 4 | [`WRITE`] | handle u32 | the bytes |
//! | 5 | [`PWRITE`] | handle u32, reserved u32 (0), offset u64 | the bytes |
//! | 6 | [`STAT`] | path | — |
//! | 7 | [`READDIR`] | path | — |
//! | 8 | [`CLOSE`] | handle u32 | — |
//! | 9 | [`UNLINK`] | path | — |
//! | 10 | [`MKDIR`] | mode u32, path | — |
//! | 11 | [`RENAME`] | from: path, to: path | — |
//!
//! The decoder is strict: a wrong length, unknown flag bits, mode bits
//! beyond 0o777 (no set-ID or sticky bit), a non-zero reserved field, a path over
//! [`MAX_PATH_LEN`] or not UTF-8 is a [`DecodeError`].

use alloc::string::String;
use alloc::vec::Vec;

use ebb_messenger::MessageNumber;

use crate::bytes::{put_path, Reader};
use crate::{DecodeError, FsError};
use ebb_fs::{Handle, OpenFlags, MAX_PATH_LEN};

/// Opens a file; the reply names its handle.
pub const OPEN: MessageNumber = MessageNumber(1);
/// Reads at the handle's position (which moves on).
pub const READ: MessageNumber = MessageNumber(2);
/// Reads at an offset.
pub const PREAD: MessageNumber = MessageNumber(3);
/// Writes the payload at the handle's position (the end, opened with
/// [`OpenFlags::APPEND`]).
pub const WRITE: MessageNumber = MessageNumber(4);
/// Writes the payload at an offset.
pub const PWRITE: MessageNumber = MessageNumber(5);
/// A path's kind, size, permissions and modification time.
pub const STAT: MessageNumber = MessageNumber(6);
/// A directory's entries (in the reply's payload).
pub const READDIR: MessageNumber = MessageNumber(7);
/// Closes a handle.
pub const CLOSE: MessageNumber = MessageNumber(8);
/// Removes a file (not a directory).
pub const UNLINK: MessageNumber = MessageNumber(9);
/// Makes a directory.
pub const MKDIR: MessageNumber = MessageNumber(10);
/// Renames within the shared directory.
pub const RENAME: MessageNumber = MessageNumber(11);

/// The most bytes one read or write request carries; the server refuses
/// more ([`FsError::TooLarge`]), well under the Messenger's payload limit
/// (64 MiB by default).
pub const MAX_CHUNK: u32 = 16 << 20;

/// What [`crate::RemoteFileSystem`] puts in one request: large reads and writes
/// go as several of at most this. The bound is the native node's: a
/// reply arrives as views of its virtio-net receive buffers (2 KiB each,
/// at most 1024 alive: `ebb-native`'s `MAX_RX_BUFFERS`), and the
/// Messenger holds a message's frames until it is whole, so a message
/// must fit in well under 1024 frames (512 KiB is about 360 of 1460
/// bytes) or the node stops receiving. For the same reason a native
/// application reading much more than this should use each piece and let
/// it go (as `apps/filecheck` does) rather than hold a whole large file
/// as views.
pub const CHUNK: usize = 512 << 10;

/// The permission bits a request's mode may have: read, write and execute
/// for owner, group and others. Not set-user-ID, set-group-ID or sticky
/// (0o7000): the hosted node acts as its own user (root, for a cluster's
/// frontend, which keeps those bits: CAP_FSETID, chmod(2)), so a node
/// could otherwise leave a set-user-ID-root program in the shared
/// directory.
const MODE_BITS: u32 = 0o777;

/// A request's control structure (a write's bytes are the payload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// [`OPEN`].
    Open {
        /// The file.
        path: String,
        /// How.
        flags: OpenFlags,
        /// Permissions of a file it creates (before the hosted node's
        /// umask).
        mode: u32,
    },
    /// [`READ`].
    Read {
        /// The file.
        handle: Handle,
        /// At most this many bytes.
        len: u32,
    },
    /// [`PREAD`].
    Pread {
        /// The file.
        handle: Handle,
        /// At most this many bytes.
        len: u32,
        /// From here.
        offset: u64,
    },
    /// [`WRITE`].
    Write {
        /// The file.
        handle: Handle,
    },
    /// [`PWRITE`].
    Pwrite {
        /// The file.
        handle: Handle,
        /// From here.
        offset: u64,
    },
    /// [`STAT`].
    Stat {
        /// The path.
        path: String,
    },
    /// [`READDIR`].
    ReadDir {
        /// The directory.
        path: String,
    },
    /// [`CLOSE`].
    Close {
        /// The file.
        handle: Handle,
    },
    /// [`UNLINK`].
    Unlink {
        /// The file.
        path: String,
    },
    /// [`MKDIR`].
    Mkdir {
        /// The new directory.
        path: String,
        /// Its permissions (before the umask).
        mode: u32,
    },
    /// [`RENAME`].
    Rename {
        /// The old name.
        from: String,
        /// The new one.
        to: String,
    },
}

impl Request {
    /// Its message number.
    #[must_use]
    pub fn number(&self) -> MessageNumber {
        match self {
            Request::Open { .. } => OPEN,
            Request::Read { .. } => READ,
            Request::Pread { .. } => PREAD,
            Request::Write { .. } => WRITE,
            Request::Pwrite { .. } => PWRITE,
            Request::Stat { .. } => STAT,
            Request::ReadDir { .. } => READDIR,
            Request::Close { .. } => CLOSE,
            Request::Unlink { .. } => UNLINK,
            Request::Mkdir { .. } => MKDIR,
            Request::Rename { .. } => RENAME,
        }
    }

    /// Its control bytes.
    ///
    /// # Errors
    ///
    /// [`FsError::NameTooLong`]: a path over [`MAX_PATH_LEN`] bytes;
    /// [`FsError::BadRequest`]: a mode beyond the permission bits, or open
    /// flags with neither read nor write.
    pub fn encode(&self) -> Result<Vec<u8>, FsError> {
        let mut out = Vec::new();
        match self {
            Request::Open { path, flags, mode } => {
                check_mode(*mode)?;
                // `|` of the constants can make flags the decoder
                // refuses (neither read nor write): refused here, with
                // no call.
                OpenFlags::from_bits(flags.bits()).ok_or(FsError::BadRequest)?;
                out.extend_from_slice(&flags.bits().to_le_bytes());
                out.extend_from_slice(&mode.to_le_bytes());
                put_checked_path(&mut out, path)?;
            }
            Request::Read { handle, len } => {
                out.extend_from_slice(&handle.0.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
            }
            Request::Pread {
                handle,
                len,
                offset,
            } => {
                out.extend_from_slice(&handle.0.to_le_bytes());
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
            }
            Request::Write { handle } | Request::Close { handle } => {
                out.extend_from_slice(&handle.0.to_le_bytes());
            }
            Request::Pwrite { handle, offset } => {
                out.extend_from_slice(&handle.0.to_le_bytes());
                out.extend_from_slice(&0u32.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
            }
            Request::Stat { path } | Request::ReadDir { path } | Request::Unlink { path } => {
                put_checked_path(&mut out, path)?;
            }
            Request::Mkdir { path, mode } => {
                check_mode(*mode)?;
                out.extend_from_slice(&mode.to_le_bytes());
                put_checked_path(&mut out, path)?;
            }
            Request::Rename { from, to } => {
                put_checked_path(&mut out, from)?;
                put_checked_path(&mut out, to)?;
            }
        }
        Ok(out)
    }

    /// The request message `number` with control `control` carries.
    ///
    /// # Errors
    ///
    /// Why it is not one (never a panic).
    pub fn decode(number: MessageNumber, control: &[u8]) -> Result<Request, DecodeError> {
        let mut r = Reader::new(control);
        let request = match number {
            OPEN => {
                let bits = r.u32()?;
                let flags =
                    OpenFlags::from_bits(bits).ok_or(DecodeError::BadFlags { flags: bits })?;
                let mode = decode_mode(r.u32()?)?;
                Request::Open {
                    flags,
                    mode,
                    path: r.path()?,
                }
            }
            READ => Request::Read {
                handle: Handle(r.u32()?),
                len: r.u32()?,
            },
            PREAD => Request::Pread {
                handle: Handle(r.u32()?),
                len: r.u32()?,
                offset: r.u64()?,
            },
            WRITE => Request::Write {
                handle: Handle(r.u32()?),
            },
            PWRITE => {
                let handle = Handle(r.u32()?);
                r.reserved::<4>()?;
                Request::Pwrite {
                    handle,
                    offset: r.u64()?,
                }
            }
            STAT => Request::Stat { path: r.path()? },
            READDIR => Request::ReadDir { path: r.path()? },
            CLOSE => Request::Close {
                handle: Handle(r.u32()?),
            },
            UNLINK => Request::Unlink { path: r.path()? },
            MKDIR => {
                let mode = decode_mode(r.u32()?)?;
                Request::Mkdir {
                    mode,
                    path: r.path()?,
                }
            }
            RENAME => Request::Rename {
                from: r.path()?,
                to: r.path()?,
            },
            MessageNumber(number) => return Err(DecodeError::UnknownMessage { number }),
        };
        r.end()?;
        Ok(request)
    }
}

fn put_checked_path(out: &mut Vec<u8>, path: &str) -> Result<(), FsError> {
    if path.len() > MAX_PATH_LEN {
        return Err(FsError::NameTooLong);
    }
    put_path(out, path);
    Ok(())
}

fn check_mode(mode: u32) -> Result<(), FsError> {
    if mode & !MODE_BITS == 0 {
        Ok(())
    } else {
        Err(FsError::BadRequest)
    }
}

fn decode_mode(mode: u32) -> Result<u32, DecodeError> {
    if mode & !MODE_BITS == 0 {
        Ok(mode)
    } else {
        Err(DecodeError::BadMode { mode })
    }
}
