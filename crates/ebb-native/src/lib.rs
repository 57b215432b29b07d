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

pub mod arch;
pub mod drivers;
#[cfg(target_os = "none")]
pub mod mm;
pub mod runtime;

#[cfg(target_os = "none")]
pub use mm::{large, regions};

#[cfg(target_os = "none")]
pub use arch::x86_64::cpu::interrupt_stacks;
#[cfg(target_os = "none")]
pub use arch::x86_64::debug_exit::exit;
#[cfg(target_os = "none")]
pub use arch::x86_64::paging::is_mapped;
/// Wall-clock time in nanoseconds since the Unix epoch (from `wall=` or
/// the CMOS RTC at boot, advanced by the TSC), `None` if unknown.
#[cfg(target_os = "none")]
pub use arch::x86_64::wall_clock::unix_nanos;
#[cfg(target_os = "none")]
pub use mm::memory::stats as page_allocator_bytes;
#[cfg(target_os = "none")]
pub use runtime::{run, NativeError};

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
