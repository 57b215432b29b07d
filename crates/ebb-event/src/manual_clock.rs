//! A clock that tests move by hand, so that timer tests never wait in real
//! time: a [`Platform`] whose [`now`](Platform::now) is a counter, and a
//! [`CoreDriver`] whose [`halt`](CoreDriver::halt) moves that counter to the
//! deadline instead of sleeping until it.
//!
//! With this platform a single-core node (the only kind it runs: nothing
//! else could wake a halted core) has a virtual time: a core with nothing
//! to do but timers jumps straight to the next deadline, so `sleep(1 h)`
//! returns at once, in deadline order, with `now()` advanced by exactly an
//! hour. Tests may also [`advance`](ManualClock::advance) it themselves
//! (e.g. to simulate a core that was busy past several periods). The
//! production platforms are untouched: this is just another platform.

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;

use alloc::boxed::Box;
use ebb_core::{CoreId, Node};

use crate::{run_core, start_node, CoreDriver, EventError, Instant, Platform};

/// A monotonic clock that only moves when told to.
#[derive(Debug, Default)]
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock at `Instant(0)`.
    pub const fn new() -> Self {
        ManualClock {
            nanos: AtomicU64::new(0),
        }
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = crate::time::nanos(by);
        self.nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                Some(now.saturating_add(by))
            })
            .ok();
    }

    /// Moves the clock to `to` if that is later (a clock never goes back).
    pub fn advance_to(&self, to: Instant) {
        self.nanos.fetch_max(to.0, Ordering::Relaxed);
    }

    /// What the clock says.
    pub fn read(&self) -> Instant {
        Instant(self.nanos.load(Ordering::Relaxed))
    }

    /// Runs a one-core node on this clock on the calling thread: `main` is
    /// its first event, and the call returns the node's exit code once
    /// something calls [`crate::shutdown`]. Time moves only when the core
    /// halts (to the next timer's deadline) or when the test advances it.
    ///
    /// # Panics
    ///
    /// If the core halts with no timer armed: nothing could ever wake it,
    /// so the test would hang.
    pub fn run(&'static self, main: impl FnOnce() + 'static) -> Result<i32, EventError> {
        let node = Node::standalone(1);
        start_node(node, self)?;
        run_core(
            CoreId(0),
            node,
            Box::new(ManualCore { clock: self }),
            Some(Box::new(main)),
        )
    }
}

impl Platform for ManualClock {
    fn now(&self) -> Instant {
        self.read()
    }

    /// Nothing to do: the only core never sleeps in real time.
    fn notify(&self, _core: CoreId) {}
}

/// The core of a [`ManualClock`] node: no devices, and halting is time
/// travel to the deadline.
struct ManualCore {
    clock: &'static ManualClock,
}

impl CoreDriver for ManualCore {
    fn dispatch(&self) {}

    fn halt(&self, deadline: Option<Instant>) {
        match deadline {
            Some(deadline) => self.clock.advance_to(deadline),
            None => panic!(
                "a manual-clock core halted with no timer armed and nothing queued: \
                 nothing can wake it (the test would hang)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_only_forward_and_only_when_told() {
        let clock = ManualClock::new();
        assert_eq!(clock.read(), Instant(0));
        clock.advance(Duration::from_millis(3));
        assert_eq!(clock.read(), Instant(3_000_000));
        clock.advance_to(Instant(1_000));
        assert_eq!(clock.read(), Instant(3_000_000), "never back");
        clock.advance_to(Instant(5_000_000));
        assert_eq!(clock.now(), Instant(5_000_000));
    }
}
