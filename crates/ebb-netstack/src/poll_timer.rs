//! The one event-loop timer a platform keeps for a stack: it follows
//! [`Stack::poll_at`](crate::Stack::poll_at) and is re-armed only when the
//! time the stack wants changes, so a busy stack does not cancel and
//! re-insert a timer on every frame. Shared by every platform that drives
//! a stack from an `ebb-event` loop (native virtio-net, the user-space TAP
//! platform).

use core::cell::Cell;

use ebb_event::{cancel_timer, now, timer_after, Instant, TimerId};

/// A timer following a stack's next deadline.
#[derive(Debug, Default)]
pub struct PollTimer {
    armed: Cell<Option<(TimerId, Instant)>>,
}

impl PollTimer {
    /// A timer that is not armed.
    pub const fn new() -> Self {
        PollTimer {
            armed: Cell::new(None),
        }
    }

    /// Arms the timer for `wanted` (disarms it for `None`), calling
    /// `on_due` then; does nothing when it is already armed for `wanted`.
    /// `on_due` should call [`PollTimer::fired`] before polling the stack.
    pub fn follow(&self, wanted: Option<Instant>, on_due: impl FnOnce() + 'static) {
        let armed = self.armed.get();
        if armed.map(|(_, at)| at) == wanted {
            return;
        }
        if let Some((timer, _)) = armed {
            cancel_timer(timer);
        }
        self.armed
            .set(wanted.map(|at| (timer_after(at.saturating_since(now()), on_due), at)));
    }

    /// Forgets the armed timer: it has fired.
    pub fn fired(&self) {
        self.armed.set(None);
    }
}
