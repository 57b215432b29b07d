//! The boot sequence: brings the layers up in order (console, start info,
//! CPU tables, page tables, heap, stacks, clocks, LAPIC, ACPI, I/O APICs,
//! the other cores, PCI), registers the hooks the lower layers call back
//! through (see the crate README, "Layers"), and runs the application's
//! `entry!` function. Reached from the PVH entry (`arch/x86_64/boot.rs`)
//! through the link-time symbol `ebb_native_boot`.

use alloc::string::String;
use alloc::vec::Vec;

use ebb_boot_abi::app_args::decode_args;
use ebb_boot_abi::{parse_cmdline, EXIT_BOOT_FAILURE};

use crate::arch::x86_64::cpu_features::{self, CpuFeatures, HardwareCpuid};
use crate::arch::x86_64::debug_exit::exit;
use crate::arch::x86_64::{
    acpi, apic, boot, clock, console, cpu, lapic_modes, paging, smp, start_info, wall_clock,
};
use crate::drivers::pci::ecam;
use crate::drivers::virtio::transport;
use crate::mm::{memory, page_fault};
use crate::runtime::{self, logger, phases};

/// Gives the lower layers what they call back into, before anything can
/// need it: paging takes its frames from the page allocator (`mm`), and
/// a page fault that is not in the EbbRef table goes to `mm` (virtual
/// regions, the large allocations' window). The other cores' life after
/// their CPU setup is given to `smp::start_cores`.
fn register_hooks() {
    paging::set_memory_hooks(paging::MemoryHooks {
        zeroed_frame: memory::zeroed_frame,
        frames: memory::frames,
        prepare_context_page: memory::prepare_core_page,
    });
    cpu::set_page_fault_handler(page_fault::handle);
}

extern "Rust" {
    /// Defined by the application with `ebb_native::entry!`.
    fn __ebb_native_app_main(args: &[&str]) -> i32;
}

/// The boot sequence, called once by the PVH entry (`arch/x86_64/boot.rs`)
/// on the boot stack in long mode with the boot identity map of the first
/// 4 GiB.
#[no_mangle]
pub fn ebb_native_boot(start_info_paddr: u32) -> ! {
    phases::mark("long mode");
    register_hooks();
    console::init();
    let info = match start_info::read(start_info_paddr) {
        Ok(info) => info,
        Err(error) => {
            console::emergency(format_args!("ebbflow: bad PVH start info: {error}\n"));
            exit(i32::from(EXIT_BOOT_FAILURE));
        }
    };
    cpu::init_core0();
    logger::init();
    // The level first, so that what parsing reports obeys it.
    let (options, _) = parse_cmdline(info.cmdline(), |_| {});
    logger::set_level(options.log_level());
    parse_cmdline(info.cmdline(), |word| {
        log::warn!("ignoring unknown platform option '{word}'");
    });
    if let Err(error) = options.node {
        log::error!("bad node options on the command line: {error}");
        exit(i32::from(EXIT_BOOT_FAILURE));
    }
    phases::mark("console/cpu");
    let plan = match paging::init(info) {
        Ok(plan) => plan,
        Err(error) => {
            log::error!("cannot build page tables: {error}");
            exit(i32::from(EXIT_BOOT_FAILURE));
        }
    };
    phases::mark("paging");
    memory::init(plan);
    phases::mark("heap");
    runtime::set_options(options);
    if let Err(error) = cpu::guard_core0_stacks() {
        log::error!("no memory for core 0's interrupt stacks: {error}");
        exit(i32::from(EXIT_BOOT_FAILURE));
    }
    // Core 0 leaves the boot stack for one with a guard page below, like
    // every other core's.
    let top = match paging::map_stack(smp::CORE_STACK_SIZE) {
        Ok(top) => top,
        Err(error) => {
            log::error!("no memory for core 0's stack: {error}");
            exit(i32::from(EXIT_BOOT_FAILURE));
        }
    };
    phases::mark("stacks");
    // SAFETY: `top` is the top of a fresh mapped stack that nothing else
    // uses; `start_core0` never returns, so nothing on the boot stack is
    // needed again (what it needs is in statics).
    unsafe { boot::switch_stack(top, start_core0) }
}

/// The rest of the boot, on core 0's own stack: clock, LAPIC, the other
/// cores, then the application.
extern "C" fn start_core0() -> ! {
    let Some(info) = start_info::get() else {
        exit(i32::from(EXIT_BOOT_FAILURE));
    };
    let options = runtime::options();
    let (_, args) = parse_cmdline(info.cmdline(), |_| {});
    let features = CpuFeatures::detect(&HardwareCpuid);
    let choice = cpu_features::choose(&features, options.tsc_khz.is_some());
    lapic_modes::set(&choice);
    clock::init(
        options.tsc_khz,
        choice.clock == cpu_features::ClockSource::KvmClock,
    );
    let wall_source = wall_clock::init(options.wall_ns);
    phases::mark("clock");
    apic::init();
    phases::mark("lapic");
    // One MADT walk for the I/O APICs and the CPUs.
    let madt = acpi::cpus(&smp::IdentityMapped, info.rsdp);
    phases::mark("acpi");
    apic::mask_ioapics(&madt);
    phases::mark("ioapic");
    // The other cores set themselves up while core 0 enumerates PCI (whose
    // BARs above 512 GiB need new PML4 entries: `finish` gives them to
    // the other cores before the application runs).
    let starting = smp::start_cores(options.cores, &madt, runtime::run_other_core);
    phases::mark("cores sent");
    if let Err(error) = ecam::init(info.rsdp, transport::pci::is_virtio) {
        log::warn!("PCI: {error}");
    }
    phases::mark("pci");
    runtime::set_cores(starting.finish().into_boxed_slice());
    phases::mark("cores wait");
    apic::finish_calibration();
    phases::mark("lapic timer");
    let boot_ns = boot::since_entry_ns();
    if log::log_enabled!(log::Level::Debug) {
        apic::describe_ioapics();
        runtime::describe_boot(info);
        phases::describe(boot::entry_tsc());
        ecam::describe();
        log::debug!(
            "{:?} offered; using {:?}, {:?} timer, clock {:?}",
            features,
            choice.interrupt_controller,
            choice.timer,
            choice.clock
        );
        if let Some(ns) = wall_clock::unix_nanos() {
            log::debug!(
                "wall clock {}.{:03} s since the Unix epoch (from {:?})",
                ns / 1_000_000_000,
                ns / 1_000_000 % 1_000,
                wall_source
            );
        }
        log::debug!(
            "entry to main {}.{:03} ms",
            boot_ns / 1_000_000,
            boot_ns / 1_000 % 1_000
        );
    }

    // The launcher percent-encodes each argument into one word, so that
    // empty ones and spaces pass (`ebb_boot_abi::app_args`).
    let args = decode_args(args, |word, error| {
        log::warn!("application argument '{word}' kept as written: {error}");
    });
    let words: Vec<&str> = args.iter().map(String::as_str).collect();
    // SAFETY: the application defines this function with `entry!`, whose
    // signature the macro checks; it is an ordinary Rust function.
    let code = unsafe { __ebb_native_app_main(&words) };
    exit(code)
}
