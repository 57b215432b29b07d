//! The trait every FileSystem backend implements.
//!
//! Asynchronous because one backend is a network away: a remote file
//! system's call is a Messenger call to another node, and an event must
//! not block its core while the answer travels. A backend in memory
//! returns futures that are ready at once, so the trait costs it only a
//! poll. The methods say `-> impl Future` rather than `async fn` so that
//! the trait promises nothing about `Send`: Ebbflow's futures stay on the
//! core that made them (DESIGN §3), and a backend's futures need not be
//! `Send`.
//!
//! Data is an [`IoChain`] both ways: a remote read comes back as views of
//! the receive buffers and a write goes out as views of the caller's, with
//! no copy; the in-memory backend copies once, into or out of its file.

use alloc::vec::Vec;
use core::future::Future;

use ebb_iobuf::IoChain;

use crate::{DirEntry, FileSystemError, Handle, OpenFlags, Stat};

/// Files: open, read and write them, name and list them. Paths are
/// relative to the file system's root and pass [`crate::check_path`];
/// each method fails with the backend's [`FileSystem::Error`], whose
/// [`FileSystemError::kind`] says what went wrong in words all backends
/// share. What every backend must do is [`crate::conformance`]'s check
/// (feature `conformance`).
pub trait FileSystem {
    /// The backend's error.
    type Error: FileSystemError;

    /// Opens the regular file `path`; `mode` gives a file it creates its
    /// permissions (0o777 only: set-ID and sticky bits are
    /// `InvalidArgument`). A directory is `IsDir`; anything else that is
    /// not a regular file, `NotAFile`.
    fn open(
        &self,
        path: &str,
        flags: OpenFlags,
        mode: u32,
    ) -> impl Future<Output = Result<Handle, Self::Error>>;

    /// Reads up to `len` bytes at the handle's position, which moves on;
    /// fewer at the end of the file.
    fn read(
        &self,
        handle: Handle,
        len: usize,
    ) -> impl Future<Output = Result<IoChain, Self::Error>>;

    /// Reads up to `len` bytes from `offset`; fewer at the end of the file.
    fn pread(
        &self,
        handle: Handle,
        len: usize,
        offset: u64,
    ) -> impl Future<Output = Result<IoChain, Self::Error>>;

    /// Writes `data` at the handle's position (the end, opened with
    /// [`OpenFlags::APPEND`]), which moves on; returns the bytes written.
    fn write(
        &self,
        handle: Handle,
        data: IoChain,
    ) -> impl Future<Output = Result<u64, Self::Error>>;

    /// Writes `data` from `offset` (a gap before it reads as zeros);
    /// returns the bytes written.
    fn pwrite(
        &self,
        handle: Handle,
        data: IoChain,
        offset: u64,
    ) -> impl Future<Output = Result<u64, Self::Error>>;

    /// What `path` is.
    fn stat(&self, path: &str) -> impl Future<Output = Result<Stat, Self::Error>>;

    /// The entries of directory `path`, sorted by name, without `.` and
    /// `..`.
    fn readdir(&self, path: &str) -> impl Future<Output = Result<Vec<DirEntry>, Self::Error>>;

    /// Closes `handle`; a file unlinked while open goes with its last
    /// handle.
    fn close(&self, handle: Handle) -> impl Future<Output = Result<(), Self::Error>>;

    /// Removes the file `path` (a directory is `IsDir`).
    fn unlink(&self, path: &str) -> impl Future<Output = Result<(), Self::Error>>;

    /// Makes the directory `path` with permissions `mode` (0o777 only).
    fn mkdir(&self, path: &str, mode: u32) -> impl Future<Output = Result<(), Self::Error>>;

    /// Renames `from` to `to`, replacing a file or an empty directory
    /// there, as rename(2).
    fn rename(&self, from: &str, to: &str) -> impl Future<Output = Result<(), Self::Error>>;
}
