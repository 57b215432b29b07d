//! Signals natively (issue 19): handlers, the mask, the alternate stack
//! and the interval timers are set and read back as on Linux, and nothing
//! is ever delivered. The image has no other process to send a signal,
//! no terminal, and no timer that would raise one: a program that sets a
//! SIGTERM handler (Redis, to shut down cleanly) or disarms its watchdog
//! timer goes on as it would on Linux before any signal arrives.
//!
//! Kept once per program, where Linux keeps the mask per thread: with
//! nothing delivered, the mask changes nothing but what is read back, and
//! that differs from Linux once threads set their own (musl's
//! `pthread_exit` blocks the application's signals and never restores
//! them; Redis's background threads block SIGALRM): a thread may then
//! read back another's mask. A per-thread mask is the fix if a program
//! ever depends on it.
//!
//! The layouts are the kernel's x86_64 ones (`asm/signal.h`,
//! `linux/time.h`): `struct sigaction` as four words (handler, flags,
//! restorer, mask), `stack_t` as three (pointer, flags, size), `struct
//! itimerval` as four (interval and value, seconds and microseconds).

use ebb_posix::errno::{EINVAL, ENOMEM};

/// Signals are 1 to 64.
pub const SIGNALS: usize = 64;
/// The two signals no program may catch or block.
const SIGKILL: usize = 9;
const SIGSTOP: usize = 19;
/// sigprocmask's `how`.
const SIG_BLOCK: usize = 0;
const SIG_UNBLOCK: usize = 1;
const SIG_SETMASK: usize = 2;
/// sigaltstack's flags.
const SS_ONSTACK: u64 = 1;
const SS_DISABLE: u64 = 2;
const SS_AUTODISARM: u64 = 1 << 31;
/// The handler flags Linux keeps (`UAPI_SA_FLAGS`, x86_64): SA_NOCLDSTOP,
/// SA_NOCLDWAIT, SA_SIGINFO, SA_EXPOSE_TAGBITS, SA_RESTORER, SA_ONSTACK,
/// SA_RESTART, SA_NODEFER, SA_RESETHAND; others are cleared, which is how
/// a program probes for one (SA_UNSUPPORTED reads back clear).
const SA_FLAGS: u64 =
    0x1 | 0x2 | 0x4 | 0x800 | 0x0400_0000 | 0x0800_0000 | 0x1000_0000 | 0x4000_0000 | 0x8000_0000;
/// The smallest alternate stack (x86_64's `MINSIGSTKSZ`).
const MIN_STACK: u64 = 2048;
/// The interval timers: real, virtual, profiling.
const TIMERS: usize = 3;

/// A handler: `struct sigaction` as the kernel takes it.
pub type Action = [u64; 4];
/// An alternate stack: `stack_t`.
pub type AltStack = [u64; 3];
/// An interval timer: `struct itimerval`.
pub type ItimerVal = [u64; 4];

/// What a program set.
#[derive(Debug)]
pub struct SignalState {
    actions: [Action; SIGNALS],
    mask: u64,
    alt_stack: AltStack,
    timers: [ItimerVal; TIMERS],
}

impl Default for SignalState {
    fn default() -> Self {
        SignalState::new()
    }
}

/// The bit of `signal` in a mask.
fn bit(signal: usize) -> u64 {
    1 << (signal - 1)
}

/// Bits no mask may hold.
const UNBLOCKABLE: u64 = (1 << (SIGKILL - 1)) | (1 << (SIGSTOP - 1));

impl SignalState {
    /// Every handler the default, nothing blocked, no alternate stack, no
    /// timer armed.
    #[must_use]
    pub const fn new() -> SignalState {
        SignalState {
            actions: [[0; 4]; SIGNALS],
            mask: 0,
            alt_stack: [0, SS_DISABLE, 0],
            timers: [[0; 4]; TIMERS],
        }
    }

    /// rt_sigaction(2): the old action of `signal`, and `new` set if
    /// given. `EINVAL` for a signal outside 1 to 64, or a handler for
    /// SIGKILL or SIGSTOP.
    pub fn action(&mut self, signal: usize, new: Option<Action>) -> Result<Action, isize> {
        if !(1..=SIGNALS).contains(&signal)
            || (new.is_some() && (signal == SIGKILL || signal == SIGSTOP))
        {
            return Err(EINVAL);
        }
        let old = self.actions[signal - 1];
        if let Some(mut action) = new {
            // The kernel quietly drops SIGKILL and SIGSTOP from a
            // handler's mask (kernel/signal.c, do_sigaction).
            action[3] &= !UNBLOCKABLE;
            action[1] &= SA_FLAGS;
            self.actions[signal - 1] = action;
        }
        Ok(old)
    }

    /// rt_sigprocmask(2): the old mask, and `set` applied by `how` if
    /// given. `EINVAL` for another `how`.
    pub fn procmask(&mut self, how: usize, set: Option<u64>) -> Result<u64, isize> {
        let old = self.mask;
        if let Some(set) = set {
            self.mask = match how {
                SIG_BLOCK => old | set,
                SIG_UNBLOCK => old & !set,
                SIG_SETMASK => set,
                _ => return Err(EINVAL),
            } & !UNBLOCKABLE;
        }
        Ok(old)
    }

    /// sigaltstack(2): the old stack, and `new` set if given. `EINVAL`
    /// for unknown flags, `ENOMEM` for a stack under `MINSIGSTKSZ`.
    pub fn alt_stack(&mut self, new: Option<AltStack>) -> Result<AltStack, isize> {
        let old = self.alt_stack;
        if let Some([sp, flags, size]) = new {
            // `ss_flags` is an int: the word's upper half is padding.
            let flags = flags & u64::from(u32::MAX);
            // SS_ONSTACK is taken as 0 (kernel/signal.c, do_sigaltstack:
            // "for backward compatibility").
            let mode = flags & !(SS_AUTODISARM | SS_ONSTACK);
            self.alt_stack = match mode {
                SS_DISABLE => [0, SS_DISABLE, 0],
                0 if size < MIN_STACK => return Err(ENOMEM),
                0 => [sp, flags & SS_AUTODISARM, size],
                _ => return Err(EINVAL),
            };
        }
        Ok(old)
    }

    /// setitimer(2) and getitimer(2): the old value of timer `which`, and
    /// `new` set if given. The timer never fires. `EINVAL` for another
    /// timer, negative seconds or microseconds outside 0 to 999,999
    /// (Linux's `timeval_valid`). Read back as set, interval included
    /// (Linux drops the interval of a disarmed timer and counts the value
    /// down: with nothing ever firing, a program here reads what it set).
    pub fn itimer(&mut self, which: usize, new: Option<ItimerVal>) -> Result<ItimerVal, isize> {
        let Some(old) = self.timers.get(which).copied() else {
            return Err(EINVAL);
        };
        if let Some(value) = new {
            let negative = |seconds: u64| seconds >> 63 != 0;
            if value[1] >= 1_000_000
                || value[3] >= 1_000_000
                || negative(value[0])
                || negative(value[2])
            {
                return Err(EINVAL);
            }
            self.timers[which] = value;
        }
        Ok(old)
    }

    /// Whether `signal` is blocked.
    #[must_use]
    pub fn is_blocked(&self, signal: usize) -> bool {
        (1..=SIGNALS).contains(&signal) && self.mask & bit(signal) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIGTERM: usize = 15;
    const SIGUSR1: usize = 10;

    #[test]
    fn a_handler_is_set_and_read_back_but_never_for_kill_or_stop() {
        let mut state = SignalState::new();
        let handler = [0x4000, 0x0400_0000, 0x5000, bit(SIGKILL) | bit(SIGUSR1)];
        assert_eq!(state.action(SIGTERM, Some(handler)), Ok([0; 4]));
        let read = state.action(SIGTERM, None).unwrap();
        assert_eq!(read[..3], handler[..3]);
        assert_eq!(read[3], bit(SIGUSR1), "SIGKILL left the handler's mask");
        let probe = [0x4000, 0x0400_0000 | 0x400, 0x5000, 0];
        state.action(SIGTERM, Some(probe)).unwrap();
        assert_eq!(
            state.action(SIGTERM, None).unwrap()[1],
            0x0400_0000,
            "SA_UNSUPPORTED reads back clear"
        );
        assert_eq!(state.action(SIGKILL, Some(handler)), Err(EINVAL));
        assert_eq!(state.action(SIGSTOP, Some(handler)), Err(EINVAL));
        assert_eq!(
            state.action(SIGKILL, None),
            Ok([0; 4]),
            "reading is allowed"
        );
        assert_eq!(state.action(0, None), Err(EINVAL));
        assert_eq!(state.action(65, None), Err(EINVAL));
        assert_eq!(state.action(64, None), Ok([0; 4]));
    }

    #[test]
    fn the_mask_blocks_unblocks_and_is_set_but_never_holds_kill_or_stop() {
        let mut state = SignalState::new();
        assert_eq!(state.procmask(SIG_BLOCK, Some(bit(SIGUSR1))), Ok(0));
        assert!(state.is_blocked(SIGUSR1));
        assert_eq!(
            state.procmask(SIG_BLOCK, Some(bit(SIGTERM) | bit(SIGKILL))),
            Ok(bit(SIGUSR1))
        );
        assert!(!state.is_blocked(SIGKILL));
        state.procmask(SIG_UNBLOCK, Some(bit(SIGUSR1))).unwrap();
        assert!(!state.is_blocked(SIGUSR1) && state.is_blocked(SIGTERM));
        state.procmask(SIG_SETMASK, Some(u64::MAX)).unwrap();
        assert_eq!(state.procmask(0, None), Ok(!UNBLOCKABLE));
        assert_eq!(state.procmask(3, Some(0)), Err(EINVAL));
        assert_eq!(state.procmask(3, None), Ok(!UNBLOCKABLE), "only read");
    }

    #[test]
    fn an_alternate_stack_is_set_checked_and_disabled() {
        let mut state = SignalState::new();
        assert_eq!(state.alt_stack(None), Ok([0, SS_DISABLE, 0]));
        assert_eq!(state.alt_stack(Some([0x1000, 0, 100])), Err(ENOMEM));
        assert_eq!(state.alt_stack(Some([0x1000, 7, 1 << 16])), Err(EINVAL));
        state
            .alt_stack(Some([0x1000, SS_ONSTACK, 1 << 16]))
            .unwrap();
        assert_eq!(state.alt_stack(None), Ok([0x1000, 0, 1 << 16]));
        // Garbage in the padding after the int `ss_flags` is no flag.
        state
            .alt_stack(Some([0x2000, 0xdead_beef_0000_0000, 1 << 16]))
            .unwrap();
        assert_eq!(state.alt_stack(None), Ok([0x2000, 0, 1 << 16]));
        state.alt_stack(Some([0x9999, SS_DISABLE, 5])).unwrap();
        assert_eq!(state.alt_stack(None), Ok([0, SS_DISABLE, 0]));
    }

    #[test]
    fn timers_are_set_and_read_back_and_bad_ones_refused() {
        let mut state = SignalState::new();
        assert_eq!(state.itimer(0, Some([0, 0, 5, 0])), Ok([0; 4]));
        assert_eq!(state.itimer(0, None), Ok([0, 0, 5, 0]));
        assert_eq!(state.itimer(0, Some([0, 0, 0, 0])), Ok([0, 0, 5, 0]));
        assert_eq!(state.itimer(3, None), Err(EINVAL));
        assert_eq!(state.itimer(1, Some([0, 1_000_000, 0, 0])), Err(EINVAL));
        assert_eq!(
            state.itimer(1, Some([0, 0, u64::MAX, 0])),
            Err(EINVAL),
            "-1 s"
        );
        assert_eq!(
            state.itimer(1, None),
            Ok([0; 4]),
            "a refused value is not set"
        );
    }
}
