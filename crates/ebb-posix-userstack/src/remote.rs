//! Calls of the program's other threads on Ebbflow's objects. The
//! objects live on core 0 (`Rc`, no locks), so such a call is shipped
//! there: an event on core 0 runs it as a stackful event of its own (a
//! blocking one parks on the loop, as the main function's do), while the
//! calling thread waits for the answer on a channel. Its memory stays
//! put meanwhile: the thread is blocked in the call, as it would be in
//! Linux's.
//!
//! A thread that waits so needs core 0's loop to run: if the program's
//! main function blocks in Linux meanwhile (a futex wait in
//! `pthread_join`, say) on something that thread must do first, both
//! wait for ever. Redis's threads never touch a socket, pipe or eventfd.

use std::sync::mpsc;
use std::sync::OnceLock;
use std::thread::ThreadId;

use ebb_core::CoreId;
use ebb_event::EventRoot;
use ebb_posix::log_once::LoggedCalls;
use ebb_posix::SysCall;

use crate::backend::Program;

/// The node's events, set once it starts.
static EVENTS: OnceLock<&'static EventRoot> = OnceLock::new();
/// Core 0's thread, which must never wait for itself.
static CORE0: OnceLock<ThreadId> = OnceLock::new();

/// Records the node's events (`start.rs`, as the node starts).
pub fn set_events(events: &'static EventRoot) {
    let _ = EVENTS.set(events);
}

/// Records that the calling thread is core 0's (`start.rs`).
pub fn set_core0() {
    let _ = CORE0.set(std::thread::current().id());
}

/// Makes `call` on core 0 and waits for its answer; `None` when there is
/// no node (yet, or any more) to make it, or the caller is core 0's own
/// thread (a signal handler on the loop's stack: it would wait for
/// itself).
pub fn call_on_core0(call: SysCall, logged: &'static LoggedCalls) -> Option<isize> {
    if CORE0.get() == Some(&std::thread::current().id()) {
        return None;
    }
    let events = EVENTS.get()?;
    let (answer, answered) = mpsc::sync_channel(1);
    events
        .spawn_on(CoreId(0), move || {
            drop(ebb_event::spawn_stackful(move || {
                let _ = answer.send(ebb_posix::dispatch(&Program, logged, &call));
            }));
        })
        .ok()?;
    answered.recv().ok()
}
