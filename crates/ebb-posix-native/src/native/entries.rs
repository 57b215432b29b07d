//! The three entries the patched musl calls (contracts in `ebb-cbuild`'s
//! `musl_patch.rs`), natively.

use ebb_posix::errno::ENOSYS;
use ebb_posix::log_once::LoggedCalls;
use ebb_posix::sysno::nr;
use ebb_posix::Backend;

use super::backend::Native;
use super::threads;

/// The unserved calls this program has said.
pub static LOGGED: LoggedCalls = LoggedCalls::new();

ebb_posix::syscall_entry!(Native, LOGGED);

/// musl's `__clone`: a thread as a stackful event (`threads.rs`); a
/// fork-like clone is `ENOSYS`, said once.
#[no_mangle]
pub extern "C" fn __ebb_clone(
    func: usize,
    stack: usize,
    flags: i32,
    arg: usize,
    ptid: usize,
    tls: usize,
    ctid: usize,
) -> i32 {
    // The flags are an `int`; clone(2) takes them as an unsigned long.
    let flags = flags.cast_unsigned() as usize;
    let result = threads::clone(func, stack, flags, arg, ptid, tls, ctid);
    if result == -ENOSYS && LOGGED.first_time(nr::CLONE) {
        Native.log(
            "ebb-posix: system call 56 (clone) of a process, not a thread, is not provided: ENOSYS (said once per call)",
        );
    }
    i32::try_from(result).unwrap_or(-38)
}

/// musl's `__unmapself`: a detached thread ends and its stack, on which
/// it still runs, is unmapped once it is off it.
#[no_mangle]
pub extern "C" fn __ebb_unmapself(base: usize, size: usize) -> ! {
    threads::exit_thread(0, Some((base, size)))
}
