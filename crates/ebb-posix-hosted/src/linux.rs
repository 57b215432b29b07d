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
        if call.number == nr::CLONE && call.args[1] != 0 {
            // A child on a new stack would return into this function's
            // frame on a stack that does not hold it. Threads start
            // through `__ebb_clone` (`thread_entry.rs`); a clone without
            // a new stack (fork-like) is safe and passes.
            return Some(-EINVAL);
        }
        // SAFETY: the C program asked for exactly this call with these
        // arguments, as the `syscall` instruction of unpatched musl
        // would have made it, so it has the effect it has on Linux; the
        // one call whose effect differs when made from inside a function
        // (clone onto a new stack) is refused above. Bad pointers are
        // the kernel's to refuse (`-EFAULT`).
        Some(unsafe { raw::syscall6(call.number, call.args) })
    }

    fn log(&self, line: &str) {
        write_stderr_line(line);
    }
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
    fn clone_onto_a_new_stack_is_refused() {
        let call = SysCall {
            number: nr::CLONE,
            args: [0, 0x1000, 0, 0, 0, 0],
        };
        assert_eq!(Linux.serve(&call, Group::Threads), Some(-EINVAL));
    }
}
