//! Ebbflow's native x86_64 platform (see `README.md` beside this crate).
//!
//! A native image is an application linked with this crate for
//! `x86_64-unknown-none` and booted by QEMU through the PVH entry point
//! (`./ebb run APP --native`). The crate is in layers, one folder each,
//! and dependencies run one way, top to bottom (README, "Layers"):
//!
//! * [`runtime`]: the boot sequence (`runtime/startup.rs`: console, start
//!   info, CPU tables, page tables, heap, clocks, LAPIC, the other cores,
//!   PCI, then the application's [`entry!`]), `run` (the node's event
//!   loop on every core, as on hosted), each core's network stack over
//!   virtio-net, logging; it registers the hooks the layers below call;
//! * [`drivers`]: PCI (enumeration over ECAM, BARs, MSI-X) and virtio
//!   (transport, virtqueues, the network device);
//! * `mm`: the heap, large allocations, demand-paged regions;
//! * [`arch`]: the PVH entry, GDT/TSS/IDT and the exception report, page
//!   tables, the APICs, clocks, the other cores, the serial console, ACPI,
//!   exiting through QEMU.
//!
//! The launcher contract (command line, exit codes, start info, the
//! EbbRef table's addresses) is `ebb_boot_abi`. On hosted targets only the
//! platform-neutral parts build (ACPI and PCI walks, CPUID choices, the
//! identity-map plan, virtqueues, adaptive polling, which received frames
//! other cores need), and are unit-tested there.
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

/// Nanoseconds since boot: the monotonic clock (TSC or kvmclock).
#[cfg(target_os = "none")]
pub use arch::x86_64::clock::nanos as monotonic_nanos;
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

/// Runs the calling code with interrupts on and a periodic timer
/// interrupt every `period_ns`: a C program's threads
/// (`ebb-posix-native`), which thereby run under interrupts as
/// preemptible threads would. The event loop's halts share the timer and
/// re-arm the tick after each. Interrupts take their own stack (an IST), so
/// code compiled with a red zone loses nothing to them.
#[cfg(target_os = "none")]
pub fn start_ticks(period_ns: u64) {
    arch::x86_64::apic::set_tick(period_ns);
    x86_64::instructions::interrupts::enable();
}

/// The timer interrupts this core took since [`start_ticks`].
#[cfg(target_os = "none")]
pub fn ticks_taken() -> u64 {
    arch::x86_64::apic::ticks_taken()
}

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
