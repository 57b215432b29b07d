//! `__ebb_syscall`, the entry musl's patched system calls call (its
//! contract: `ebb-cbuild`'s `musl_patch.rs`).

use core::sync::atomic::{AtomicBool, Ordering};

use ebb_posix::errno::EBADF;
use ebb_posix::log_once::LoggedCalls;
use ebb_posix::{Backend, Group, SysCall};
use ebb_posix_hosted::linux::Linux;

use crate::backend::{object_argument, Program};
use crate::{program_stack, remote};

/// The unserved calls this process has said.
static LOGGED: LoggedCalls = LoggedCalls::new();
/// Whether another thread's use of an object was said.
static SAID_OTHER_THREAD: AtomicBool = AtomicBool::new(false);
/// Whether a call of the program's is being served. Calls made while
/// one is (this library's own work inside it: allocating, logging, the
/// TAP device's writes; or a signal handler that interrupted the
/// program there) are not the program's and go to Linux. Only the
/// program's thread ever sets it.
static IN_CALL: AtomicBool = AtomicBool::new(false);

/// musl's system-call entry: call `number` with Linux's arguments; the
/// result, or `-errno`.
#[no_mangle]
pub extern "C" fn __ebb_syscall(
    number: usize,
    a: usize,
    b: usize,
    c: usize,
    d: usize,
    e: usize,
    f: usize,
) -> isize {
    let call = SysCall {
        number,
        args: [a, b, c, d, e, f],
    };
    if program_stack::on_it() && !IN_CALL.swap(true, Ordering::Relaxed) {
        let result = ebb_posix::dispatch(&Program, &LOGGED, &call);
        IN_CALL.store(false, Ordering::Relaxed);
        return result;
    }
    if object_argument(&call).is_some() {
        if !program_stack::on_it() {
            // Another thread's: made on core 0, where the objects are.
            if let Some(result) = remote::call_on_core0(call, &LOGGED) {
                return result;
            }
        }
        if !SAID_OTHER_THREAD.swap(true, Ordering::Relaxed) {
            // No formatting: this may be a signal handler in the middle
            // of anything.
            Program.log(
                "ebb-posix: a call inside another, or with no node running, named a \
                 descriptor on Ebbflow's stack: EBADF (said once)",
            );
        }
        return -EBADF;
    }
    // Everything else is Linux's, clone and rt_sigreturn as the hosted
    // personality makes them (the group is not looked at there).
    Linux
        .serve(&call, Group::Process)
        .unwrap_or(-ebb_posix::errno::ENOSYS)
}
