//! The LAPIC access and timer modes chosen at boot from CPUID
//! ([`crate::arch::x86_64::cpu_features::choose`]), and the CPU's MSRs under
//! `lapic_msr.rs`'s register-level paths (x2APIC, TSC-deadline; written to
//! the SDM and unit-tested there with a fake MSR map).
//!
//! Both are used only when CPUID offers them; under TCG (QEMU 7.2) neither
//! is, and `apic.rs`'s xAPIC MMIO and one-shot paths run.

use core::sync::atomic::{AtomicBool, Ordering};

use x86_64::registers::model_specific::Msr;

use crate::arch::x86_64::clock;
use crate::arch::x86_64::cpu_features::{InterruptControllerMode, PlatformChoice, TimerMode};
use crate::arch::x86_64::lapic_msr::{self, Msrs};

/// The CPU's own MSRs. Made only by this module (LAPIC and TSC-deadline
/// registers) and `clock.rs` (kvmclock), through the unsafe constructor:
/// `wrmsr` of an arbitrary MSR (EFER, LSTAR, an address the hypervisor
/// will write to) could break memory safety, so safe code cannot hold one.
pub(crate) struct HardwareMsrs(());

impl HardwareMsrs {
    /// The CPU's MSRs.
    ///
    /// # Safety
    ///
    /// The holder reads and writes only IA32_APIC_BASE, IA32_TSC_DEADLINE,
    /// the x2APIC range (0x800–0x8ff) and MSR_KVM_SYSTEM_TIME_NEW, with
    /// values valid for them (Intel SDM vol. 3A §11.12, §11.5.4.1; KVM's
    /// `msr.rst`), and a kvmclock address names a structure that lives for
    /// the rest of the node.
    pub(crate) const unsafe fn new() -> Self {
        HardwareMsrs(())
    }

    /// This core's LAPIC and timer MSRs, as `lapic_msr` writes them.
    fn lapic() -> Self {
        // SAFETY: every caller in this module goes through `lapic_msr`,
        // which writes only IA32_APIC_BASE (enable bits on the current
        // base), x2APIC registers and IA32_TSC_DEADLINE.
        unsafe { HardwareMsrs::new() }
    }
}

impl Msrs for HardwareMsrs {
    fn read(&mut self, msr: u32) -> u64 {
        // SAFETY: `HardwareMsrs::new`'s contract limits `msr` to the
        // LAPIC, TSC-deadline and kvmclock MSRs of modes CPUID offers;
        // reading them has no side effect.
        unsafe { Msr::new(msr).read() }
    }

    fn write(&mut self, msr: u32, value: u64) {
        // The writes affect this core's interrupt delivery and time, which
        // `apic.rs` and `clock.rs` own, not memory safety.
        // SAFETY: `HardwareMsrs::new`'s contract limits them to LAPIC
        // registers, this core's timer and kvmclock's (live) structure.
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
    lapic_msr::read_register(&mut HardwareMsrs::lapic(), register)
}

/// Writes the x2APIC register at MMIO offset `register`.
pub fn write_msr(register: usize, value: u32) {
    lapic_msr::write_register(&mut HardwareMsrs::lapic(), register, value);
}

/// Enables this core's LAPIC (in x2APIC mode if `x2apic`).
pub fn enable_lapic(x2apic: bool) {
    lapic_msr::enable(&mut HardwareMsrs::lapic(), x2apic);
}

/// Sends an IPI in x2APIC mode: one write, no busy bit to wait on.
pub fn send_ipi(apic_id: u32, command: u32) {
    lapic_msr::send_ipi(&mut HardwareMsrs::lapic(), apic_id, command);
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
    lapic_msr::arm_deadline(&mut HardwareMsrs::lapic(), deadline);
}

/// Disarms the deadline timer.
pub fn disarm_deadline() {
    lapic_msr::disarm_deadline(&mut HardwareMsrs::lapic());
}
