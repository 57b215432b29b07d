//! Ebbflow's native x86_64 platform (see `README.md` beside this crate).
//!
//! A native image is an application linked with this crate for
//! `x86_64-unknown-none` and booted by QEMU through the PVH entry point
//! (`./ebb run APP --native`). Boot goes: 32-bit PVH entry and long mode
//! (`boot`), serial console (`console`), GDT/TSS/IDT and the exception
//! report (`cpu`), page tables (`paging`), heap (`memory`), TSC clock and
//! LAPIC timer (`clock`, `apic`), the other cores (`smp`) with PCI
//! enumerated first (`pci`, `pci_ecam`), then the application's entry
//! ([`entry!`]), which runs the node with [`run`], as on hosted; `run`
//! installs each core's network stack (`net`: `ebb-netstack` over the
//! virtio-net driver in `virtio`, MSI-X through `msix`; one queue pair
//! and one stack per core, `net_cores`).
//!
//! On hosted targets only the platform-neutral parts build: [`abi`] (the
//! contract with the launcher), [`acpi`] and [`pci`] (table and
//! configuration-space walks, host-tested), [`layout`] (memory-map
//! planning), [`frame_kind`] (which received frames other cores'
//! stacks need) and the platform-neutral parts of [`virtio`] (split
//! virtqueues, adaptive polling; host-tested).
#![no_std]
// This crate only targets x86_64 (usize is 64 bits), and it splits
// addresses into hardware fields (descriptor halves, register values) on
// purpose: truncating casts are the point there.
#![allow(clippy::cast_possible_truncation)]

extern crate alloc;

pub mod abi;
pub mod acpi;
pub mod cpu_features;
pub mod frame_kind;
pub mod ioapic;
pub mod lapic_msr;
pub mod layout;
pub mod pci;
pub mod pvclock;
pub mod rtc;

#[cfg(target_os = "none")]
mod apic;
#[cfg(target_os = "none")]
mod boot;
#[cfg(target_os = "none")]
mod clock;
#[cfg(target_os = "none")]
pub mod console;
#[cfg(target_os = "none")]
mod cpu;
#[cfg(target_os = "none")]
mod lapic_modes;
#[cfg(target_os = "none")]
pub mod large;
#[cfg(target_os = "none")]
mod logger;
#[cfg(target_os = "none")]
mod mem_fill;
#[cfg(target_os = "none")]
mod memory;
#[cfg(target_os = "none")]
mod msix;
#[cfg(target_os = "none")]
pub mod net;
#[cfg(target_os = "none")]
mod net_cores;
#[cfg(target_os = "none")]
mod paging;
#[cfg(target_os = "none")]
pub mod pci_ecam;
#[cfg(target_os = "none")]
mod phases;
#[cfg(target_os = "none")]
pub mod regions;
#[cfg(target_os = "none")]
mod runtime;
#[cfg(target_os = "none")]
mod smp;
#[cfg(target_os = "none")]
mod start_info;
pub mod virtio;
#[cfg(target_os = "none")]
mod wall_clock;

#[cfg(target_os = "none")]
pub use cpu::interrupt_stacks;
#[cfg(target_os = "none")]
pub use memory::stats as page_allocator_bytes;
#[cfg(target_os = "none")]
pub use paging::is_mapped;
#[cfg(target_os = "none")]
pub use runtime::{exit, run, NativeError};
/// Wall-clock time in nanoseconds since the Unix epoch (from `wall=` or
/// the CMOS RTC at boot, advanced by the TSC), `None` if unknown.
#[cfg(target_os = "none")]
pub use wall_clock::unix_nanos;

/// Declares the application's native entry point: `main` gets the
/// application's arguments (the kernel command line after `--`) once the
/// platform is up (CPU, paging, heap, clock) and returns the exit code the
/// launcher (`./ebb run APP --native`) exits with. It usually calls
/// [`run`] with the node's first event, as a hosted `main` calls
/// `ebb_hosted::run`.
///
/// ```ignore
/// ebb_native::entry!(main);
/// fn main(args: &[&str]) -> i32 { ... }
/// ```
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        /// The application's native entry, called by the platform after boot.
        #[no_mangle]
        pub fn __ebb_native_app_main(args: &[&str]) -> i32 {
            let main: fn(&[&str]) -> i32 = $main;
            main(args)
        }
    };
}
