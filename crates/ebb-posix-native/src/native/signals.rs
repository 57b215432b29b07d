//! The signals group natively: handlers, the mask, the alternate stack
//! and the interval timers kept by [`SignalState`] (host-tested) and read
//! back as on Linux; nothing is ever delivered (`signal_state.rs` says
//! why that is what a program here meets).

use ebb_posix::errno::{EFAULT, EINVAL};
use spin::Mutex;

use super::user;
use crate::signal_state::{Action, AltStack, ItimerVal, SignalState};

/// The program's signal state.
static SIGNALS: Mutex<SignalState> = Mutex::new(SignalState::new());

/// The kernel's signal set: 64 signals, 8 bytes.
const SIGSET_BYTES: usize = 8;

/// Reads a `T` at `addr` if it is not null.
fn read_new<T: Copy>(addr: usize) -> Result<Option<T>, isize> {
    if addr == 0 {
        Ok(None)
    } else {
        user::get(addr).map(Some)
    }
}

/// Writes `old` at `addr` if it is not null.
fn write_old<T: Copy>(addr: usize, old: T) -> Result<(), isize> {
    if addr == 0 {
        Ok(())
    } else {
        user::put(addr, old)
    }
}

/// One call: read what is new, apply it, write what was.
fn exchange<T: Copy>(
    new: usize,
    old: usize,
    apply: impl FnOnce(&mut SignalState, Option<T>) -> Result<T, isize>,
) -> isize {
    let outcome = read_new(new)
        .and_then(|new| apply(&mut SIGNALS.lock(), new))
        .and_then(|previous| write_old(old, previous));
    match outcome {
        Ok(()) => 0,
        Err(errno) => -errno,
    }
}

/// rt_sigaction(2).
pub fn rt_sigaction(signal: usize, new: usize, old: usize, set_bytes: usize) -> isize {
    if set_bytes != SIGSET_BYTES {
        return -EINVAL;
    }
    exchange::<Action>(new, old, |state, new| state.action(signal, new))
}

/// rt_sigprocmask(2).
pub fn rt_sigprocmask(how: usize, set: usize, old: usize, set_bytes: usize) -> isize {
    if set_bytes != SIGSET_BYTES {
        return -EINVAL;
    }
    exchange::<u64>(set, old, |state, set| state.procmask(how, set))
}

/// sigaltstack(2).
pub fn sigaltstack(new: usize, old: usize) -> isize {
    exchange::<AltStack>(new, old, |state, new| state.alt_stack(new))
}

/// setitimer(2): set, never fires.
pub fn setitimer(which: usize, new: usize, old: usize) -> isize {
    exchange::<ItimerVal>(new, old, |state, new| state.itimer(which, new))
}

/// getitimer(2): `EFAULT` for no place to write, as Linux.
pub fn getitimer(which: usize, current: usize) -> isize {
    if current == 0 {
        return -EFAULT;
    }
    exchange::<ItimerVal>(0, current, |state, _| state.itimer(which, None))
}
