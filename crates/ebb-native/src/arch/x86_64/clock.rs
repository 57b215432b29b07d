//! The monotonic clock: the TSC, at the frequency the launcher measured on
//! the host and passed as `tsc_khz=` (under TCG the guest TSC runs at the
//! host's rate; TCG offers neither CPUID leaf 0x15 nor kvmclock). Without
//! `tsc_khz=`, the TSC is calibrated against the PIT's channel 0 (its
//! latched count is readable on q35 and microvm alike) for 10 ms.
//!
//! When CPUID offers kvmclock (KVM), the clock is kvmclock instead
//! (`pvclock.rs`): core 0 registers one `pvclock_vcpu_time_info` in the
//! image and every core reads it (KVM marks it TSC-stable when its vCPUs'
//! TSCs agree; a warning says so when it does not), and the TSC frequency
//! comes from its scale factors, with no calibration.

use core::cell::UnsafeCell;
use core::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

use x86_64::instructions::port::Port;

use crate::arch::x86_64::lapic_modes::HardwareMsrs;
use crate::arch::x86_64::pvclock::{self, Snapshot, TimeInfo, TimeInfoSource};

/// The TSC at boot: time 0.
static ORIGIN: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC tick, as a 32.32 fixed-point number.
static NS_PER_TICK: AtomicU64 = AtomicU64::new(1 << 32);
/// TSC ticks per millisecond (the TSC frequency in kHz).
static KHZ: AtomicU64 = AtomicU64::new(1_000_000);
/// Time is read from kvmclock.
static KVMCLOCK: AtomicBool = AtomicBool::new(false);
/// kvmclock's time at boot: time 0.
static ORIGIN_NS: AtomicU64 = AtomicU64::new(0);

/// The kvmclock structure the hypervisor keeps current.
struct KvmClockInfo(UnsafeCell<TimeInfo>);

// SAFETY: only the hypervisor writes it (after core 0 registered it);
// the guest reads it with volatile reads and the version protocol.
unsafe impl Sync for KvmClockInfo {}

static KVMCLOCK_INFO: KvmClockInfo = KvmClockInfo(UnsafeCell::new(TimeInfo {
    version: 0,
    pad0: 0,
    tsc_timestamp: 0,
    system_time: 0,
    tsc_to_system_mul: 0,
    tsc_shift: 0,
    flags: 0,
    pad: [0; 2],
}));

/// Volatile reads of [`KVMCLOCK_INFO`].
struct Hardware;

impl TimeInfoSource for Hardware {
    fn version(&self) -> u32 {
        // `version` is the structure's first field.
        let version = KVMCLOCK_INFO.0.get().cast::<u32>();
        // SAFETY: the static is valid and aligned; the hypervisor may
        // change it at any time, hence the volatile read.
        let version = unsafe { version.read_volatile() };
        fence(Ordering::Acquire);
        version
    }

    fn fields(&self) -> Snapshot {
        let info = KVMCLOCK_INFO.0.get();
        // SAFETY: the static is valid and aligned; a volatile copy of the
        // whole structure because the hypervisor may change it at any time
        // (a torn copy is caught by the version protocol).
        let copy = unsafe { info.read_volatile() };
        fence(Ordering::Acquire);
        Snapshot {
            tsc_timestamp: copy.tsc_timestamp,
            system_time: copy.system_time,
            mul: copy.tsc_to_system_mul,
            shift: copy.tsc_shift,
            flags: copy.flags,
        }
    }
}

/// Registers kvmclock's structure (core 0) and, if the hypervisor filled
/// it, makes it the clock. The image is identity mapped, so the static's
/// address is its physical address.
fn start_kvmclock() -> bool {
    // SAFETY: `pvclock::enable` writes only MSR_KVM_SYSTEM_TIME_NEW, with
    // the address of `KVMCLOCK_INFO`, a static: it lives as long as the
    // node, and only the hypervisor writes it.
    let mut msrs = unsafe { HardwareMsrs::new() };
    pvclock::enable(&mut msrs, KVMCLOCK_INFO.0.get() as u64);
    let snapshot = pvclock::read(&Hardware);
    if snapshot.mul == 0 {
        log::warn!("kvmclock is offered but its structure stays empty: using the TSC");
        return false;
    }
    if !snapshot.stable() {
        log::warn!("kvmclock does not mark the TSC stable: every core reads core 0's clock");
    }
    let khz = snapshot.tsc_khz().max(1);
    KHZ.store(khz, Ordering::Relaxed);
    NS_PER_TICK.store((1_000_000u64 << 32) / khz, Ordering::Relaxed);
    ORIGIN_NS.store(snapshot.nanos_at(rdtsc()), Ordering::Relaxed);
    ORIGIN.store(rdtsc(), Ordering::Relaxed);
    KVMCLOCK.store(true, Ordering::Release);
    log::debug!("clock: kvmclock, TSC {khz} kHz");
    true
}

/// Reads the TSC.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC only reads the time-stamp counter; CR4.TSD is clear,
    // and at CPL 0 it would not matter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// PIT input clock, Hz.
const PIT_HZ: u64 = 1_193_182;

/// Channel 0's current count (latched).
fn pit_count() -> u16 {
    let mut command: Port<u8> = Port::new(0x43);
    let mut data: Port<u8> = Port::new(0x40);
    // SAFETY: latching PIT channel 0's count has no other effect; nothing
    // else uses the PIT.
    unsafe { command.write(0x00) };
    // SAFETY: reads the latched count, low byte first.
    let low = unsafe { data.read() };
    // SAFETY: the second read of the data port returns the latched count's
    // high byte and ends the latch; no other effect.
    let high = unsafe { data.read() };
    u16::from_le_bytes([low, high])
}

/// Measures the TSC against 10 ms of PIT channel 0.
fn calibrate_with_pit() -> u64 {
    let mut command: Port<u8> = Port::new(0x43);
    let mut data: Port<u8> = Port::new(0x40);
    // SAFETY: programs PIT channel 0 as a free-running rate generator
    // (mode 2, reload 65536); its interrupt is masked at the PIC and not
    // routed through the IOAPIC.
    unsafe { command.write(0x34) };
    // SAFETY: the reload value, low byte (0 = 65536)...
    unsafe { data.write(0) };
    // SAFETY: ... and high byte.
    unsafe { data.write(0) };
    let target = PIT_HZ / 100;
    let mut previous = pit_count();
    let start = rdtsc();
    let mut ticks = 0u64;
    while ticks < target {
        let now = pit_count();
        ticks += u64::from(previous.wrapping_sub(now));
        previous = now;
    }
    let elapsed = rdtsc() - start;
    elapsed * PIT_HZ / (ticks * 1000)
}

/// Sets the clock up: time 0 is now.
pub fn init(tsc_khz: Option<u64>, kvmclock: bool) {
    if kvmclock && start_kvmclock() {
        return;
    }
    let khz = match tsc_khz {
        Some(khz) if khz > 0 => khz,
        _ => {
            let khz = calibrate_with_pit();
            log::info!("no tsc_khz= on the command line; PIT calibration says {khz} kHz");
            khz.max(1)
        }
    };
    KHZ.store(khz, Ordering::Relaxed);
    NS_PER_TICK.store((1_000_000u64 << 32) / khz, Ordering::Relaxed);
    ORIGIN.store(rdtsc(), Ordering::Relaxed);
}

/// Nanoseconds from the TSC's 0 (the vCPU's reset: QEMU starts the
/// guest) to time 0 of [`nanos`]; 0 under kvmclock, whose time base is
/// the host's, not the guest's reset.
pub fn origin_since_reset_ns() -> u64 {
    if KVMCLOCK.load(Ordering::Relaxed) {
        return 0;
    }
    let ticks = ORIGIN.load(Ordering::Relaxed);
    ((u128::from(ticks) * u128::from(NS_PER_TICK.load(Ordering::Relaxed))) >> 32) as u64
}

/// The TSC frequency in kHz.
pub fn tsc_khz() -> u64 {
    KHZ.load(Ordering::Relaxed)
}

/// Nanoseconds since [`init`].
#[inline]
pub fn nanos() -> u64 {
    if KVMCLOCK.load(Ordering::Relaxed) {
        let now = pvclock::read(&Hardware).nanos_at(rdtsc());
        return now.saturating_sub(ORIGIN_NS.load(Ordering::Relaxed));
    }
    let ticks = rdtsc().saturating_sub(ORIGIN.load(Ordering::Relaxed));
    ((u128::from(ticks) * u128::from(NS_PER_TICK.load(Ordering::Relaxed))) >> 32) as u64
}
