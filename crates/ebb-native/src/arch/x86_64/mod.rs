//! x86_64 under QEMU (q35, microvm): PVH boot, CPU tables and exceptions,
//! page tables, the local and I/O APICs, clocks, the other cores, the
//! serial console, ACPI tables and the PVH start info.
//!
//! The modules built on the host too are platform-neutral logic, tested
//! there: ACPI table walks, CPUID choices, I/O APIC masking, the x2APIC
//! MSR paths, the identity-map plan, kvmclock's math and the RTC's
//! conversions.

pub mod acpi;
#[cfg(target_os = "none")]
pub(crate) mod apic;
#[cfg(target_os = "none")]
pub(crate) mod boot;
#[cfg(target_os = "none")]
pub(crate) mod clock;
#[cfg(target_os = "none")]
pub mod console;
#[cfg(target_os = "none")]
pub(crate) mod cpu;
pub mod cpu_features;
#[cfg(target_os = "none")]
pub(crate) mod debug_exit;
#[cfg(target_os = "none")]
pub(crate) mod fpu;
pub mod ioapic;
#[cfg(target_os = "none")]
pub(crate) mod lapic_modes;
pub mod lapic_msr;
pub mod layout;
#[cfg(target_os = "none")]
pub(crate) mod paging;
pub mod pvclock;
pub mod rtc;
#[cfg(target_os = "none")]
pub(crate) mod smp;
#[cfg(target_os = "none")]
pub(crate) mod start_info;
#[cfg(target_os = "none")]
pub(crate) mod wall_clock;
