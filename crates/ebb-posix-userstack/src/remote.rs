//! Calls of the program's other threads on Ebbflow's objects. The
//! objects live on core 0 (`Rc`, no locks), so such a call is shipped
//! there: an event on core 0 runs it as a stackful event of its own (a
//! blocking one parks on the loop, as the main function's do), while the
//! calling thread waits for the answer on a channel. Its memory stays
//! put meanwhile: the thread is blocked in the call, as it would be in
//! Linux's.
//!
//! A thread that waits so needs core 0's loop to run. If the program's
//! main function meanwhile blocks in Linux (a futex wait in
//! `pthread_join`) or spins without a system call on something that
//! thread must do first, both wait for ever. Redis with its default
//! `io-threads 1` never has its other threads touch a socket, pipe or
//! eventfd; with more I/O threads, its main thread spins waiting for
//! them, and it hangs: run it with `io-threads 1` on this platform.
//!
//! A shipped call allocates (the channel, the event): it is not
//! async-signal-safe, as no call of libc's that allocates is.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;

use ebb_core::CoreId;
use ebb_event::EventRoot;
use ebb_posix::log_once::LoggedCalls;
use ebb_posix::SysCall;

use crate::backend::Program;
use crate::linux;

/// The node's events, set once it starts.
static EVENTS: OnceLock<&'static EventRoot> = OnceLock::new();
/// Core 0's thread id (Linux's), which must never wait for itself; 0
/// until it is known.
static CORE0_TID: AtomicUsize = AtomicUsize::new(0);

/// How often a waiting caller looks whether the node is stopping (a
/// call left in the mailbox of a stopped node is never answered).
const STOPPING_CHECK: Duration = Duration::from_millis(100);

/// Records the node's events (`start.rs`, as the node starts).
pub fn set_events(events: &'static EventRoot) {
    let _ = EVENTS.set(events);
}

/// Waits until [`set_events`] has run (the node's start-up records them
/// just after its cores start: `main` must not run before).
pub fn wait_for_events() {
    while EVENTS.get().is_none() {
        std::thread::yield_now();
    }
}

/// Records that the calling thread is core 0's (`start.rs`).
pub fn set_core0() {
    CORE0_TID.store(linux::gettid(), Ordering::Release);
}

/// Makes `call` on core 0 and waits for its answer; `None` when there is
/// no node (yet, or any more) to make it, or the caller is core 0's own
/// thread (a signal handler on the loop's stack: it would wait for
/// itself).
pub fn call_on_core0(call: SysCall, logged: &'static LoggedCalls) -> Option<isize> {
    let events = EVENTS.get()?;
    if events.is_stopping() || CORE0_TID.load(Ordering::Acquire) == linux::gettid() {
        return None;
    }
    let (answer, answered) = mpsc::sync_channel(1);
    events
        .spawn_on(CoreId(0), move || {
            drop(ebb_event::spawn_stackful(move || {
                let _ = answer.send(ebb_posix::dispatch(&Program, logged, &call));
            }));
        })
        .ok()?;
    loop {
        match answered.recv_timeout(STOPPING_CHECK) {
            Ok(result) => return Some(result),
            Err(mpsc::RecvTimeoutError::Timeout) if !events.is_stopping() => {}
            Err(_) => return None,
        }
    }
}
