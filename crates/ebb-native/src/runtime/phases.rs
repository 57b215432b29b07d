//! Where the boot's time goes: core 0 marks the end of each boot phase with
//! the TSC ([`mark`]), and the debug boot summary (`log=debug` or
//! `verbose`) prints them on one line ([`describe`]), each phase as the
//! time since the previous mark (the first since the PVH entry). The marks
//! are a few `rdtsc`s and stores; printing happens only at debug level.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use spin::Mutex;

use crate::arch::x86_64::clock;

/// At most this many marks; later ones are dropped.
const MAX_MARKS: usize = 16;

/// The marks: phase names (core 0 writes them at boot, under the lock).
static NAMES: Mutex<[&str; MAX_MARKS]> = Mutex::new([""; MAX_MARKS]);
/// The TSC at the end of each phase.
static TSCS: [AtomicU64; MAX_MARKS] = [const { AtomicU64::new(0) }; MAX_MARKS];
/// Marks made so far.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Records that phase `name` ended now.
pub fn mark(name: &'static str) {
    let tsc = clock::rdtsc();
    let mut names = NAMES.lock();
    let i = COUNT.load(Ordering::Relaxed);
    if i < MAX_MARKS {
        names[i] = name;
        TSCS[i].store(tsc, Ordering::Relaxed);
        COUNT.store(i + 1, Ordering::Relaxed);
    }
}

/// Microseconds between two TSC readings.
fn micros(from: u64, to: u64) -> u64 {
    to.saturating_sub(from).saturating_mul(1_000) / clock::tsc_khz().max(1)
}

/// Logs the phases (debug level), e.g. `boot phases (us): entry 12,
/// cpu 3, paging 150, ...`, with `entry_tsc` the TSC at the
/// PVH entry.
pub fn describe(entry_tsc: u64) {
    let names = NAMES.lock();
    let count = COUNT.load(Ordering::Relaxed).min(MAX_MARKS);
    let mut line = alloc::string::String::new();
    let mut previous = entry_tsc;
    for (i, name) in names.iter().enumerate().take(count) {
        let tsc = TSCS[i].load(Ordering::Relaxed);
        if i > 0 {
            line.push_str(", ");
        }
        // Writing to a String cannot fail.
        let _ = core::fmt::write(&mut line, format_args!("{name} {}", micros(previous, tsc)));
        previous = tsc;
    }
    log::debug!("boot phases (us): {line}");
}
