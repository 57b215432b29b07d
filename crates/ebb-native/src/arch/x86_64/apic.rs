//! The local APIC, in xAPIC mode (MMIO at 0xfee00000) unless CPUID offers
//! x2APIC (then MSRs, `lapic_modes.rs`; TCG offers neither x2APIC nor the
//! TSC-deadline timer): the one-shot (or TSC-deadline) timer that ends a halt
//! at the next deadline, end-of-interrupt, and IPIs for `notify`.
//! The legacy 8259 PICs are masked: device interrupts will come through the
//! IOAPIC and MSI.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use x86_64::instructions::port::Port;

use crate::arch::x86_64::clock;
use crate::arch::x86_64::lapic_modes::{self, x2apic};
use crate::arch::x86_64::paging::LAPIC_BASE;

/// The LAPIC timer's vector.
pub const TIMER_VECTOR: u64 = 0x30;
/// The vector of wake-up IPIs (`Platform::notify`).
pub const WAKE_VECTOR: u64 = 0x31;
/// The vector of device interrupts (MSI-X messages): the handler records
/// that one arrived ([`take_device_interrupt`]) and the loop's `dispatch`
/// runs the drivers.
pub const DEVICE_VECTOR: u64 = 0x40;
/// The spurious-interrupt vector (no EOI).
pub const SPURIOUS_VECTOR: u64 = 0xff;

const ID: usize = 0x20;
const TPR: usize = 0x80;
const EOI: usize = 0xb0;
const SVR: usize = 0xf0;
const ICR_LOW: usize = 0x300;
const ICR_HIGH: usize = 0x310;
const LVT_TIMER: usize = 0x320;
const LVT_ERROR: usize = 0x370;
const TIMER_INITIAL: usize = 0x380;
const TIMER_CURRENT: usize = 0x390;
const TIMER_DIVIDE: usize = 0x3e0;

const MASKED: u32 = 1 << 16;

/// LAPIC timer ticks per millisecond (calibrated against the TSC).
static TICKS_PER_MS: AtomicU64 = AtomicU64::new(1_000_000);

fn read(register: usize) -> u32 {
    if x2apic() {
        return lapic_modes::read_msr(register);
    }
    // SAFETY: the LAPIC page is identity mapped uncached (paging.rs), and
    // `register` is one of its 32-bit registers.
    unsafe { ((LAPIC_BASE as usize + register) as *const u32).read_volatile() }
}

fn write(register: usize, value: u32) {
    if x2apic() {
        return lapic_modes::write_msr(register, value);
    }
    // SAFETY: the LAPIC page is identity mapped uncached (paging.rs), and
    // `register` is one of its 32-bit registers; writing these registers
    // affects only this core's interrupt delivery, which this module owns.
    unsafe { ((LAPIC_BASE as usize + register) as *mut u32).write_volatile(value) }
}

/// The TSC when the calibration count started ([`init`]); 0 once
/// [`finish_calibration`] ran.
static CALIBRATION_START: AtomicU64 = AtomicU64::new(0);

/// Enables this core's LAPIC, masks the 8259s, and starts the timer's
/// calibration: the timer counts down from its largest value while the
/// boot goes on, and [`finish_calibration`] compares the count with the
/// TSC before the application runs (nothing arms the timer before then),
/// instead of spinning 1 ms here.
pub fn init() {
    let mut pic1: Port<u8> = Port::new(0x21);
    let mut pic2: Port<u8> = Port::new(0xa1);
    // SAFETY: masking every line of the 8259 PICs only stops legacy
    // interrupts, which nothing here uses.
    unsafe { pic1.write(0xff) };
    // SAFETY: masking every line of the second (slave) 8259 only stops
    // legacy interrupts, which nothing here uses.
    unsafe { pic2.write(0xff) };
    enable();
    write(TIMER_INITIAL, u32::MAX);
    CALIBRATION_START.store(clock::rdtsc().max(1), Ordering::Relaxed);
}

/// Ends the timer's calibration that [`init`] started (core 0, before
/// the application's `main`): ticks per millisecond over the time since,
/// at least 1 ms (it spins for the rest if the boot was quicker), as the
/// old fixed 1 ms spin measured.
pub fn finish_calibration() {
    let start = CALIBRATION_START.swap(0, Ordering::Relaxed);
    if start == 0 {
        return;
    }
    let per_ms = ticks_per_ms_since(start).or_else(|| {
        // The count ran out (a boot slower than 2^32 ticks): 1 ms afresh.
        write(TIMER_INITIAL, u32::MAX);
        ticks_per_ms_since(clock::rdtsc())
    });
    write(TIMER_INITIAL, 0);
    if let Some(per_ms) = per_ms {
        TICKS_PER_MS.store(per_ms.max(1), Ordering::Relaxed);
    }
}

/// The timer's rate since it started counting down from `u32::MAX` at
/// TSC `start`, once at least 1 ms passed; `None` if the count ran out.
/// The count is read between two TSC reads and set against their midpoint.
fn ticks_per_ms_since(start: u64) -> Option<u64> {
    let khz = clock::tsc_khz().max(1);
    while clock::rdtsc() < start + khz {
        core::hint::spin_loop();
    }
    let before = clock::rdtsc();
    let count = read(TIMER_CURRENT);
    let after = clock::rdtsc();
    if count == 0 {
        return None;
    }
    let ticks = u128::from(u32::MAX - count);
    let elapsed = u128::from((before / 2 + after / 2).saturating_sub(start).max(1));
    Some((ticks * u128::from(khz) / elapsed) as u64)
}

/// Enables this core's LAPIC: accepts every priority, spurious vector,
/// error interrupt masked, timer stopped, dividing by 1. Other cores use
/// core 0's timer calibration (same clock under QEMU).
pub fn enable() {
    lapic_modes::enable_lapic(x2apic());
    write(TPR, 0);
    write(SVR, 0x100 | SPURIOUS_VECTOR as u32);
    write(LVT_ERROR, MASKED);
    write(TIMER_DIVIDE, 0b1011); // divide by 1
    write(LVT_TIMER, MASKED | TIMER_VECTOR as u32);
    write(TIMER_INITIAL, 0);
}

/// This core's LAPIC id.
pub fn id() -> u32 {
    // The x2APIC id register holds the whole 32-bit id.
    if x2apic() {
        return read(ID);
    }
    read(ID) >> 24
}

/// Arms the one-shot timer to fire in about `ns` nanoseconds (at most
/// `u32::MAX` ticks later: a halt may end early, and the loop halts again).
pub fn arm(ns: u64) {
    if lapic_modes::tsc_deadline() {
        write(
            LVT_TIMER,
            lapic_modes::lvt_timer_deadline(TIMER_VECTOR as u32),
        );
        return lapic_modes::arm_deadline(ns);
    }
    let per_ms = u128::from(TICKS_PER_MS.load(Ordering::Relaxed));
    let ticks = (u128::from(ns) * per_ms / 1_000_000).clamp(1, u128::from(u32::MAX));
    write(LVT_TIMER, TIMER_VECTOR as u32);
    write(TIMER_INITIAL, ticks as u32);
}

/// Stops the timer.
pub fn disarm() {
    if lapic_modes::tsc_deadline() {
        return lapic_modes::disarm_deadline();
    }
    write(TIMER_INITIAL, 0);
}

/// Per LAPIC id (low 8 bits): the period of that core's tick in
/// nanoseconds, 0 for none: a C program's core (`ebb-posix-native`); its
/// event loop's halts re-arm it ([`resume_tick`]).
static TICK_NS: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];

/// Starts this core's periodic tick: its timer fires every `period_ns`
/// (re-armed by [`tick`] at each firing); 0 stops it.
pub fn set_tick(period_ns: u64) {
    TICK_NS[(id() & 0xff) as usize].store(period_ns, Ordering::Relaxed);
    if period_ns == 0 {
        disarm();
    } else {
        arm(period_ns);
    }
}

/// Per LAPIC id (low 8 bits): the timer interrupts a ticking core took.
static TICKS_TAKEN: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];

/// After this core's timer fired: arms the next tick, if it has one, and
/// counts it.
pub fn tick() {
    let core = (id() & 0xff) as usize;
    let period = TICK_NS[core].load(Ordering::Relaxed);
    if period != 0 {
        TICKS_TAKEN[core].fetch_add(1, Ordering::Relaxed);
        arm(period);
    }
}

/// Re-arms this core's tick, if it has one, after the event loop used
/// the timer for a halt's deadline.
pub fn resume_tick() {
    let period = TICK_NS[(id() & 0xff) as usize].load(Ordering::Relaxed);
    if period != 0 {
        arm(period);
    }
}

/// The ticks this core took since [`set_tick`] started them.
pub fn ticks_taken() -> u64 {
    TICKS_TAKEN[(id() & 0xff) as usize].load(Ordering::Relaxed)
}

/// Signals the end of the interrupt being handled.
pub fn eoi() {
    write(EOI, 0);
}

/// Sends the wake-up IPI to the core whose LAPIC id is `apic_id`.
pub fn send_wake(apic_id: u32) {
    send(apic_id, (1 << 14) | WAKE_VECTOR as u32);
}

/// Sends an IPI (the ICR's low word `command`) to `apic_id` and waits
/// until the LAPIC has sent it.
fn send(apic_id: u32, command: u32) {
    if x2apic() {
        return lapic_modes::send_ipi(apic_id, command);
    }
    write(ICR_HIGH, apic_id << 24);
    write(ICR_LOW, command);
    while read(ICR_LOW) & (1 << 12) != 0 {
        core::hint::spin_loop();
    }
}

/// INIT IPI (delivery mode 101, level assert): puts the processor in
/// wait-for-SIPI (Intel SDM vol. 3A §9.4.4.1, "MP initialization").
pub fn send_init(apic_id: u32) {
    send(apic_id, 0x4500);
}

/// Start-up IPI (delivery mode 110): the processor starts in real mode at
/// `page << 12` (the trampoline's page below 1 MiB).
pub fn send_startup(apic_id: u32, page: u8) {
    send(apic_id, 0x4600 | u32::from(page));
}

/// LAPIC timer ticks per millisecond.
pub fn ticks_per_ms() -> u64 {
    TICKS_PER_MS.load(Ordering::Relaxed)
}

/// Per LAPIC id (low 8 bits): whether a device interrupt arrived at that
/// core since its loop last looked. One flag per core, because with
/// multi-queue virtio-net each core takes its own queue's interrupts.
static DEVICE_INTERRUPT: [AtomicBool; 256] = [const { AtomicBool::new(false) }; 256];

/// The device interrupt handler: records it for this core and acknowledges.
pub fn device_interrupt() {
    DEVICE_INTERRUPT[(id() & 0xff) as usize].store(true, Ordering::Release);
    eoi();
}

/// Whether a device interrupt arrived at the core with LAPIC id `apic_id`
/// (the caller's, known without reading the LAPIC) since the last call, and
/// forgets it.
pub fn take_device_interrupt(apic_id: u32) -> bool {
    DEVICE_INTERRUPT[(apic_id & 0xff) as usize].swap(false, Ordering::Acquire)
}

/// An I/O APIC's register window (identity mapped, uncached).
struct MmioIoApic(u64);

impl crate::arch::x86_64::ioapic::IoApicRegisters for MmioIoApic {
    fn read(&mut self, index: u8) -> u32 {
        let base = self.0 as *mut u32;
        // SAFETY: `base` is an I/O APIC's mapped register window (from the
        // MADT, mapped by `mask_ioapics`), only core 0 touches it, at boot;
        // IOREGSEL is at 0x00 and IOWIN at 0x10.
        unsafe { base.write_volatile(u32::from(index)) };
        // SAFETY: IOWIN is the window's register at byte offset 0x10 (four
        // u32s past `base`), inside the mapped window; only core 0 at boot.
        unsafe { base.wrapping_add(4).read_volatile() }
    }

    fn write(&mut self, index: u8, value: u32) {
        let base = self.0 as *mut u32;
        // SAFETY: `base` is an I/O APIC's mapped register window (from the
        // MADT, mapped by `mask_ioapics`); selecting a register through
        // IOREGSEL (offset 0x00) only changes which register IOWIN shows.
        unsafe { base.write_volatile(u32::from(index)) };
        // SAFETY: IOWIN (offset 0x10) is inside the mapped window; the only
        // writes made mask redirection entries, which stops interrupts.
        unsafe { base.wrapping_add(4).write_volatile(value) };
    }
}

/// Maps the I/O APICs the MADT lists (`madt`: the boot's one walk) and
/// masks every pin (`ioapic.rs`). Runs once on core 0, before the other
/// cores start (they copy core 0's page tables then). Without a MADT,
/// QEMU's I/O APIC at its fixed address is masked.
pub fn mask_ioapics(
    madt: &Result<crate::arch::x86_64::acpi::Cpus, crate::arch::x86_64::acpi::AcpiError>,
) {
    let fallback = [crate::arch::x86_64::acpi::IoApic {
        id: 0,
        address: IOAPIC_DEFAULT as u32,
        gsi_base: 0,
    }];
    let found = match madt {
        Ok(madt) => madt.ioapics(),
        Err(error) => {
            log::warn!(
                "no MADT to find the I/O APICs ({error}): masking the one at {IOAPIC_DEFAULT:#x}"
            );
            &fallback[..]
        }
    };
    for ioapic in found {
        let base = u64::from(ioapic.address);
        if let Err(error) = crate::arch::x86_64::paging::map_device(base, base + 4096) {
            log::warn!("cannot map the I/O APIC at {base:#x}: {error}");
            continue;
        }
        let (pins, newly) = crate::arch::x86_64::ioapic::mask_all(&mut MmioIoApic(base));
        let mut masked = MASKED_IOAPICS.lock();
        if let Some(slot) = masked.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some((*ioapic, pins, newly));
        }
    }
}

/// The I/O APICs [`mask_ioapics`] masked (the first 8), with their pin
/// counts and how many pins it had to mask, for [`describe_ioapics`].
type MaskedIoApic = (crate::arch::x86_64::acpi::IoApic, u32, u32);
static MASKED_IOAPICS: spin::Mutex<[Option<MaskedIoApic>; 8]> = spin::Mutex::new([None; 8]);

/// Prints the I/O APICs masked at boot (in the debug boot summary, after
/// the boot, rather than in the middle of it, where printing cost ~1 ms).
pub fn describe_ioapics() {
    for (ioapic, pins, newly) in MASKED_IOAPICS.lock().iter().flatten() {
        log::debug!(
            "I/O APIC id {} at {:#x}: GSIs {}..{}, all {pins} pins masked ({newly} by us)",
            ioapic.id,
            ioapic.address,
            ioapic.gsi_base,
            ioapic.gsi_base + pins
        );
    }
}

/// QEMU's I/O APIC (q35 and microvm).
const IOAPIC_DEFAULT: u64 = crate::arch::x86_64::paging::IOAPIC_BASE;
