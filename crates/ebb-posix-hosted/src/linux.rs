//! The hosted backend: a call the personality serves is made on Linux
//! exactly as the unpatched musl would have made it (issue 18: "the
//! dispatcher serves what Ebbflow provides and passes the rest to
//! Linux"; today Ebbflow provides nothing of its own here, so every
//! served call passes).

use ebb_posix::errno::EINVAL;
use ebb_posix::sysno::nr;
use ebb_posix::{Backend, Group, SysCall};

use crate::raw;

/// Linux, through the `syscall` instruction.
pub struct Linux;

impl Backend for Linux {
    fn serve(&self, call: &SysCall, _group: Group) -> Option<isize> {
        if call.number == nr::CLONE && !is_fork_like(call.args[0], call.args[1]) {
            // A child on a new stack would return into this function's
            // frame on a stack that does not hold it; a child sharing the
            // parent's memory on the parent's stack (CLONE_VM without a
            // new stack, as vfork) would return through the parent's
            // frames and overwrite them before the parent resumes.
            // Threads start through `__ebb_clone` (`thread_entry.rs`).
            return Some(-EINVAL);
        }
        if call.number == nr::RT_SIGRETURN {
            // A handler's return reaches here from musl's `__restore_rt`
            // (`musl_patch.rs`), which passes the stack pointer it was
            // entered with, the signal frame's, as the first argument; a
            // program calling rt_sigreturn itself passes what it likes,
            // which Linux trusts as much (it restores whatever lies at
            // the stack pointer). This dispatcher's frames, abandoned,
            // hold nothing to drop.
            // SAFETY: the argument is the signal frame's, or a program's
            // own with Linux's meaning: `raw::rt_sigreturn`'s contract.
            unsafe { raw::rt_sigreturn(call.args[0]) }
        }
        // Clone onto a new stack, the one call that differs from inside a
        // function, was refused above.
        // SAFETY: the program asked for this very call, as unpatched musl
        // would make it; the kernel refuses bad pointers with -EFAULT.
        Some(unsafe { raw::syscall6(call.number, call.args) })
    }

    fn log(&self, line: &str) {
        write_stderr_line(line);
    }
}

/// clone(2)'s flag for a child sharing the parent's memory (`sched.h`).
const CLONE_VM: usize = 0x100;

/// Whether clone(`flags`, `stack`) is a fork: a copy of the parent's
/// memory, on its own copy of the stack, which may return through this
/// function as the parent does.
#[must_use]
pub fn is_fork_like(flags: usize, stack: usize) -> bool {
    stack == 0 && flags & CLONE_VM == 0
}

/// Writes `line` and a newline to standard error in one `write`, so that
/// lines from threads do not interleave; a line longer than the buffer
/// is cut.
pub fn write_stderr_line(line: &str) {
    let mut buffer = [0u8; 256];
    let take = line.len().min(buffer.len() - 1);
    buffer[..take].copy_from_slice(&line.as_bytes()[..take]);
    buffer[take] = b'\n';
    raw::write(2, &buffer[..=take]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_call_passes_to_linux() {
        let call = SysCall {
            number: nr::GETPID,
            args: [0; 6],
        };
        let pid = Linux.serve(&call, Group::Process);
        assert_eq!(pid, Some(isize::try_from(std::process::id()).unwrap()));
    }

    #[test]
    fn clone_onto_a_new_stack_or_into_the_same_memory_is_refused() {
        for (flags, stack) in [(0, 0x1000), (CLONE_VM, 0), (CLONE_VM | 0x4000, 0)] {
            let call = SysCall {
                number: nr::CLONE,
                args: [flags, stack, 0, 0, 0, 0],
            };
            assert_eq!(
                Linux.serve(&call, Group::Threads),
                Some(-EINVAL),
                "{flags:#x}"
            );
        }
        assert!(is_fork_like(17, 0), "SIGCHLD alone: fork");
    }
}
