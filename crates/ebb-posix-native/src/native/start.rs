//! Starting the C program: the block Linux puts on a new process's stack
//! (System V ABI AMD64 §3.4.1, "Initial Stack and Register State":
//! argument pointers, a null, environment pointers, a null, then the
//! auxiliary vector's pairs ending in `AT_NULL`), built on the heap and
//! handed to musl's `__libc_start_main`, which finds the environment and
//! the auxiliary vector after `argv` exactly as on Linux, sets up TLS and
//! stdio, runs `main` and ends in `exit`.
//!
//! The program's threads are stackful events of core 0's event loop
//! (`threads.rs`); the first runs `__libc_start_main` on an 8 MiB stack.
//! The program's exit code ends the image (`backend.rs`).

use alloc::boxed::Box;
use alloc::vec::Vec;

use ebb_posix::Backend;

use super::{backend, files, memory, process, threads};

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

    /// The image's ELF header, loaded at its start (`link.ld`'s
    /// `FILEHDR`); the linker defines the symbol.
    static __ehdr_start: u8;
}

/// The auxiliary vector's keys (`include/uapi/linux/auxvec.h`, `elf.h`).
const AT_NULL: usize = 0;
const AT_PHDR: usize = 3;
const AT_PHENT: usize = 4;
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
    match files::load_packed() {
        Ok(Some(loaded)) if ebb_native::runtime::options().verbose => {
            backend::Native.log(&alloc::format!(
                "ebb-posix: the packed files: {} files ({} bytes) in {} directories",
                loaded.files,
                loaded.bytes,
                loaded.dirs
            ));
        }
        Ok(_) => {}
        Err(why) => {
            backend::Native.log(&alloc::format!("ebb-posix: {why}"));
            ebb_native::exit(1);
        }
    }
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
    // guard seed (zeros with no random source at all: the seed is not a
    // secret the program's correctness depends on).
    let random: &'static mut [u8; 16] = Box::leak(Box::new([0u8; 16]));
    let _ = process::getrandom(random.as_mut_ptr() as usize, random.len());
    let headers = program_headers();
    let mut block: Vec<usize> = strings.iter().map(|s| s.as_ptr() as usize).collect();
    block.push(0); // the end of argv
    block.push(0); // an empty environment
    let auxv = [
        (AT_PAGESZ, 4096),
        (AT_CLKTCK, 100),
        (AT_HWCAP, 0),
        // musl finds the PT_TLS segment (the initial image of the
        // program's `__thread` data) through these.
        (AT_PHDR, headers.address),
        (AT_PHENT, headers.entry_size),
        (AT_PHNUM, headers.count),
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
    let block = block.leak().as_mut_ptr() as usize;
    let argc = i32::try_from(strings.len()).unwrap_or(i32::MAX);
    let ran = ebb_native::run(move || {
        let started = threads::start_main(move || {
            ebb_native::start_ticks(TICK_NS);
            // musl's start-up ends in exit_group, which ends the image.
            // SAFETY: the block has Linux's initial layout (argc string
            // pointers first) and is leaked; `main` is the program's.
            unsafe { __libc_start_main(main, argc, block as *mut usize, 0, 0, 0) };
        });
        if !started {
            backend::Native.log("ebb-posix: no memory for the program's main stack");
            ebb_native::exit(1);
        }
    });
    if let Err(error) = ran {
        backend::Native.log(&alloc::format!(
            "ebb-posix: the event loop cannot run the program: {error}"
        ));
    }
    ebb_native::exit(1)
}

/// Where the image's program headers are, for the auxiliary vector.
struct ProgramHeaders {
    address: usize,
    entry_size: usize,
    count: usize,
}

/// Reads the program headers' place from the loaded ELF header (ELF-64
/// Object File Format, "ELF Header": `e_phoff` at byte 32, `e_phentsize`
/// at 54, `e_phnum` at 56).
fn program_headers() -> ProgramHeaders {
    let start = (&raw const __ehdr_start).cast::<u8>();
    // SAFETY: `link.ld` loads the 64-byte ELF header at `__ehdr_start`
    // (FILEHDR in the image's segment), and nothing writes it.
    let header = unsafe { core::slice::from_raw_parts(start, 64) };
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([header[at], header[at + 1]]));
    let mut offset = [0u8; 8];
    offset.copy_from_slice(&header[32..40]);
    ProgramHeaders {
        address: start as usize + usize::try_from(u64::from_le_bytes(offset)).unwrap_or(0),
        entry_size: u16_at(54),
        count: u16_at(56),
    }
}
