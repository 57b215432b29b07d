//! `__ebb_syscall`, the entry musl's patched system calls call (its
//! contract: `ebb-cbuild`'s `musl_patch.rs`).

use core::sync::atomic::{AtomicBool, Ordering};

use ebb_posix::errno::EBADF;
use ebb_posix::log_once::LoggedCalls;
use ebb_posix::{Backend, Group, SysCall};
use ebb_posix_hosted::linux::Linux;

use crate::backend::{object_argument, Program};
use crate::program_stack;

/// The unserved calls this process has said.
static LOGGED: LoggedCalls = LoggedCalls::new();
/// Whether another thread's use of an object was said.
static SAID_OTHER_THREAD: AtomicBool = AtomicBool::new(false);

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
    if program_stack::on_it() {
        return ebb_posix::dispatch(&Program, &LOGGED, &call);
    }
    if let Some(fd) = object_argument(&call) {
        if !SAID_OTHER_THREAD.swap(true, Ordering::Relaxed) {
            Program.log(&format!(
                "ebb-posix: descriptor {fd} is on Ebbflow's stack and belongs to the program's \
                 main thread; call {number} from another thread: EBADF (said once)"
            ));
        }
        return -EBADF;
    }
    // Everything else is Linux's, clone and rt_sigreturn as the hosted
    // personality makes them (the group is not looked at there).
    Linux
        .serve(&call, Group::Process)
        .unwrap_or(-ebb_posix::errno::ENOSYS)
}
