//! The time group natively: clock_gettime, clock_getres, gettimeofday,
//! time, nanosleep, clock_nanosleep (clock_gettime(2), nanosleep(2)).
//!
//! The monotonic clocks read the platform's clock (TSC or kvmclock,
//! nanoseconds since boot); the real-time clocks its wall clock (the
//! launcher's `wall=` or the CMOS RTC, advanced by the same clock). A
//! sleep waits on the monotonic clock: the thread yields to the event
//! loop, whose timer wakes it (`threads::sleep`), and the few nanoseconds
//! a timer may fire early are spun.

use ebb_posix::errno::{EINVAL, EOPNOTSUPP};

use super::threads;
use super::user::{self, Timespec};

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Linux's clock ids (`include/uapi/linux/time.h`).
const CLOCK_REALTIME: usize = 0;
const CLOCK_MONOTONIC: usize = 1;
const CLOCK_PROCESS_CPUTIME_ID: usize = 2;
const CLOCK_THREAD_CPUTIME_ID: usize = 3;
const CLOCK_MONOTONIC_RAW: usize = 4;
const CLOCK_REALTIME_COARSE: usize = 5;
const CLOCK_MONOTONIC_COARSE: usize = 6;
const CLOCK_BOOTTIME: usize = 7;
/// clock_nanosleep's flag: the request is a time on the clock.
const TIMER_ABSTIME: usize = 1;

fn monotonic() -> u64 {
    ebb_native::monotonic_nanos()
}

fn realtime() -> u64 {
    ebb_native::unix_nanos().unwrap_or_else(monotonic)
}

/// The time on `clock` in nanoseconds, `None` for an unknown clock.
fn now(clock: usize) -> Option<u64> {
    match clock {
        CLOCK_REALTIME | CLOCK_REALTIME_COARSE => Some(realtime()),
        // The program has the core to itself: its CPU time is the time
        // since boot.
        CLOCK_MONOTONIC
        | CLOCK_MONOTONIC_RAW
        | CLOCK_MONOTONIC_COARSE
        | CLOCK_BOOTTIME
        | CLOCK_PROCESS_CPUTIME_ID
        | CLOCK_THREAD_CPUTIME_ID => Some(monotonic()),
        _ => None,
    }
}

fn timespec(nanos: u64) -> Timespec {
    Timespec {
        sec: i64::try_from(nanos / NANOS_PER_SECOND).unwrap_or(i64::MAX),
        fraction: i64::try_from(nanos % NANOS_PER_SECOND).unwrap_or(0),
    }
}

/// A request read from the program: `EINVAL` unless 0 ≤ ns < 10⁹ and the
/// seconds are not negative (nanosleep(2)).
pub(super) fn requested(addr: usize) -> Result<u64, isize> {
    ebb_posix_objects::calls::get_timespec(&super::objects::NativeHost, addr)
}

fn result(outcome: Result<(), isize>) -> isize {
    match outcome {
        Ok(()) => 0,
        Err(errno) => -errno,
    }
}

/// clock_gettime(2).
pub fn clock_gettime(clock: usize, addr: usize) -> isize {
    let Some(nanos) = now(clock) else {
        return -EINVAL;
    };
    result(user::put(addr, timespec(nanos)))
}

/// clock_getres(2): every clock counts nanoseconds.
pub fn clock_getres(clock: usize, addr: usize) -> isize {
    if now(clock).is_none() {
        return -EINVAL;
    }
    if addr == 0 {
        return 0;
    }
    result(user::put(addr, timespec(1)))
}

/// gettimeofday(2); the time zone argument is obsolete and left alone.
pub fn gettimeofday(addr: usize) -> isize {
    if addr == 0 {
        return 0;
    }
    let nanos = realtime();
    let tv = Timespec {
        sec: i64::try_from(nanos / NANOS_PER_SECOND).unwrap_or(i64::MAX),
        fraction: i64::try_from(nanos % NANOS_PER_SECOND / 1000).unwrap_or(0),
    };
    result(user::put(addr, tv))
}

/// time(2).
pub fn time(addr: usize) -> isize {
    let seconds = i64::try_from(realtime() / NANOS_PER_SECOND).unwrap_or(i64::MAX);
    if addr != 0 {
        if let Err(errno) = user::put(addr, seconds) {
            return -errno;
        }
    }
    isize::try_from(seconds).unwrap_or(isize::MAX)
}

fn sleep_until_monotonic(deadline: u64) {
    let left = deadline.saturating_sub(monotonic());
    if left > 0 {
        threads::sleep(left);
    }
    while monotonic() < deadline {
        core::hint::spin_loop();
    }
}

/// nanosleep(2): never interrupted, so the remainder is not written.
pub fn nanosleep(request: usize) -> isize {
    match requested(request) {
        Ok(nanos) => {
            sleep_until_monotonic(monotonic().saturating_add(nanos));
            0
        }
        Err(errno) => -errno,
    }
}

/// clock_nanosleep(2), relative or until a time on `clock`.
pub fn clock_nanosleep(clock: usize, flags: usize, request: usize) -> isize {
    let Some(start) = now(clock) else {
        return -EINVAL;
    };
    if clock == CLOCK_THREAD_CPUTIME_ID {
        // Linux refuses to sleep on the calling thread's CPU clock.
        return -EINVAL;
    }
    if matches!(
        clock,
        CLOCK_MONOTONIC_RAW | CLOCK_REALTIME_COARSE | CLOCK_MONOTONIC_COARSE
    ) {
        // These clocks have no sleep in Linux (kernel/time/posix-timers.c:
        // no `nsleep`, so clock_nanosleep answers EOPNOTSUPP).
        return -EOPNOTSUPP;
    }
    let nanos = match requested(request) {
        Ok(nanos) => nanos,
        Err(errno) => return -errno,
    };
    let wait = if flags & TIMER_ABSTIME != 0 {
        nanos.saturating_sub(start)
    } else {
        nanos
    };
    sleep_until_monotonic(monotonic().saturating_add(wait));
    0
}
