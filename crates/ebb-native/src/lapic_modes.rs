//! The LAPIC access and timer modes chosen at boot from CPUID
//! ([`crate::cpu_features::choose`]) and their register-level paths:
//!
//! * **x2APIC** (Intel SDM vol. 3A §11.12): enabled by IA32_APIC_BASE bit
//!   10 (with bit 11); register at MMIO offset `o` is MSR `0x800 + o/16`;
//!   the ICR is one 64-bit MSR (0x830) with the full destination id in
//!   its high half and no delivery-status bit to poll.
//! * **TSC-deadline** (§11.5.4.1): LVT timer mode bits 18:17 = 10b; the
//!   timer fires when the TSC reaches IA32_TSC_DEADLINE (MSR 0x6e0);
//!   writing 0 disarms it.
//!
//! Both are used only when CPUID offers them; under TCG (QEMU 7.2) neither
//! is, and `apic.rs`'s xAPIC MMIO and one-shot paths run.

use core::sync::atomic::{AtomicBool, Ordering};

use x86_64::registers::model_specific::Msr;

use crate::clock;
use crate::cpu_features::{InterruptControllerMode, PlatformChoice, TimerMode};

static X2APIC: AtomicBool = AtomicBool::new(false);
static TSC_DEADLINE: AtomicBool = AtomicBool::new(false);

/// The first x2APIC MSR (the MMIO register at offset 0).
const X2APIC_MSR_BASE: u32 = 0x800;
/// The x2APIC interrupt command register (64-bit).
const X2APIC_ICR: u32 = 0x830;
/// IA32_TSC_DEADLINE.
const IA32_TSC_DEADLINE: u32 = 0x6e0;
/// IA32_APIC_BASE bit 10: x2APIC mode.
pub const APIC_BASE_X2APIC_ENABLE: u64 = 1 << 10;
/// LVT timer mode bits 18:17 = 10b: TSC-deadline.
const LVT_TIMER_TSC_DEADLINE: u32 = 0b10 << 17;

/// Records the modes (core 0, before any LAPIC is enabled).
pub fn set(choice: &PlatformChoice) {
    X2APIC.store(
        choice.interrupt_controller == InterruptControllerMode::X2Apic,
        Ordering::Relaxed,
    );
    TSC_DEADLINE.store(choice.timer == TimerMode::TscDeadline, Ordering::Relaxed);
}

/// The LAPIC is reached through MSRs.
#[inline]
pub fn x2apic() -> bool {
    X2APIC.load(Ordering::Relaxed)
}

/// Deadlines are armed through IA32_TSC_DEADLINE.
#[inline]
pub fn tsc_deadline() -> bool {
    TSC_DEADLINE.load(Ordering::Relaxed)
}

/// Reads the x2APIC register at MMIO offset `register`.
pub fn read_msr(register: usize) -> u32 {
    let msr = Msr::new(X2APIC_MSR_BASE + (register >> 4) as u32);
    // SAFETY: x2APIC mode is on (only then is this called) and `register`
    // is one of the LAPIC's architectural registers.
    unsafe { msr.read() as u32 }
}

/// Writes the x2APIC register at MMIO offset `register`.
pub fn write_msr(register: usize, value: u32) {
    let mut msr = Msr::new(X2APIC_MSR_BASE + (register >> 4) as u32);
    // SAFETY: as in `read_msr`; these registers affect only this core's
    // interrupt delivery, which `apic.rs` owns.
    unsafe { msr.write(u64::from(value)) };
}

/// Sends an IPI in x2APIC mode: one write, no busy bit to wait on.
pub fn send_ipi(apic_id: u32, command: u32) {
    let mut icr = Msr::new(X2APIC_ICR);
    // SAFETY: the ICR sends an IPI of `command`'s kind to `apic_id`;
    // callers send only wake-up, INIT and start-up IPIs.
    unsafe { icr.write((u64::from(apic_id) << 32) | u64::from(command)) };
}

/// The LVT timer value for a deadline-mode timer on `vector`.
pub fn lvt_timer_deadline(vector: u32) -> u32 {
    vector | LVT_TIMER_TSC_DEADLINE
}

/// Arms IA32_TSC_DEADLINE `ns` nanoseconds from now (after the LVT timer
/// was switched to deadline mode).
pub fn arm_deadline(ns: u64) {
    let ticks = (u128::from(ns) * u128::from(clock::tsc_khz()) / 1_000_000).max(1);
    let deadline = u128::from(clock::rdtsc()) + ticks;
    // The LVT write must be complete before the deadline is written
    // (§11.5.4.1): MMIO writes are ordered by a fence; WRMSR to x2APIC
    // registers is not serializing either.
    // SAFETY: a fence only orders memory accesses.
    unsafe { core::arch::asm!("mfence", options(nostack, preserves_flags)) };
    let mut msr = Msr::new(IA32_TSC_DEADLINE);
    // SAFETY: TSC-deadline mode is offered (CPUID) and chosen; the write
    // arms this core's timer only.
    unsafe { msr.write(deadline.min(u128::from(u64::MAX)) as u64) };
}

/// Disarms the deadline timer.
pub fn disarm_deadline() {
    let mut msr = Msr::new(IA32_TSC_DEADLINE);
    // SAFETY: writing 0 disarms this core's deadline timer.
    unsafe { msr.write(0) };
}
