//! The kernel objects a C program's descriptors may name besides files
//! (issue 19): TCP sockets on Ebbflow's network interface (`ebb-net`, so
//! natively on Ebbflow's own TCP/IP stack), epoll sets, eventfds and
//! pipes, and the system calls on them ([`calls`]), argument by argument.
//! Platform-neutral and tested on the host. A platform says through
//! [`calls::Host`] where the descriptors live (natively the file table's
//! `Target::Object`; on the user-space stack numbers Linux holds), how
//! the calling C thread parks on the event loop, and how the program's
//! memory is reached (`ebb-posix-native`, `ebb-posix-userstack`).
//!
//! - **Non-blocking at heart.** Every operation here either completes or
//!   says `EAGAIN`; a blocking descriptor's call waits for the object's
//!   next change ([`changed`]) and tries again. Nothing else runs between
//!   an `EAGAIN` and the wait (one core, cooperative threads), so no
//!   wake-up is lost.
//! - **One core.** Objects are `Rc`/`RefCell`: they live on the core of
//!   the program's threads, as its connections do. No borrow is held
//!   while calling into the network stack, which may call our handlers
//!   back from inside that call.
//! - **Readiness.** Each object has a [`Notifier`]: wakers of blocked
//!   calls, and the epoll sets that watch it, which then re-check it
//!   (level-triggered by default, `EPOLLET` and `EPOLLONESHOT` as
//!   epoll(7) says).
//! - **Copies.** A socket's received data stays in the receive buffers
//!   (an `IoChain` of views) until `read` copies it into the program's
//!   buffer; `write` copies the program's bytes into one new buffer. These
//!   are the two copies the POSIX API forces (the caller owns its buffer
//!   before and after the call); [`copies`] counts them.
//!
//! What is not here: UDP and IPv6 sockets natively (`EAFNOSUPPORT`,
//! `EPROTONOSUPPORT`), Unix-domain sockets, an epoll set inside another
//! (`EINVAL`), and signals (`SIGPIPE` is never delivered: a write to a
//! closed peer is `EPIPE`).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod calls;
pub mod copies;
pub mod epoll;
pub mod eventfd;
mod notify;
pub mod object;
pub mod pipe;
pub mod readiness;
pub mod socket;

pub use notify::{changed, Notifier, Pollable};
pub use object::{Object, Objects};
