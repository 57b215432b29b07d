//! The `syscall` instruction: the one place this library enters Linux
//! (x86_64 system-call ABI, `arch/x86/entry/entry_64.S`: number in rax,
//! arguments in rdi, rsi, rdx, r10, r8, r9; result in rax; rcx and r11
//! clobbered).

use core::arch::asm;

/// Makes system call `number` with `args` and returns Linux's result
/// (`-errno` on failure).
///
/// # Safety
///
/// The call must be one the caller may make with these arguments: it
/// runs with this process's full authority (it may unmap memory Rust
/// still uses, or end a thread). Pointers are checked by the kernel,
/// which returns `-EFAULT` for a bad one.
pub unsafe fn syscall6(number: usize, args: [usize; 6]) -> isize {
    let result: usize;
    // SAFETY: the caller vouches for the call (this fn's contract); the
    // asm names every register the syscall ABI reads or clobbers, uses no
    // user stack, and does not claim `preserves_flags`.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") number => result,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            in("r9") args[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    isize::from_ne_bytes(result.to_ne_bytes())
}

/// rt_sigreturn(2): back from a signal handler, to the context the
/// kernel saved in the signal frame. Linux finds the frame at the stack
/// pointer of the `syscall` (`arch/x86/kernel/signal_64.c`: the
/// `rt_sigframe` is `regs->sp` less its return address), and the call to
/// the dispatcher has moved the stack pointer since musl's `__restore_rt`
/// was entered; so the stack pointer is set back to `frame`, the one
/// `__restore_rt` was entered with (`musl_patch.rs` passes it), first.
///
/// # Safety
///
/// `frame` must be that stack pointer, or what a program making
/// rt_sigreturn itself chose: as on Linux, whatever lies there is
/// restored as the program's registers (or, unreadable, raises SIGSEGV).
/// The rest of the current stack (this call's frames and the
/// dispatcher's) is abandoned, which is sound since none of them owns
/// anything to drop.
pub unsafe fn rt_sigreturn(frame: usize) -> ! {
    // rt_sigreturn(2) does not return on success, the kernel replacing
    // every register with the saved context; ud2 traps should it fail.
    // SAFETY: the caller vouches for `frame` (this fn's contract); the
    // call never comes back into this frame.
    unsafe {
        asm!(
            "mov rsp, {frame}",
            "syscall",
            "ud2",
            frame = in(reg) frame,
            in("rax") ebb_posix::sysno::nr::RT_SIGRETURN,
            options(noreturn),
        );
    }
}

/// `write(fd, bytes)`, once (a short write is left short: it is for log
/// lines).
pub fn write(fd: usize, bytes: &[u8]) -> isize {
    let args = [fd, bytes.as_ptr() as usize, bytes.len(), 0, 0, 0];
    // SAFETY: write(2) only reads `bytes`, which is valid for its whole
    // length for the duration of the call.
    unsafe { syscall6(ebb_posix::sysno::nr::WRITE, args) }
}

/// `exit_group(code)`: ends the process.
pub fn exit_group(code: usize) -> ! {
    loop {
        // SAFETY: exit_group(2) takes no pointer and ends every thread;
        // nothing runs after it (the loop is for the type checker).
        unsafe { syscall6(ebb_posix::sysno::nr::EXIT_GROUP, [code, 0, 0, 0, 0, 0]) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_posix::sysno::nr;

    #[test]
    fn getpid_is_the_process_id() {
        // SAFETY: getpid(2) takes no arguments and changes nothing.
        let pid = unsafe { syscall6(nr::GETPID, [0; 6]) };
        assert_eq!(pid, isize::try_from(std::process::id()).unwrap());
    }

    #[test]
    fn a_failure_is_a_negative_errno() {
        // SAFETY: close(2) of a descriptor that cannot be open changes
        // nothing.
        let result = unsafe { syscall6(nr::CLOSE, [usize::MAX >> 2, 0, 0, 0, 0, 0]) };
        assert_eq!(result, -ebb_posix::errno::EBADF);
    }
}
