//! The POSIX personality on Ebbflow's user-space stack (issue 19: "`./ebb
//! run redis --userstack` serves on our stack in a namespace"): a C
//! program built with Ebbflow's musl runs as a Linux process whose
//! sockets, epoll sets, eventfds and pipes are Ebbflow's objects
//! (`ebb_posix_objects`, the same calls as natively), on Ebbflow's own
//! TCP/IP stack over a TAP device (`ebb-userstack`), while files, memory,
//! time, threads and signals pass to Linux as they do hosted.
//!
//! How it runs:
//!
//! - **Start.** The program is linked with `--wrap=main`, so musl's
//!   start-up calls [`start`]'s `__wrap_main`, which starts a one-core
//!   hosted node with the user-space stack (settings from the
//!   environment, see [`start`]) and runs the program's `main` on core
//!   0 as a stackful event with an 8 MiB stack of its own.
//! - **Calls.** `__ebb_syscall` ([`entry`]) tells the program's calls
//!   from this library's own by the stack they are made on
//!   ([`program_stack`]). The program's go through the personality's
//!   dispatcher to [`backend`]; a blocking call on an object parks `main`
//!   and the event loop runs (the TAP device, timers) until the object
//!   changes. Others go straight to Linux.
//! - **Descriptors.** An object's descriptor is a number Linux holds
//!   for it ([`descriptors`]), so files and objects never share a number.
//! - **Threads.** The program's other threads (Redis's bio threads) make
//!   their calls on Linux, but for those on an object's descriptor, which
//!   are shipped to core 0 and made there ([`remote`]).
//! - **What is not provided:** fork (`ENOSYS`: the child would share
//!   the TAP device and every connection's state), sendmsg/recvmsg on
//!   our sockets (as natively), and a Linux descriptor in one of our
//!   epoll sets (`EPERM`); in a poll(2) with one of ours, a Linux
//!   descriptor is looked at whenever one of ours changes or the timeout
//!   passes.
//!
//! Built for `x86_64-unknown-linux-musl` as a static library, its Rust
//! std runs on the program's own musl; the entries exist only there.

pub mod backend;
pub mod descriptors;
#[cfg(target_env = "musl")]
mod entry;
pub mod host;
pub mod linux;
pub mod program_stack;
pub mod remote;
pub mod settings;
#[cfg(target_env = "musl")]
mod start;
