//! The two thread entries a function body cannot express, in assembly
//! (contracts in `ebb-cbuild`'s `musl_patch.rs`):
//!
//! - `__ebb_clone(func, stack, flags, arg, ptid, tls, ctid)`: clone(2)
//!   with musl's `__clone` contract. The child starts on `stack`, so
//!   `func` and `arg` travel on that stack: the parent puts them there
//!   before the call and the child pops them, calls `func(arg)` and ends
//!   the thread with exit(2) and `func`'s result. The parent returns the
//!   child's id (or `-errno`).
//! - `__ebb_unmapself(base, size)`: munmap(2) of the calling thread's
//!   stack, then exit(2), with no memory access in between (the stack is
//!   gone).
//!
//! Linux's x86_64 clone takes (flags, newsp, parent_tid, child_tid, tls)
//! in rdi, rsi, rdx, r10, r8 (`kernel/fork.c`, `CONFIG_CLONE_BACKWARDS`
//! unset on x86_64). At `call func` the child's stack is 16-byte aligned
//! as the psABI (§3.2.2) requires. Labels are numbered from 2, since
//! LLVM reads `1b`-style labels made only of 0s and 1s as binary in
//! Intel syntax.

use core::arch::global_asm;

global_asm!(
    ".globl __ebb_clone",
    ".type __ebb_clone, @function",
    "__ebb_clone:",
    // The child's stack: aligned, with func and arg on top.
    "and rsi, -16",
    "sub rsi, 16",
    "mov [rsi], rdi",
    "mov [rsi + 8], rcx",
    // clone(flags, stack, ptid, ctid, tls); flags is a C int.
    "mov edi, edx",
    "mov rdx, r8",
    "mov r10, [rsp + 8]",
    "mov r8, r9",
    "mov eax, 56",
    "syscall",
    "test eax, eax",
    "jnz 2f",
    // The child, on its new stack: no caller frame above it.
    "xor ebp, ebp",
    "pop rax",
    "pop rdi",
    "call rax",
    // exit(func's result): this thread only.
    "mov edi, eax",
    "mov eax, 60",
    "syscall",
    "ud2",
    "2:",
    "ret",
    ".size __ebb_clone, . - __ebb_clone",
    "",
    ".globl __ebb_unmapself",
    ".type __ebb_unmapself, @function",
    "__ebb_unmapself:",
    // munmap(base, size): rdi and rsi are already the arguments.
    "mov eax, 11",
    "syscall",
    // exit(0), without touching the stack just unmapped.
    "xor edi, edi",
    "mov eax, 60",
    "syscall",
    "ud2",
    ".size __ebb_unmapself, . - __ebb_unmapself",
);
