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
            crate::linux::release(&reserved);
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

/// On core 0: runs the program's `main` on a stack of its own.
fn start_program(argc: i32, argv: usize, envp: usize) {
    let memory: &'static mut [u128] = vec![0u128; MAIN_STACK_BYTES / 16].leak();
    let range = memory.as_mut_ptr_range();
    let (limit, base) = (range.start as usize, range.end as usize);
    // SAFETY: the block is leaked (never freed nor moved), writable, and
    // used by nothing else: it is the program's stack for the process's
    // life.
    let stack = unsafe { ForeignStack::new(limit, base) };
    let Some(stack) = stack else {
        eprintln!("ebbflow userstack: no stack for the program");
        std::process::exit(1);
    };
    // SAFETY: the same block, still unused: its lowest 16 bytes become
    // the canary.
    let stack = unsafe { stack.with_canary() };
    program_stack::set(limit, base);
    crate::remote::set_core0();
    drop(spawn_stackful_on(stack, move || {
        // SAFETY: musl's start-up passed these to `main` (argc strings,
        // then the environment), and they live for the process's life.
        let code = unsafe { __real_main(argc, argv as *mut *mut u8, envp as *mut *mut u8) };
        // musl's exit: atexit handlers, stdio flushed, then exit_group.
        std::process::exit(code)
    }));
}
