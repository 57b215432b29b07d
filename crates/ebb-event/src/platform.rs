//! What a platform (hosted Linux, native x86_64) supplies to event loops.

use core::time::Duration;

use ebb_core::CoreId;

use crate::Instant;

/// CPU time a node has used, split as Linux's `getrusage` splits it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// Time spent running the node's own code.
    pub user: Duration,
    /// Time the kernel spent on the node's behalf.
    pub system: Duration,
}

/// Node-wide platform services, usable from any thread.
pub trait Platform: Send + Sync + 'static {
    /// The monotonic clock.
    fn now(&self) -> Instant;

    /// Wakes `core` from [`CoreDriver::halt`] (or makes its next halt return
    /// at once). Called from any thread; must not block.
    fn notify(&self, core: CoreId);

    /// The host's id for this node's process (hosted: its Linux pid). A
    /// platform without processes (native: the node is the whole machine)
    /// has none and keeps the default, 0.
    fn process_id(&self) -> u32 {
        0
    }

    /// The CPU time this node has used so far, if the platform measures it
    /// (hosted: `getrusage(RUSAGE_SELF)`); the default measures nothing.
    fn cpu_time(&self) -> Option<CpuTime> {
        None
    }

    /// The RAM the node's allocator manages, in bytes, where that is all
    /// the node may use (native: the guest's usable RAM); `None` where the
    /// node shares a machine's memory with others (hosted).
    fn memory_bytes(&self) -> Option<usize> {
        None
    }
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
