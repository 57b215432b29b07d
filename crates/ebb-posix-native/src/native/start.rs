//! Starting the C program: the block Linux puts on a new process's stack
//! (System V ABI AMD64 §3.4.1, "Initial Stack and Register State":
//! argument pointers, a null, environment pointers, a null, then the
//! auxiliary vector's pairs ending in `AT_NULL`), built on the heap and
//! handed to musl's `__libc_start_main`, which finds the environment and
//! the auxiliary vector after `argv` exactly as on Linux, sets up TLS and
//! stdio, runs `main` and ends in `exit`.
//!
//! The program runs on the core's own stack (512 KiB, a guard page
//! below); its exit code ends the image (`backend.rs`).

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::{files, memory, process};

extern "C" {
    /// musl's `src/env/__libc_start_main.c`; the three function pointers
    /// after `argv` are unused in musl 1.2.3 (passed as 0).
    fn __libc_start_main(
        main: unsafe extern "C" fn(i32, *mut *mut u8, *mut *mut u8) -> i32,
        argc: i32,
        argv: *mut usize,
        init: usize,
        fini: usize,
        ldso: usize,
    ) -> i32;

    /// The C program's `main`.
    fn main(argc: i32, argv: *mut *mut u8, envp: *mut *mut u8) -> i32;
}

/// The auxiliary vector's keys (`include/uapi/linux/auxvec.h`, `elf.h`).
const AT_NULL: usize = 0;
const AT_PHNUM: usize = 5;
const AT_PAGESZ: usize = 6;
const AT_UID: usize = 11;
const AT_EUID: usize = 12;
const AT_GID: usize = 13;
const AT_EGID: usize = 14;
const AT_HWCAP: usize = 16;
const AT_CLKTCK: usize = 17;
const AT_SECURE: usize = 23;
const AT_RANDOM: usize = 25;
const AT_EXECFN: usize = 31;

/// The program's tick: a timer interrupt every 10 ms (Linux's HZ=100),
/// with interrupts on while it runs, as a preemptible thread will run;
/// interrupts take their own stack, so a red zone is safe (issue 18).
const TICK_NS: u64 = 10_000_000;

/// Runs the linked C program as `name` with `args`; never returns (the
/// program's exit ends the image).
pub fn start_c_program(name: &str, args: &[&str]) -> ! {
    memory::init();
    files::init();
    let strings: Vec<&'static [u8]> = core::iter::once(name)
        .chain(args.iter().copied())
        .map(|word| {
            let mut bytes = Vec::with_capacity(word.len() + 1);
            bytes.extend_from_slice(word.as_bytes());
            bytes.push(0);
            &*bytes.leak()
        })
        .collect();
    // AT_RANDOM: 16 random bytes, musl's stack-protector and pointer
    // guard seed (zeros without RDRAND: the seed is not a secret the
    // program's correctness depends on).
    let random: &'static mut [u8; 16] = Box::leak(Box::new([0u8; 16]));
    let _ = process::getrandom(random.as_mut_ptr() as usize, random.len());
    let mut block: Vec<usize> = strings.iter().map(|s| s.as_ptr() as usize).collect();
    block.push(0); // the end of argv
    block.push(0); // an empty environment
    let auxv = [
        (AT_PAGESZ, 4096),
        (AT_CLKTCK, 100),
        (AT_HWCAP, 0),
        // No program headers: the C program has no TLS image yet (its
        // `__thread` data needs a PT_TLS segment in the image: next
        // slice, with threads).
        (AT_PHNUM, 0),
        (AT_UID, 0),
        (AT_EUID, 0),
        (AT_GID, 0),
        (AT_EGID, 0),
        (AT_SECURE, 0),
        (AT_RANDOM, random.as_ptr() as usize),
        (AT_EXECFN, strings[0].as_ptr() as usize),
        (AT_NULL, 0),
    ];
    for (key, value) in auxv {
        block.push(key);
        block.push(value);
    }
    let block = block.leak();
    let argc = i32::try_from(strings.len()).unwrap_or(i32::MAX);
    ebb_native::start_ticks(TICK_NS);
    // SAFETY: the block has Linux's initial layout (argc pointers to
    // NUL-terminated strings first) and is leaked, so it outlives the
    // program; `main` is the linked program's, and musl's start-up ends in
    // exit_group, which ends the image.
    unsafe { __libc_start_main(main, argc, block.as_mut_ptr(), 0, 0, 0) };
    ebb_native::exit(1)
}
