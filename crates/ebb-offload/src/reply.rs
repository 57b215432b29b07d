//! The FileSystem Ebb's replies. Every reply's control starts with a
//! status (u16: 0 done, else the [`FsError`]'s code) and an errno (u16:
//! non-zero only with status 15, another Linux error); a failed
//! operation's reply is those 4 bytes. A successful one adds its result:
//!
//! | operation | control after the status | payload |
//! | --- | --- | --- |
//! | open | handle u32 | — |
//! | read, pread | — | the bytes (fewer than asked: the end of the file) |
//! | write, pwrite | bytes written u32 | — |
//! | stat | [`Stat`]: kind u8, reserved u8 × 3, mode u32, size u64, modified seconds i64, nanoseconds u32, reserved u32 | — |
//! | readdir | entries u32 | the entries: kind u8, name length u16, name |
//! | close, unlink, mkdir, rename | — | — |
//!
//! File kinds: 1 regular file, 2 directory, 3 symlink, 4 anything else.

use alloc::string::String;
use alloc::vec::Vec;

use ebb_messenger::MessageNumber;

use crate::bytes::Reader;
use crate::request::{
    CLOSE, MKDIR, OPEN, PREAD, PWRITE, READ, READDIR, RENAME, STAT, UNLINK, WRITE,
};
use ebb_fs::{DirEntry, FileKind, Handle, Stat};

use crate::{DecodeError, FsError};

/// A file kind's code on the wire (the table above).
fn kind_code(kind: FileKind) -> u8 {
    match kind {
        FileKind::File => 1,
        FileKind::Dir => 2,
        FileKind::Symlink => 3,
        FileKind::Other => 4,
    }
}

/// The file kind a code on the wire names.
fn kind_from_code(kind: u8) -> Result<FileKind, DecodeError> {
    Ok(match kind {
        1 => FileKind::File,
        2 => FileKind::Dir,
        3 => FileKind::Symlink,
        4 => FileKind::Other,
        kind => return Err(DecodeError::UnknownKind { kind }),
    })
}

/// A reply's control structure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// To an open.
    Opened(Handle),
    /// To a read or pread: the bytes are the payload.
    Data,
    /// To a write or pwrite.
    Written(u32),
    /// To a stat.
    Stat(Stat),
    /// To a readdir: how many entries the payload holds.
    Listing(u32),
    /// To a close, unlink, mkdir or rename.
    Done,
    /// The operation failed.
    Failed(FsError),
}

impl Reply {
    /// Its control bytes. A [`Reply::Failed`] with one of the client's own
    /// errors (which never travel) is sent as [`FsError::BadRequest`].
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let (status, errno) = match self {
            Reply::Failed(error) => error.code().unwrap_or((13, 0)),
            _ => (0, 0),
        };
        let mut out = Vec::with_capacity(36);
        out.extend_from_slice(&status.to_le_bytes());
        out.extend_from_slice(&errno.to_le_bytes());
        match self {
            Reply::Opened(handle) => out.extend_from_slice(&handle.0.to_le_bytes()),
            Reply::Written(n) | Reply::Listing(n) => out.extend_from_slice(&n.to_le_bytes()),
            Reply::Stat(stat) => {
                out.push(kind_code(stat.kind));
                out.extend_from_slice(&[0; 3]);
                out.extend_from_slice(&stat.mode.to_le_bytes());
                out.extend_from_slice(&stat.size.to_le_bytes());
                out.extend_from_slice(&stat.modified_secs.to_le_bytes());
                out.extend_from_slice(&stat.modified_nanos.to_le_bytes());
                out.extend_from_slice(&[0; 4]);
            }
            Reply::Data | Reply::Done | Reply::Failed(_) => {}
        }
        out
    }

    /// The reply to request message `number` that `control` carries.
    ///
    /// # Errors
    ///
    /// Why it is not one (never a panic).
    pub fn decode(number: MessageNumber, control: &[u8]) -> Result<Reply, DecodeError> {
        let mut r = Reader::new(control);
        let status = r.u16()?;
        let errno = r.u16()?;
        if status != 0 || errno != 0 {
            let error = FsError::from_code(status, errno)
                .ok_or(DecodeError::UnknownStatus { status, errno })?;
            r.end()?;
            return Ok(Reply::Failed(error));
        }
        let reply = match number {
            OPEN => Reply::Opened(Handle(r.u32()?)),
            READ | PREAD => Reply::Data,
            WRITE | PWRITE => Reply::Written(r.u32()?),
            STAT => {
                let kind = kind_from_code(r.u8()?)?;
                r.reserved::<3>()?;
                let mode = r.u32()?;
                if mode & !0o7777 != 0 {
                    return Err(DecodeError::BadMode { mode });
                }
                let size = r.u64()?;
                let modified_secs = r.i64()?;
                let modified_nanos = r.u32()?;
                if modified_nanos >= 1_000_000_000 {
                    return Err(DecodeError::BadNanos {
                        nanos: modified_nanos,
                    });
                }
                r.reserved::<4>()?;
                Reply::Stat(Stat {
                    kind,
                    mode,
                    size,
                    modified_secs,
                    modified_nanos,
                })
            }
            READDIR => Reply::Listing(r.u32()?),
            CLOSE | UNLINK | MKDIR | RENAME => Reply::Done,
            MessageNumber(number) => return Err(DecodeError::UnknownMessage { number }),
        };
        r.end()?;
        Ok(reply)
    }
}

/// The longest name an entry has on Linux (NAME_MAX, limits.h).
const NAME_MAX: usize = 255;

/// A readdir reply's payload. Entries whose name is not a valid name
/// (see [`DecodeError::BadName`]) are left out, as are names over 255
/// bytes: neither exists on Linux, and a listing must decode.
#[must_use]
pub fn encode_listing(entries: &[DirEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for entry in entries.iter().filter(|e| valid_name(e.name.as_bytes())) {
        out.push(kind_code(entry.kind));
        let len = u16::try_from(entry.name.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(entry.name.as_bytes());
    }
    out
}

/// How many entries [`encode_listing`] keeps of `entries`.
#[must_use]
pub fn listed(entries: &[DirEntry]) -> usize {
    entries
        .iter()
        .filter(|e| valid_name(e.name.as_bytes()))
        .count()
}

/// The `count` entries a readdir reply's payload holds.
///
/// # Errors
///
/// Why it does not hold exactly them (never a panic).
pub fn decode_listing(payload: &[u8], count: u32) -> Result<Vec<DirEntry>, DecodeError> {
    let mut r = Reader::new(payload);
    let mut entries = Vec::new();
    for _ in 0..count {
        let kind = kind_from_code(r.u8()?)?;
        let len = usize::from(r.u16()?);
        let name = r.take(len)?;
        if !valid_name(name) {
            return Err(DecodeError::BadName);
        }
        let name = core::str::from_utf8(name).map_err(|_| DecodeError::BadName)?;
        entries.push(DirEntry {
            name: String::from(name),
            kind,
        });
    }
    r.end()?;
    Ok(entries)
}

fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name != b"."
        && name != b".."
        && !name.contains(&b'/')
        && !name.contains(&0)
}
