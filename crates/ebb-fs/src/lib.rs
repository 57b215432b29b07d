//! The FileSystem Ebb's interface (issues 17 and 18): one trait,
//! [`FileSystem`], that every backend implements, and the types it speaks
//! in. Two backends stand behind it today:
//!
//! * `ebb_posix_files::MemFileSystem`: Ebbflow's in-memory file system
//!   (a `MemFs`, the tree type the native POSIX personality's files live
//!   in) with paths and handles; its futures finish at their first poll;
//! * `ebb_offload::RemoteFileSystem`: the directory a hosted node shares,
//!   every call a Messenger call (function offload, as in EbbRT).
//!
//! A block device's file system would be a third. Code written against
//! the trait runs on any of them; [`conformance::check`] (feature
//! `conformance`) is the behaviour they all show, run by each backend's
//! tests.
//!
//! * [`Handle`], [`OpenFlags`]: an open file and how it was opened;
//! * [`Stat`], [`FileKind`], [`DirEntry`]: what a path is;
//! * [`ErrorKind`]: why an operation failed, with its Linux errno; each
//!   backend's own error type ([`FileSystem::Error`]) says more and maps to
//!   one ([`FileSystemError::kind`]);
//! * [`check_path`]: the paths the interface takes.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
mod file_system;
mod path;
mod types;

pub use error::{ErrorKind, FileSystemError};
pub use file_system::FileSystem;
pub use path::{
    check_path, components, last_name, names_directory, LastName, MAX_NAME_LEN, MAX_PATH_LEN,
};
pub use types::{DirEntry, FileKind, Handle, OpenFlags, Stat};
