//! The POSIX personality's files group, platform-neutral (issue 18): an in-memory
//! file system ([`memfs`]), the same tree as a backend of the FileSystem
//! Ebb's interface ([`MemFileSystem`], an [`ebb_fs::FileSystem`]), the descriptor table and what each call does
//! with it ([`table`]), and the layouts Linux returns (`struct stat`,
//! `linux_dirent64`: [`layout`]). A platform reads the program's
//! arguments out of its memory and hands slices here; natively that is
//! `ebb-posix-native`.
//!
//! Paths are bytes; `/` separates; `.` and `..` are resolved against the
//! tree (there are no symbolic links). Errors are Linux's errno values.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod archive;
pub mod layout;
mod mem_file_system;
pub mod memfs;
pub mod path;
pub mod table;

pub use mem_file_system::{MemFileSystem, MAX_HANDLES};
