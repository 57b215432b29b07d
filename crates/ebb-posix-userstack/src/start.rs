//! `__wrap_main`: what musl's start-up calls instead of the program's
//! `main` (the program is linked with `--wrap=main`). It starts a
//! one-core hosted node on the user-space stack and runs the program's
//! `main` on core 0 as a stackful event; the program's `exit` ends the
//! process.

use ebb_event::{spawn_stackful_on, ForeignStack};

use crate::{program_stack, settings};

extern "C" {
    /// The program's `main` (`--wrap=main` names it so).
    fn __real_main(argc: i32, argv: *mut *mut u8, envp: *mut *mut u8) -> i32;
}

/// This library's allocations (the stack's buffers, the objects, the
/// copies `write` makes) come from Ebbflow's allocator, as a hosted
/// application's do: per-core slabs. Through musl's malloc they went
/// through mallocng, which maps and unmaps a size class's group as its
/// last object comes and goes: a `munmap` (and a TLB flush) per packet.
#[global_allocator]
static ALLOCATOR: ebb_mem::hosted::HostedAllocator = ebb_mem::hosted::HostedAllocator::new();

/// The lowest number the library's own descriptors take.
const LIBRARY_FDS_FROM: usize = 64;

/// The program's main stack: 8 MiB, Linux's default `ulimit -s`.
const MAIN_STACK_BYTES: usize = 8 << 20;

/// The program's `main`, as musl's `__libc_start_main` calls it.
#[no_mangle]
pub extern "C" fn __wrap_main(argc: i32, argv: *mut *mut u8, envp: *mut *mut u8) -> i32 {
    let settings = match settings::read(|name| std::env::var(name).ok()) {
        Ok(settings) => settings,
        Err(why) => {
            eprintln!("ebbflow userstack: {why}");
            return 1;
        }
    };
    // The library's own descriptors (the TAP device, eventfds, io_uring)
    // go above the numbers a program expects to get first: its first
    // pipe is 3 and 4, as on Linux.
    let reserved = crate::linux::reserve_below(LIBRARY_FDS_FROM);
    let mut config = ebb_hosted::Config::one_core_side_by_side();
    if let Some(cpu) = settings.cpu {
        config.cpus = Some(vec![cpu]);
        config.pin = true;
    }
    if let Err(why) = ebb_userstack::install(&mut config, settings.options) {
        eprintln!("ebbflow userstack: {why}");
        return 1;
    }
    let (argv, envp) = (argv as usize, envp as usize);
    let ran = ebb_hosted::run_with(
        config,
        move || {
            crate::linux::release_reserved(&reserved);
            start_program(argc, argv, envp);
        },
        |node| crate::remote::set_events(node.events),
    );
    match ran {
        // The node stopped without the program's exit (nothing stops it
        // but the program): say so.
        Ok(code) => {
            eprintln!("ebbflow userstack: the event loop stopped before the program exited");
            code.max(1)
        }
        Err(why) => {
            eprintln!("ebbflow userstack: {why}");
            1
        }
    }
}

/// The program's main stack: [`MAIN_STACK_BYTES`] mapped for it above a
/// 1 MiB guard gap that faults (an overflow stops the process with
/// SIGSEGV rather than writing over the heap; as wide as Linux's stack
/// guard gap, so that a C frame larger than a page, built without
/// stack-clash protection, cannot jump over it); `(limit, base)`, or
/// `None` when Linux has no memory for it.
fn map_main_stack() -> Option<(usize, usize)> {
    const GUARD: usize = 1 << 20;
    let length = MAIN_STACK_BYTES + GUARD;
    // SAFETY: an anonymous private mapping at an address Linux chooses
    // touches no memory of ours.
    let start = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            length,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if start == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: the start of the mapping just made, which nothing uses: it
    // becomes the guard.
    if unsafe { libc::mprotect(start, GUARD, libc::PROT_NONE) } != 0 {
        // SAFETY: the mapping just made, which nothing uses.
        unsafe { libc::munmap(start, length) };
        return None;
    }
    let limit = start as usize + GUARD;
    Some((limit, limit + MAIN_STACK_BYTES))
}

/// On core 0: runs the program's `main` on a stack of its own.
fn start_program(argc: i32, argv: usize, envp: usize) {
    let Some((limit, base)) = map_main_stack() else {
        eprintln!("ebbflow userstack: no memory for the program's stack");
        std::process::exit(1);
    };
    // SAFETY: the range is a mapping made for it, writable, never unmapped
    // and used by nothing else: the program's stack for the process's life.
    let Some(stack) = (unsafe { ForeignStack::new(limit, base) }) else {
        eprintln!("ebbflow userstack: the program's stack is too small");
        std::process::exit(1);
    };
    program_stack::set(limit, base);
    crate::remote::set_core0();
    crate::remote::wait_for_events();
    drop(spawn_stackful_on(stack, move || {
        // SAFETY: musl's start-up passed these to `main` (argc strings,
        // then the environment), and they live for the process's life.
        let code = unsafe { __real_main(argc, argv as *mut *mut u8, envp as *mut *mut u8) };
        // musl's exit: atexit handlers, stdio flushed, then exit_group.
        std::process::exit(code)
    }));
}
