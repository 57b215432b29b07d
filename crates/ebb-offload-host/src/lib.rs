//! The FileSystem Ebb's representative on the hosted node (issue 17,
//! function offload): it serves the file operations other nodes ship
//! (`ebb-offload`'s protocol) from one directory the user names, and
//! nothing outside it.
//!
//! * [`FileServer`]: the shared directory, the open files per client
//!   node, [`FileServer::serve`] (registers it with the node's Messenger
//!   under `ebb_offload::FILE_SYSTEM_EBB`) and
//!   [`FileServer::forget_node`] (a lost node's files are closed).
//! * `resolve.rs`: every path is resolved by the kernel beneath the
//!   directory, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
//! * `errno.rs`: Linux errors to [`ebb_offload::FsError`].
//!
//! Linux only (openat2 is Linux 5.6's). The operations run on the core
//! that received the message, as ordinary blocking system calls: the
//! client's chunks of `ebb_offload::CHUNK` (512 KiB), usually from the page
//! cache, short next to the network round trip that brought the request;
//! a request of any client carries at most `ebb_offload::MAX_CHUNK` (16
//! MiB), which bounds how long one holds a core.

#![forbid(unsafe_code)]

mod errno;
mod files;
mod ops;
mod resolve;
mod server;

pub use server::{
    total_limit, FileServer, ServeError, MAX_LISTING, MAX_OPEN_PER_NODE, MAX_OPEN_TOTAL,
};
