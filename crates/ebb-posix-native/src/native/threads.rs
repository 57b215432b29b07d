//! The threads group natively: each C thread is a stackful event of
//! Ebbflow's event loop (`ebb_event::spawn_stackful_on`), running on the
//! stack its C library mapped for it.
//!
//! - **Which core.** A thread runs on the core of the thread that created
//!   it. The program's first thread starts on core 0, so all of a
//!   program's threads share core 0 today. This keeps futex wake-ups
//!   local and a futex's check-then-wait atomic without locks (nothing
//!   else runs in between); spreading threads over cores is a later rule.
//! - **Cooperative.** A thread runs until it blocks: a futex wait (a
//!   contended mutex, a condition variable, a join), `sched_yield`, a
//!   sleep. Then it yields to the event loop, which runs the other
//!   threads and events. A thread that spins without a system call (a
//!   spin lock held by another thread) is never preempted: use mutexes.
//! - **Switching.** Each switch goes through the loop and back into our
//!   code ([`wait`]), which restores the thread's FS base (its TLS) and
//!   its interrupt flag. Switches happen at calls, so the System V ABI's
//!   caller-saved registers (all of SSE and x87 data) are the C
//!   compiler's to save; the MXCSR and x87 control words are shared by
//!   the program's threads (a thread that changes the rounding mode
//!   changes it for all).
//! - **Interrupts.** C code runs with interrupts on (the program's tick:
//!   `start.rs`); the loop runs with them off, as everywhere natively.
//! - **Ending.** A thread's `exit` stores 0 at its clear-tid address and
//!   wakes one waiter there (clone(2)'s `CLONE_CHILD_CLEARTID`, which
//!   musl's `pthread_join` waits on through its thread-list lock), then
//!   ends its event. The last thread's `exit` ends the program.

use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;

use alloc::alloc::{alloc_zeroed, Layout};

use ebb_event::{block_on, end_stackful, spawn_stackful_on, ForeignStack, MIN_FOREIGN_STACK_BYTES};
use ebb_posix::errno::{EAGAIN, EINVAL, ENOSYS, ETIMEDOUT};
use ebb_posix::Backend;
use spin::Mutex;
use x86_64::instructions::interrupts;
use x86_64::registers::model_specific::FsBase;
use x86_64::VirtAddr;

use super::{backend, clock, memory, process, user};
use crate::futex_queues::FutexQueues;
use crate::thread_table::ThreadTable;

/// clone(2)'s flags (`include/uapi/linux/sched.h`).
const CLONE_VM: usize = 0x100;
const CLONE_SIGHAND: usize = 0x800;
const CLONE_VFORK: usize = 0x4000;
const CLONE_THREAD: usize = 0x1_0000;
const CLONE_SETTLS: usize = 0x8_0000;
const CLONE_PARENT_SETTID: usize = 0x10_0000;
const CLONE_CHILD_CLEARTID: usize = 0x20_0000;
const CLONE_CHILD_SETTID: usize = 0x100_0000;

/// futex(2)'s operations and flags (`include/uapi/linux/futex.h`).
const FUTEX_WAIT: usize = 0;
const FUTEX_WAKE: usize = 1;
const FUTEX_REQUEUE: usize = 3;
const FUTEX_CMP_REQUEUE: usize = 4;
/// Private and CLOCK_REALTIME change nothing here: one address space,
/// and relative timeouts.
const FUTEX_COMMAND: usize = 0x7f;

/// The main thread's id: the process id, as on Linux.
const MAIN_TID: i32 = 1;
const _: () = assert!(process::PID == MAIN_TID as isize);

static THREADS: Mutex<ThreadTable> = Mutex::new(ThreadTable::new(MAIN_TID));
static FUTEXES: Mutex<FutexQueues> = Mutex::new(FutexQueues::EMPTY);

/// The main thread's stack: Linux's default limit for it (8 MiB).
pub const MAIN_STACK_BYTES: usize = 8 << 20;

/// Starts the program's first thread, `body`, on a stack of its own;
/// `false` if there is no memory for the stack.
///
/// The stack is mapped memory from the heap, not a demand-zero region:
/// system calls run on it, and a first touch of a demand-zero page takes
/// the page allocator's lock, which a system call may already hold (an
/// mmap's allocation), a deadlock. It has no guard page; a canary at its
/// lowest word catches an overflow after the fact.
pub fn start_main(body: impl FnOnce() + 'static) -> bool {
    let Ok(layout) = Layout::from_size_align(MAIN_STACK_BYTES, 4096) else {
        return false;
    };
    // SAFETY: the layout's size is not zero.
    let memory = unsafe { alloc_zeroed(layout) };
    if memory.is_null() {
        return false;
    }
    let limit = memory as usize;
    // SAFETY: the block is this stack's alone and never freed: the main
    // thread's stack lives as long as the program.
    let Some(stack) = (unsafe { ForeignStack::new(limit, limit + MAIN_STACK_BYTES) }) else {
        return false;
    };
    // SAFETY: the block's lowest 16 bytes are part of it, and it is never
    // freed.
    let stack = unsafe { stack.with_canary() };
    THREADS.lock().start();
    spawn_stackful_on(stack, move || {
        interrupts::enable();
        body();
    });
    true
}

/// Runs `future` to its end while the calling C thread is parked and the
/// loop runs the others; `None` outside a thread (nothing to park).
pub fn wait<F: Future>(future: F) -> Option<F::Output> {
    let me = THREADS.lock().current();
    let tls = FsBase::read();
    let interrupts_on = interrupts::are_enabled();
    interrupts::disable();
    let outcome = block_on(future).ok();
    FsBase::write(tls);
    THREADS.lock().switch_to(me);
    if interrupts_on {
        interrupts::enable();
    }
    outcome
}

/// `__ebb_clone` (musl's `__clone` contract): a new thread runs
/// `func(arg)` on `stack`; its id, or `-errno`. Only threads (memory,
/// signal handlers and thread group shared) are created: a fork or vfork
/// is `ENOSYS`, as the process group says.
pub fn clone(
    func: usize,
    stack: usize,
    flags: usize,
    arg: usize,
    ptid: usize,
    tls: usize,
    ctid: usize,
) -> isize {
    const THREAD: usize = CLONE_VM | CLONE_SIGHAND | CLONE_THREAD;
    if flags & THREAD != THREAD || flags & CLONE_VFORK != 0 {
        return -ENOSYS;
    }
    if func == 0 {
        return -EINVAL;
    }
    // A stack musl mapped has a guard below it (a `PROT_NONE` part that
    // no mprotect opened, `memory::guard_below`): the stack's canary goes
    // in the guard's top 16 bytes, where nothing of the program lives. A
    // stack the program chose itself (pthread_attr_setstack, perhaps
    // inside a malloc'd block whose header sits at its start) gets no
    // canary and, its size unknown, the least a stack may have.
    let guard = memory::guard_below(stack);
    let limit = match guard {
        Some((start, len)) => start + len - 16,
        None => (stack & !15).saturating_sub(MIN_FOREIGN_STACK_BYTES),
    };
    // corosensei reads `limit` only for its overflow trap handler, which
    // this target does not build.
    // SAFETY: by clone(2)'s contract the caller gave the thread the memory
    // under `stack`: musl's mapping above its unused guard's last 16
    // bytes, or at least the bytes a stack needs.
    let Some(borrowed) = (unsafe { ForeignStack::new(limit, stack) }) else {
        return -EINVAL;
    };
    let borrowed = if guard.is_some() {
        // SAFETY: the lowest 16 bytes of the range are the guard's top,
        // the program's memory that nothing uses, mapped until the thread
        // ends and its stack is unmapped after that.
        unsafe { borrowed.with_canary() }
    } else {
        borrowed
    };
    let tls = if flags & CLONE_SETTLS != 0 {
        match VirtAddr::try_new(tls as u64) {
            Ok(tls) => tls,
            Err(_) => return -EINVAL,
        }
    } else {
        FsBase::read()
    };
    let clear_tid = if flags & CLONE_CHILD_CLEARTID != 0 {
        ctid
    } else {
        0
    };
    let tid = THREADS.lock().create(clear_tid);
    for (flag, address) in [(CLONE_PARENT_SETTID, ptid), (CLONE_CHILD_SETTID, ctid)] {
        if flags & flag != 0 {
            if let Err(errno) = user::put(address, tid) {
                // No thread after all: its id must not keep the program
                // alive.
                THREADS.lock().forget(tid);
                return -errno;
            }
        }
    }
    spawn_stackful_on(borrowed, move || run_thread(tid, func, arg, tls));
    tid as isize
}

/// A new thread's first and last frame.
fn run_thread(tid: i32, func: usize, arg: usize, tls: VirtAddr) {
    THREADS.lock().switch_to(tid);
    FsBase::write(tls);
    interrupts::enable();
    // SAFETY: `func` is the non-null start routine the C library passed
    // to clone, `int (*)(void *)` in C (musl's src/thread/clone.c).
    let start: extern "C" fn(usize) -> i32 = unsafe { core::mem::transmute(func) };
    let code = start(arg);
    // musl's start routines never return; clone(2) says a return is the
    // thread's exit.
    exit_thread(usize::from(code.to_le_bytes()[0]), None);
}

/// exit(2) of the calling thread, then `munmap(unmap)` once it is off
/// that stack (musl's `__unmapself`); the last thread's exit ends the
/// program with `code`.
pub fn exit_thread(code: usize, unmap: Option<(usize, usize)>) -> ! {
    let exited = THREADS.lock().exit_current();
    if exited.last {
        backend::exit(code);
    }
    if exited.clear_tid != 0 {
        let _ = user::put(exited.clear_tid, 0i32);
        FUTEXES.lock().wake(exited.clear_tid, 1);
    }
    if let Some((base, len)) = unmap {
        // Runs after this event has ended: nothing runs on the stack then.
        ebb_event::spawn(move || {
            memory::munmap(base, len);
        });
    }
    interrupts::disable();
    // The frames abandoned: the coroutine's start (corosensei's, and
    // `on_stack`'s closure, whose waker `end_stackful` drops), `run_thread`,
    // the C thread's, and ours from its system-call entry to here.
    // SAFETY: apart from that waker they hold plain integers and
    // references: nothing whose destructor must run.
    let error = unsafe { end_stackful() };
    backend::Native.log(&alloc::format!(
        "ebb-posix: a thread could not end ({error}); the program stops"
    ));
    ebb_native::exit(1)
}

/// gettid(2).
pub fn gettid() -> isize {
    THREADS.lock().current() as isize
}

/// set_tid_address(2): the calling thread's id.
pub fn set_tid_address(address: usize) -> isize {
    THREADS.lock().set_clear_tid(address) as isize
}

/// sched_yield(2): the other threads and events of this core run first.
pub fn sched_yield() -> isize {
    let _ = wait(ebb_event::yield_now());
    0
}

/// Sleeps `nanos` on the loop's timers; `false` outside a thread.
pub fn sleep(nanos: u64) -> bool {
    wait(ebb_event::sleep(Duration::from_nanos(nanos))).is_some()
}

/// futex(2): FUTEX_WAIT, FUTEX_WAKE, FUTEX_REQUEUE and FUTEX_CMP_REQUEUE
/// (what musl uses); the others are `ENOSYS`.
pub fn futex(
    address: usize,
    op: usize,
    value: usize,
    timeout: usize,
    address2: usize,
    value3: usize,
) -> isize {
    // The futex word and the compared values are 32-bit.
    let expected = low32(value);
    match op & FUTEX_COMMAND {
        FUTEX_WAIT => futex_wait(address, expected, timeout),
        FUTEX_WAKE => counted(FUTEXES.lock().wake(address, count(value))),
        FUTEX_REQUEUE => counted(FUTEXES.lock().requeue(
            address,
            address2,
            count(value),
            count(timeout),
        )),
        FUTEX_CMP_REQUEUE => match user::get::<u32>(address) {
            Ok(now) if now == low32(value3) => counted(FUTEXES.lock().requeue(
                address,
                address2,
                count(value),
                count(timeout),
            )),
            Ok(_) => -EAGAIN,
            Err(errno) => -errno,
        },
        _ => -ENOSYS,
    }
}

/// The low 32 bits of an argument (an `int` or `u32` in C).
fn low32(value: usize) -> u32 {
    let [a, b, c, d, ..] = value.to_le_bytes();
    u32::from_le_bytes([a, b, c, d])
}

/// A wake or requeue count: an `int`, negative ones are none.
fn count(value: usize) -> usize {
    usize::try_from(low32(value).cast_signed()).unwrap_or(0)
}

/// A count as a system call's result.
fn counted(count: usize) -> isize {
    isize::try_from(count).unwrap_or(isize::MAX)
}

fn futex_wait(address: usize, expected: u32, timeout: usize) -> isize {
    let timeout = if timeout == 0 {
        None
    } else {
        match clock::requested(timeout) {
            Ok(nanos) => Some(nanos),
            Err(errno) => return -errno,
        }
    };
    match user::get::<u32>(address) {
        Ok(now) if now == expected => {}
        Ok(_) => return -EAGAIN,
        Err(errno) => return -errno,
    }
    // Nothing runs between the check above and this enqueue (module
    // comment), so no wake is lost.
    let waiter = FUTEXES.lock().enqueue(address);
    let woken = wait(async {
        let mut expiry = pin!(async {
            match timeout {
                Some(nanos) => ebb_event::sleep(Duration::from_nanos(nanos)).await,
                None => core::future::pending().await,
            }
        });
        poll_fn(|cx| {
            if waiter.poll_woken(cx).is_ready() {
                Poll::Ready(true)
            } else if expiry.as_mut().poll(cx).is_ready() {
                Poll::Ready(false)
            } else {
                Poll::Pending
            }
        })
        .await
    });
    match woken {
        Some(true) => 0,
        // A wake that came with the timeout still counts as a wake.
        Some(false) if !FUTEXES.lock().cancel(&waiter) => 0,
        Some(false) => -ETIMEDOUT,
        None => {
            FUTEXES.lock().cancel(&waiter);
            -EINVAL
        }
    }
}
