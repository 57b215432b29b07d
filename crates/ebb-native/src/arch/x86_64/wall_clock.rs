//! Wall-clock time: fixed once at boot from `wall=UNIX_SECONDS.FRACTION`
//! (the launcher passes the host's time, to the nanosecond) or else the
//! CMOS RTC ([`crate::arch::x86_64::rtc`], whole seconds), then advanced by
//! the monotonic TSC clock.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::arch::x86_64::clock;

/// Nanoseconds since the Unix epoch at `clock::nanos() == 0`; 0 = unknown.
static EPOCH_NS_AT_ORIGIN: AtomicU64 = AtomicU64::new(0);

/// Where the wall-clock time came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WallSource {
    CommandLine,
    CmosRtc,
    Unknown,
}

/// Sets the wall clock (after `clock::init`): `wall_ns` from the command
/// line wins over the CMOS RTC.
///
/// `wall_ns` is the host's time when the guest's TSC was 0, when QEMU
/// started the vCPU (`./ebb run` starts QEMU paused and continues it at
/// that time; other launchers take it just before QEMU starts, and the
/// guest lags by QEMU's start-up). The boot before [`clock::init`] is
/// counted from the TSC, so it does not make the guest lag: under TCG,
/// whose TSC starts at 0 when QEMU continues the guest. Under KVM the
/// TSC starts when the vCPU is made and kvmclock's time base is the
/// host's, so there the guest may be off by up to `./ebb run`'s lead.
pub fn init(wall_ns: Option<u64>) -> WallSource {
    let (at_origin, source) = match wall_ns {
        Some(nanos) => (
            nanos.saturating_add(clock::origin_since_reset_ns()),
            WallSource::CommandLine,
        ),
        None => match crate::arch::x86_64::rtc::read_cmos() {
            Some(seconds) => (
                seconds
                    .saturating_mul(1_000_000_000)
                    .saturating_sub(clock::nanos()),
                WallSource::CmosRtc,
            ),
            None => return WallSource::Unknown,
        },
    };
    EPOCH_NS_AT_ORIGIN.store(at_origin, Ordering::Relaxed);
    source
}

/// Nanoseconds since 1970-01-01 00:00:00 UTC, or `None` if neither the
/// command line nor the RTC gave the time.
pub fn unix_nanos() -> Option<u64> {
    match EPOCH_NS_AT_ORIGIN.load(Ordering::Relaxed) {
        0 => None,
        origin => Some(origin + clock::nanos()),
    }
}
