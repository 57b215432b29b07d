//! Ebbflow's POSIX personality (issue 18): a C program linked with
//! Ebbflow's musl (`ebb-cbuild`) makes every system call as a call to
//! `__ebb_syscall(n, a, b, c, d, e, f)`; the platform that provides that
//! symbol hands it to [`dispatch`] here, which decides which calls the
//! personality serves ([`supported`]) and answers every other one with
//! `ENOSYS` and one log line per call number ([`log_once`]), so an
//! unknown call never crashes the program.
//!
//! What serves a supported call is the platform's [`Backend`]: hosted, a
//! Linux process passes it to Linux (`ebb-posix-hosted`); natively the
//! library OS implements it. Both answer the same set, so one program
//! prints the same natively and hosted.
//!
//! No allocation and no `unsafe`: this is policy and bookkeeping, run on
//! every system call of a C program (and linked into the hosted
//! personality, which has no allocator). The files group's logic, which
//! allocates, is `ebb-posix-files`.

#![no_std]
#![forbid(unsafe_code)]

pub mod dispatch;
pub mod errno;
pub mod log_once;
pub mod supported;
pub mod sysno;

pub use dispatch::{dispatch, Backend, SysCall};
pub use supported::{group_of, Group};
