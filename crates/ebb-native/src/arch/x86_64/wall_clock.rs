//! Wall-clock time: fixed once at boot from `wall=UNIX_SECONDS` (the
//! launcher passes the host's time) or else the CMOS RTC ([`crate::arch::x86_64::rtc`]),
//! then advanced by the monotonic TSC clock.

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

/// Sets the wall clock (after `clock::init`): `wall` from the command
/// line wins over the CMOS RTC.
pub fn init(wall: Option<u64>) -> WallSource {
    let (seconds, source) = match wall {
        Some(seconds) => (seconds, WallSource::CommandLine),
        None => match crate::arch::x86_64::rtc::read_cmos() {
            Some(seconds) => (seconds, WallSource::CmosRtc),
            None => return WallSource::Unknown,
        },
    };
    let at_origin = seconds
        .saturating_mul(1_000_000_000)
        .saturating_sub(clock::nanos());
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
