//! What a platform (hosted Linux, native x86_64) supplies to event loops.

use ebb_core::CoreId;

use crate::Instant;

/// Node-wide platform services, usable from any thread.
pub trait Platform: Send + Sync + 'static {
    /// The monotonic clock.
    fn now(&self) -> Instant;

    /// Wakes `core` from [`CoreDriver::halt`] (or makes its next halt return
    /// at once). Called from any thread; must not block.
    fn notify(&self, core: CoreId);
}

/// One core's connection to the machine, used only by that core.
pub trait CoreDriver {
    /// Runs the handlers of pending interrupts (native) or completions
    /// (hosted). Never blocks.
    fn dispatch(&self);

    /// Sleeps until an interrupt or completion arrives, [`Platform::notify`]
    /// is called for this core, or `deadline` passes. May return early.
    /// Also hands the platform what this turn queued (as `flush`).
    fn halt(&self, deadline: Option<Instant>);

    /// Hands the platform what this loop turn queued (batched I/O), when
    /// the core goes on without halting. The default does nothing.
    fn flush(&self) {}
}
