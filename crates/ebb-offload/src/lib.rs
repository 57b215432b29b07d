//! Function offload (DESIGN §5, issue 17): what a library OS should not
//! implement itself is shipped to the hosted node, as in EbbRT. Here: the
//! **FileSystem Ebb**.
//!
//! * [`Request`], [`Reply`]: the protocol, fixed little-endian control
//!   layouts written by hand (the tables are in this crate's README);
//!   bulk data is the Messenger message's payload, an IoBuf chain, never
//!   part of the control.
//! * [`FsError`]: typed errors with the Linux errno kinds, each a
//!   sentence; [`DecodeError`]: why bytes are not a valid message.
//! * [`RemoteFileSystem`]: the client representative any node (native or
//!   hosted) uses, one backend of the FileSystem interface
//!   ([`ebb_fs::FileSystem`], whose types this crate re-exports): every
//!   call becomes a Messenger call to the hosted node serving the Ebb
//!   ([`FILE_SYSTEM_EBB`]), bounded in time; large reads and writes go in
//!   chunks of [`CHUNK`] bytes and come back as one IoBuf chain of the
//!   received buffers (no copy).
//!
//! The server (std, Linux: `openat2` confines it to a root directory) is
//! `ebb-offload-host`. Nothing here panics on bytes from the network.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod bound;
mod bytes;
mod client;
mod error;
mod path;
mod reply;
mod request;

pub use client::{RemoteFileSystem, DEFAULT_CALL_BOUND};
pub use ebb_fs::{DirEntry, FileKind, Handle, OpenFlags, Stat, MAX_PATH_LEN};
pub use error::{DecodeError, FsError};
pub use path::check_path;
pub use reply::{decode_listing, encode_listing, listed, Reply};
pub use request::{
    Request, CHUNK, CLOSE, MAX_CHUNK, MKDIR, OPEN, PREAD, PWRITE, READ, READDIR, RENAME, STAT,
    UNLINK, WRITE,
};

use ebb_core::EbbId;

/// The FileSystem Ebb's id: reserved, so that every node names it without
/// asking anyone. Its representative on the hosted node serving files is
/// the server; on any other node, [`RemoteFileSystem`].
pub const FILE_SYSTEM_EBB: EbbId = EbbId::reserved(20);
