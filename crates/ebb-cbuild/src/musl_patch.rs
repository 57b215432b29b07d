//! The patch that makes musl's system calls function calls into Ebbflow:
//! every place musl 1.2.3 (x86_64) executes the `syscall` instruction
//! calls one of three external functions the image (native) or the
//! process (hosted) provides instead:
//!
//! - `long __ebb_syscall(long n, long a, long b, long c, long d, long e,
//!   long f)`: the system call `n` with Linux's arguments, returning what
//!   Linux would (a negative errno on failure);
//! - `int __ebb_clone(int (*func)(void *), void *stack, int flags, void
//!   *arg, pid_t *ptid, void *tls, pid_t *ctid)`: musl's own `__clone`
//!   contract (src/thread/clone.c's comment in musl): start `func(arg)` on
//!   `stack` as a new thread, which exits with `func`'s result; return its
//!   id. A function cannot return into a new stack, so the dispatcher
//!   owns that part;
//! - `_Noreturn void __ebb_unmapself(void *base, size_t size)`: unmap the
//!   calling thread's own stack and exit the thread, without returning
//!   onto the stack it just unmapped (musl's `__unmapself`).
//!
//! Callers of the assembly entry points below are C functions, so after
//! our `call` the System V AMD64 ABI (psABI §3.2) applies: the callee may
//! clobber rax, rcx, rdx, rsi, rdi, r8-r11 and the vector registers, which
//! the C callers already treat as clobbered; rsp must be 16-byte aligned
//! at the `call`. On entry to an assembly function called from C, rsp is
//! 8 modulo 16 (the return address), hence the `sub $8,%rsp` pads.
//!
//! Arguments the call does not use are left unspecified, as the kernel
//! ignores registers a system call does not take.
//!
//! The texts are musl 1.2.3's (Debian `musl` 1.2.3-1); another version
//! fails to patch, naming the file ([`crate::patch`]).

use crate::patch::Replacement;

const SYSCALL_ARCH: &str = "arch/x86_64/syscall_arch.h";

/// The patch, in order.
pub const REPLACEMENTS: &[Replacement] = &[
    // __syscall0..6: musl's C code makes every system call through these
    // inline functions (src/internal/syscall.h). A plain C call lets the
    // compiler save what the ABI says a call clobbers (the `syscall`
    // instruction clobbered only rcx and r11), and n, a..f pass in
    // rdi, rsi, rdx, rcx, r8, r9 and the stack as for any C function.
    Replacement {
        file: SYSCALL_ARCH,
        upstream: "static __inline long __syscall0(long n)\n\
                   {\n\
                   \tunsigned long ret;\n\
                   \t__asm__ __volatile__ (\"syscall\" : \"=a\"(ret) : \"a\"(n) : \"rcx\", \"r11\", \"memory\");\n\
                   \treturn ret;\n\
                   }\n",
        ours: "long __ebb_syscall(long, long, long, long, long, long, long);\n\
               \n\
               static __inline long __syscall0(long n)\n\
               {\n\
               \treturn __ebb_syscall(n, 0, 0, 0, 0, 0, 0);\n\
               }\n",
    },
    Replacement {
        file: SYSCALL_ARCH,
        upstream: "static __inline long __syscall1(long n, long a1)\n\
                   {\n\
                   \tunsigned long ret;\n\
                   \t__asm__ __volatile__ (\"syscall\" : \"=a\"(ret) : \"a\"(n), \"D\"(a1) : \"rcx\", \"r11\", \"memory\");\n\
                   \treturn ret;\n\
                   }\n",
        ours: "static __inline long __syscall1(long n, long a1)\n\
               {\n\
               \treturn __ebb_syscall(n, a1, 0, 0, 0, 0, 0);\n\
               }\n",
    },
    Replacement {
        file: SYSCALL_ARCH,
        upstream: "static __inline long __syscall2(long n, long a1, long a2)\n\
                   {\n\
                   \tunsigned long ret;\n\
                   \t__asm__ __volatile__ (\"syscall\" : \"=a\"(ret) : \"a\"(n), \"D\"(a1), \"S\"(a2)\n\
                   \t\t\t\t\t\t  : \"rcx\", \"r11\", \"memory\");\n\
                   \treturn ret;\n\
                   }\n",
        ours: "static __inline long __syscall2(long n, long a1, long a2)\n\
               {\n\
               \treturn __ebb_syscall(n, a1, a2, 0, 0, 0, 0);\n\
               }\n",
    },
    Replacement {
        file: SYSCALL_ARCH,
        upstream: "static __inline long __syscall3(long n, long a1, long a2, long a3)\n\
                   {\n\
                   \tunsigned long ret;\n\
                   \t__asm__ __volatile__ (\"syscall\" : \"=a\"(ret) : \"a\"(n), \"D\"(a1), \"S\"(a2),\n\
                   \t\t\t\t\t\t  \"d\"(a3) : \"rcx\", \"r11\", \"memory\");\n\
                   \treturn ret;\n\
                   }\n",
        ours: "static __inline long __syscall3(long n, long a1, long a2, long a3)\n\
               {\n\
               \treturn __ebb_syscall(n, a1, a2, a3, 0, 0, 0);\n\
               }\n",
    },
    Replacement {
        file: SYSCALL_ARCH,
        upstream: "static __inline long __syscall4(long n, long a1, long a2, long a3, long a4)\n\
                   {\n\
                   \tunsigned long ret;\n\
                   \tregister long r10 __asm__(\"r10\") = a4;\n\
                   \t__asm__ __volatile__ (\"syscall\" : \"=a\"(ret) : \"a\"(n), \"D\"(a1), \"S\"(a2),\n\
                   \t\t\t\t\t\t  \"d\"(a3), \"r\"(r10): \"rcx\", \"r11\", \"memory\");\n\
                   \treturn ret;\n\
                   }\n",
        ours: "static __inline long __syscall4(long n, long a1, long a2, long a3, long a4)\n\
               {\n\
               \treturn __ebb_syscall(n, a1, a2, a3, a4, 0, 0);\n\
               }\n",
    },
    Replacement {
        file: SYSCALL_ARCH,
        upstream: "static __inline long __syscall5(long n, long a1, long a2, long a3, long a4, long a5)\n\
                   {\n\
                   \tunsigned long ret;\n\
                   \tregister long r10 __asm__(\"r10\") = a4;\n\
                   \tregister long r8 __asm__(\"r8\") = a5;\n\
                   \t__asm__ __volatile__ (\"syscall\" : \"=a\"(ret) : \"a\"(n), \"D\"(a1), \"S\"(a2),\n\
                   \t\t\t\t\t\t  \"d\"(a3), \"r\"(r10), \"r\"(r8) : \"rcx\", \"r11\", \"memory\");\n\
                   \treturn ret;\n\
                   }\n",
        ours: "static __inline long __syscall5(long n, long a1, long a2, long a3, long a4, long a5)\n\
               {\n\
               \treturn __ebb_syscall(n, a1, a2, a3, a4, a5, 0);\n\
               }\n",
    },
    Replacement {
        file: SYSCALL_ARCH,
        upstream: "static __inline long __syscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6)\n\
                   {\n\
                   \tunsigned long ret;\n\
                   \tregister long r10 __asm__(\"r10\") = a4;\n\
                   \tregister long r8 __asm__(\"r8\") = a5;\n\
                   \tregister long r9 __asm__(\"r9\") = a6;\n\
                   \t__asm__ __volatile__ (\"syscall\" : \"=a\"(ret) : \"a\"(n), \"D\"(a1), \"S\"(a2),\n\
                   \t\t\t\t\t\t  \"d\"(a3), \"r\"(r10), \"r\"(r8), \"r\"(r9) : \"rcx\", \"r11\", \"memory\");\n\
                   \treturn ret;\n\
                   }\n",
        ours: "static __inline long __syscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6)\n\
               {\n\
               \treturn __ebb_syscall(n, a1, a2, a3, a4, a5, a6);\n\
               }\n",
    },
    // Without the vDSO symbols, clock_gettime and sched_getcpu make their
    // system calls instead of looking up Linux's vDSO
    // (src/time/clock_gettime.c, src/sched/sched_getcpu.c, both under
    // `#ifdef VDSO_..._SYM`; src/internal/vdso.c under VDSO_USEFUL):
    // hosted, the vDSO would bypass the dispatcher.
    Replacement {
        file: SYSCALL_ARCH,
        upstream: "#define VDSO_USEFUL\n\
                   #define VDSO_CGT_SYM \"__vdso_clock_gettime\"\n\
                   #define VDSO_CGT_VER \"LINUX_2.6\"\n\
                   #define VDSO_GETCPU_SYM \"__vdso_getcpu\"\n\
                   #define VDSO_GETCPU_VER \"LINUX_2.6\"\n",
        ours: "",
    },
    // __syscall_cp_asm(&cancel, nr, u, v, w, x, y, z), called from C
    // (src/thread/pthread_cancel.c): the cancellation check stays, then
    // the arguments move one register down, the seventh (z, at 16(%rsp))
    // goes on the stack, which aligns rsp to 16 for the call. The call
    // is the range's last instruction: its return address is __cp_end
    // itself, so once the system call has run (a read consumed data, a
    // close closed) the cancellation handler, which treats
    // __cp_begin <= pc < __cp_end as "not yet made", no longer sees the
    // thread inside the range; the stack is popped at __cp_end (next
    // replacement).
    // Cancellation (pthread_cancel) acts on a thread inside
    // [__cp_begin, __cp_end) when a signal arrives; with the call, a
    // blocked thread is inside the dispatcher instead, so a cancellation
    // would wait for the call to return. That is right only while signals
    // are not served (tkill and rt_sigaction answer ENOSYS); serving them
    // means the dispatcher checks for cancellation itself.
    Replacement {
        file: "src/thread/x86_64/syscall_cp.s",
        upstream: "\tmov %rdi,%r11\n\
                   \tmov %rsi,%rax\n\
                   \tmov %rdx,%rdi\n\
                   \tmov %rcx,%rsi\n\
                   \tmov %r8,%rdx\n\
                   \tmov %r9,%r10\n\
                   \tmov 8(%rsp),%r8\n\
                   \tmov 16(%rsp),%r9\n\
                   \tmov %r11,8(%rsp)\n\
                   \tsyscall\n",
        ours: "\tmov %rsi,%rdi\n\
               \tmov %rdx,%rsi\n\
               \tmov %rcx,%rdx\n\
               \tmov %r8,%rcx\n\
               \tmov %r9,%r8\n\
               \tmov 8(%rsp),%r9\n\
               \tmov 16(%rsp),%rax\n\
               \tpush %rax\n\
               \tcall __ebb_syscall\n",
    },
    Replacement {
        file: "src/thread/x86_64/syscall_cp.s",
        upstream: "__cp_end:\n\
                   \tret\n",
        ours: "__cp_end:\n\
               \tadd $8,%rsp\n\
               \tret\n",
    },
    // __clone has __ebb_clone's C signature: a tail jump passes all seven
    // arguments untouched (the seventh stays at 8(%rsp)), and __ebb_clone
    // returns to __clone's caller. The child's start on its own stack and
    // its exit with func's result are the dispatcher's.
    Replacement {
        file: "src/thread/x86_64/clone.s",
        upstream: "\txor %eax,%eax\n\
                   \tmov $56,%al\n\
                   \tmov %rdi,%r11\n\
                   \tmov %rdx,%rdi\n\
                   \tmov %r8,%rdx\n\
                   \tmov %r9,%r8\n\
                   \tmov 8(%rsp),%r10\n\
                   \tmov %r11,%r9\n\
                   \tand $-16,%rsi\n\
                   \tsub $8,%rsi\n\
                   \tmov %rcx,(%rsi)\n\
                   \tsyscall\n\
                   \ttest %eax,%eax\n\
                   \tjnz 1f\n\
                   \txor %ebp,%ebp\n\
                   \tpop %rdi\n\
                   \tcall *%r9\n\
                   \tmov %eax,%edi\n\
                   \txor %eax,%eax\n\
                   \tmov $60,%al\n\
                   \tsyscall\n\
                   \thlt\n\
                   1:\tret\n",
        ours: "\tjmp __ebb_clone\n",
    },
    // __set_thread_area(tp) is arch_prctl(ARCH_SET_FS = 0x1002, tp)
    // (158 on x86_64); its result returns in rax as before.
    Replacement {
        file: "src/thread/x86_64/__set_thread_area.s",
        upstream: "\tmov %rdi,%rsi           /* shift for syscall */\n\
                   \tmovl $0x1002,%edi       /* SET_FS register */\n\
                   \tmovl $158,%eax          /* set fs segment to */\n\
                   \tsyscall                 /* arch_prctl(SET_FS, arg)*/\n",
        ours: "\tmov %rdi,%rdx\n\
               \tmov $0x1002,%esi\n\
               \tmov $158,%edi\n\
               \tsub $8,%rsp\n\
               \tcall __ebb_syscall\n\
               \tadd $8,%rsp\n",
    },
    // __unmapself(base, size) munmaps the stack it runs on, then exits:
    // no call may push onto that stack after the munmap, so one tail jump
    // hands both steps, with the same two arguments, to __ebb_unmapself.
    Replacement {
        file: "src/thread/x86_64/__unmapself.s",
        upstream: "\tmovl $11,%eax   /* SYS_munmap */\n\
                   \tsyscall         /* munmap(arg2,arg3) */\n\
                   \txor %rdi,%rdi   /* exit() args: always return success */\n\
                   \tmovl $60,%eax   /* SYS_exit */\n\
                   \tsyscall         /* exit(0) */\n",
        ours: "\tjmp __ebb_unmapself\n",
    },
    // vfork (58): upstream keeps its return address in rdx because the
    // child returns first on the shared stack. A dispatcher call cannot
    // share a stack between two returns, so the dispatcher implements
    // vfork as fork or fails it; the result goes to __syscall_ret as
    // before.
    Replacement {
        file: "src/process/x86_64/vfork.s",
        upstream: "\tpop %rdx\n\
                   \tmov $58,%eax\n\
                   \tsyscall\n\
                   \tpush %rdx\n",
        ours: "\tmov $58,%edi\n\
               \tsub $8,%rsp\n\
               \tcall __ebb_syscall\n\
               \tadd $8,%rsp\n",
    },
    // __restore_rt: the return address of signal handlers, with rsp at the
    // signal frame; rt_sigreturn (15) never returns. Linux reads the frame
    // at rsp and the call moves rsp, so the frame's address goes as the
    // first argument (the kernel takes none) and the dispatcher restores
    // rsp before the real call (hosted: `ebb-posix-hosted`'s
    // `raw::rt_sigreturn`; natively no signal is ever delivered, so no
    // handler returns here). rsp is then aligned for the call; ud2 traps
    // should the dispatcher ever return.
    Replacement {
        file: "src/signal/x86_64/restore.s",
        upstream: "\tmov $15, %rax\n\tsyscall\n",
        ours: "\tmov %rsp,%rsi\n\
               \tand $-16,%rsp\n\
               \tmov $15,%edi\n\
               \tcall __ebb_syscall\n\
               \tud2\n",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_upstream_text_executes_a_syscall_or_enables_the_vdso() {
        for replacement in REPLACEMENTS {
            assert!(
                replacement.upstream.contains("syscall")
                    || replacement.upstream.contains("VDSO")
                    || replacement.upstream.starts_with("__cp_end:"),
                "{}",
                replacement.file
            );
            assert!(
                !replacement.ours.contains("\tsyscall"),
                "{}",
                replacement.file
            );
        }
    }
}
