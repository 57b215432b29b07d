//! The node-wide half of the hosted platform: clock, cross-core wake-ups,
//! and what the process is (its pid and CPU time).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use ebb_core::CoreId;
use ebb_event::{CpuTime, Instant, Platform};

use crate::sys;

/// Cores are threads; each has an eventfd that its event loop waits on, so
/// waking a core is one `write`.
pub struct HostedPlatform {
    wakeups: Vec<OwnedFd>,
}

impl HostedPlatform {
    /// A platform for `cores` cores.
    pub fn new(cores: usize) -> io::Result<Self> {
        Ok(HostedPlatform {
            wakeups: (0..cores)
                .map(|_| sys::eventfd())
                .collect::<io::Result<_>>()?,
        })
    }

    /// The eventfd a core's driver waits on.
    pub(crate) fn wakeup_fd(&self, core: CoreId) -> &OwnedFd {
        &self.wakeups[core.0]
    }
}

impl Platform for HostedPlatform {
    fn now(&self) -> Instant {
        Instant(sys::monotonic_ns())
    }

    fn notify(&self, core: CoreId) {
        if let Some(fd) = self.wakeups.get(core.0) {
            sys::eventfd_signal(fd.as_raw_fd());
        }
    }

    fn process_id(&self) -> u32 {
        std::process::id()
    }

    fn cpu_time(&self) -> Option<CpuTime> {
        let (user, system) = sys::cpu_time();
        Some(CpuTime { user, system })
    }
}
