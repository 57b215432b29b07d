//! The POSIX personality's hosted platform (issue 18): a C program built
//! with Ebbflow's musl runs as a Linux process, and the three entries
//! the patched musl calls (`ebb-cbuild`'s `musl_patch.rs` states their
//! contracts) are here:
//!
//! - `__ebb_syscall`: through [`ebb_posix::dispatch`]; a call the
//!   personality serves passes to Linux unchanged ([`linux`]), any other
//!   is `ENOSYS` with one line on standard error, exactly as natively;
//! - `__ebb_clone`, `__ebb_unmapself`: assembly, since one starts a
//!   thread on a new stack and the other frees the stack it runs on
//!   ([`thread_entry`]).
//!
//! Built for `x86_64-unknown-none` as a static library (see
//! `Cargo.toml`), where it is `no_std` and a panic ends the process with
//! a message; built for the host (tests, clippy) it has std.

#![cfg_attr(target_os = "none", no_std)]

pub mod linux;
pub mod raw;
pub mod thread_entry;

#[cfg(feature = "entry")]
mod entry {
    use ebb_posix::log_once::LoggedCalls;

    /// The unserved calls this process has said.
    static LOGGED: LoggedCalls = LoggedCalls::new();

    ebb_posix::syscall_entry!(crate::linux::Linux, LOGGED);
}

/// A panic here is a bug in this library: say so on standard error and
/// end the process as `abort` would (134 = 128 + SIGABRT).
#[cfg(target_os = "none")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    linux::write_stderr_line("ebb-posix-hosted: panic in the system-call dispatcher");
    raw::exit_group(134)
}
