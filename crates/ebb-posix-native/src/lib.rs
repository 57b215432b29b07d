//! The POSIX personality natively (issue 18): a C program built with
//! Ebbflow's musl is linked into a native image, and its system calls
//! (`__ebb_syscall`) are served by the library OS through
//! [`ebb_posix::dispatch`].
//!
//! The bookkeeping is platform-neutral and tested on the host: anonymous
//! mappings ([`mappings`]) and the program break ([`brk`]). The rest
//! (`native/`, built for `x86_64-unknown-none` only) reads and writes the
//! program's memory, the clocks and the console, and starts the program
//! through musl's `__libc_start_main` ([`start_c_program`]).
//!
//! What it provides natively: memory, time, files (an in-memory file
//! system, `ebb-posix-files`), process, standard streams (to the
//! console), and threads: each a stackful event of core 0's event loop,
//! cooperative, with futexes on the loop's wakers and timers
//! (`native/threads.rs`; the futex queues [`futex_queues`] and thread ids
//! [`thread_table`] are host-tested); signals set and read back, never
//! delivered ([`signal_state`], host-tested); IPv4 TCP sockets on
//! Ebbflow's own TCP/IP stack, epoll sets, eventfds, pipes and poll
//! (`ebb_posix_objects` and its `calls`, host-tested and shared with the
//! user-space stack's personality; `native/objects.rs` is what they need
//! here), a blocking call parking its C thread on the event loop until
//! the object changes.

#![no_std]

extern crate alloc;

pub mod brk;
pub mod futex_queues;
pub mod mappings;
#[cfg(target_os = "none")]
mod native;
pub mod signal_state;
pub mod thread_table;

#[cfg(target_os = "none")]
pub use native::start::start_c_program;
