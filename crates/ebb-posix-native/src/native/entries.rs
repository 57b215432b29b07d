//! The three entries the patched musl calls (contracts in `ebb-cbuild`'s
//! `musl_patch.rs`), natively.

use ebb_posix::errno::ENOSYS;
use ebb_posix::log_once::LoggedCalls;
use ebb_posix::sysno::nr;
use ebb_posix::Backend;

use super::backend::Native;

/// The unserved calls this program has said.
pub static LOGGED: LoggedCalls = LoggedCalls::new();

ebb_posix::syscall_entry!(Native, LOGGED);

/// musl's `__clone`: threads are stackful events in the next slice;
/// until then `pthread_create` fails (musl turns this into `EAGAIN`).
#[no_mangle]
pub extern "C" fn __ebb_clone(
    _func: usize,
    _stack: usize,
    _flags: i32,
    _arg: usize,
    _ptid: usize,
    _tls: usize,
    _ctid: usize,
) -> i32 {
    if LOGGED.first_time(nr::CLONE) {
        Native
            .log("ebb-posix: system call 56 (clone) is not provided: ENOSYS (said once per call)");
    }
    -38
}

/// musl's `__unmapself`: only a detached thread that ends calls it, and
/// no thread but the main one exists yet.
#[no_mangle]
pub extern "C" fn __ebb_unmapself(_base: usize, _size: usize) -> ! {
    Native.log("ebb-posix: __unmapself without threads: the program's state is broken");
    ebb_native::exit(1)
}

/// `ENOSYS` as `__ebb_clone` returns it.
const _: () = assert!(ENOSYS == 38);
