//! The LAPIC access and timer modes chosen at boot from CPUID
//! ([`crate::cpu_features::choose`]), and the CPU's MSRs under
//! `lapic_msr.rs`'s register-level paths (x2APIC, TSC-deadline; written to
//! the SDM and unit-tested there with a fake MSR map).
//!
//! Both are used only when CPUID offers them; under TCG (QEMU 7.2) neither
//! is, and `apic.rs`'s xAPIC MMIO and one-shot paths run.

use core::sync::atomic::{AtomicBool, Ordering};

use x86_64::registers::model_specific::Msr;

use crate::clock;
use crate::cpu_features::{InterruptControllerMode, PlatformChoice, TimerMode};
use crate::lapic_msr::{self, Msrs};

/// The CPU's own MSRs.
pub struct HardwareMsrs;

impl Msrs for HardwareMsrs {
    fn read(&mut self, msr: u32) -> u64 {
        // SAFETY: callers name architectural MSRs of modes CPUID offers
        // (LAPIC, TSC-deadline, kvmclock); reading them has no side effect.
        unsafe { Msr::new(msr).read() }
    }

    fn write(&mut self, msr: u32, value: u64) {
        // SAFETY: as in `read`; the writes (LAPIC registers, this core's
        // timer, the kvmclock page's address) affect this core's interrupt
        // delivery and time, which `apic.rs` and `clock.rs` own.
        unsafe { Msr::new(msr).write(value) }
    }
}

static X2APIC: AtomicBool = AtomicBool::new(false);
static TSC_DEADLINE: AtomicBool = AtomicBool::new(false);

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
    lapic_msr::read_register(&mut HardwareMsrs, register)
}

/// Writes the x2APIC register at MMIO offset `register`.
pub fn write_msr(register: usize, value: u32) {
    lapic_msr::write_register(&mut HardwareMsrs, register, value);
}

/// Sends an IPI in x2APIC mode: one write, no busy bit to wait on.
pub fn send_ipi(apic_id: u32, command: u32) {
    lapic_msr::send_ipi(&mut HardwareMsrs, apic_id, command);
}

/// The LVT timer value for a deadline-mode timer on `vector`.
pub fn lvt_timer_deadline(vector: u32) -> u32 {
    lapic_msr::lvt_timer_deadline(vector)
}

/// Arms IA32_TSC_DEADLINE `ns` nanoseconds from now (after the LVT timer
/// was switched to deadline mode).
pub fn arm_deadline(ns: u64) {
    let deadline = lapic_msr::deadline_after(clock::rdtsc(), ns, clock::tsc_khz());
    // The LVT write must be complete before the deadline is written
    // (§11.5.4.1): MMIO writes are ordered by a fence; WRMSR to x2APIC
    // registers is not serializing either.
    // SAFETY: a fence only orders memory accesses.
    unsafe { core::arch::asm!("mfence", options(nostack, preserves_flags)) };
    lapic_msr::arm_deadline(&mut HardwareMsrs, deadline);
}

/// Disarms the deadline timer.
pub fn disarm_deadline() {
    lapic_msr::disarm_deadline(&mut HardwareMsrs);
}
