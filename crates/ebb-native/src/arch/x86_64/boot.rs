//! The PVH entry point: the ELF note QEMU looks for, the 32-bit entry that
//! turns on long mode with a temporary identity map of the first 4 GiB, and
//! the first Rust code ([`start64`]), which brings the platform up and runs
//! the application.
//!
//! PVH (Xen's "PVH boot ABI", which QEMU implements for `-kernel` on q35 and
//! microvm): entry in 32-bit protected mode with paging off, flat segments,
//! interrupts off, `%ebx` = physical address of the start-info structure.

use core::arch::{asm, global_asm};

use crate::arch::x86_64::cpu_features::{self, CpuFeatures, HardwareCpuid};
use crate::arch::x86_64::wall_clock;
use crate::arch::x86_64::{apic, clock, console, cpu, lapic_modes, paging, smp, start_info};
use crate::drivers::pci::ecam;
use crate::mm::memory;
use crate::runtime;
use crate::runtime::{logger, phases};
use ebb_boot_abi::{parse_cmdline, EXIT_BOOT_FAILURE};

/// Size of the boot stack, used until the heap exists (then core 0 moves
/// to a stack with a guard page).
pub const BOOT_STACK_SIZE: usize = 64 * 1024;

// The boot page tables (PML4, one PDPT, four page directories of 2 MiB pages
// for the first 4 GiB), the boot GDT, and the boot stack. The tables and the
// stack are in .bss, which the entry code zeroes before using either.
global_asm!(
    r#"
    .section .note.Xen, "a", @note
    .p2align 2
    .long 4                     /* namesz: "Xen\0" */
    .long 8                     /* descsz: a 64-bit address in ELF64 */
    .long 18                    /* XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .p2align 2
    .quad ebb_pvh_start32

    .section .bss.ebb_boot, "aw", @nobits
    .p2align 12
ebb_boot_pml4:
    .skip 4096
ebb_boot_pdpt:
    .skip 4096
ebb_boot_pd:
    .skip 4096 * 4
    .p2align 4
ebb_boot_stack_bottom:
    .skip {stack_size}
ebb_boot_stack_top:

    /* The TSC at the first instruction (in .data: .bss is zeroed after). */
    .section .data.ebb_boot, "aw"
    .p2align 3
    .global ebb_entry_tsc
ebb_entry_tsc:
    .quad 0

    .section .rodata.ebb_boot, "a"
    .p2align 3
ebb_boot_gdt:
    .quad 0
    .quad 0x00af9a000000ffff    /* 0x08: 64-bit code */
    .quad 0x00cf92000000ffff    /* 0x10: data */
ebb_boot_gdt_end:
ebb_boot_gdt_ptr:
    .word ebb_boot_gdt_end - ebb_boot_gdt - 1
    .long ebb_boot_gdt

    .section .text.ebb_boot, "ax"
    .code32
    .global ebb_pvh_start32
ebb_pvh_start32:
    cli
    cld
    mov %ebx, %esi              /* start info, kept for start64 */
    rdtsc
    mov %eax, ebb_entry_tsc
    mov %edx, ebb_entry_tsc + 4

    /* zero .bss (QEMU does, other loaders may not), 4 bytes a step:
       TCG runs `rep stos` one element per trip through its loop, so
       dwords take a quarter of the time bytes took (both ends of .bss
       are 4 KiB-aligned, link.ld) */
    mov $__bss_start, %edi
    mov $__bss_end, %ecx
    sub %edi, %ecx
    shr $2, %ecx
    xor %eax, %eax
    rep stosl

    /* PML4[0] -> PDPT; PDPT[0..4] -> 4 page directories */
    mov $ebb_boot_pdpt, %eax
    or $0x3, %eax
    mov %eax, ebb_boot_pml4
    mov $ebb_boot_pd, %eax
    or $0x3, %eax
    mov $ebb_boot_pdpt, %edi
    mov $4, %ecx
1:  mov %eax, (%edi)
    add $4096, %eax
    add $8, %edi
    loop 1b

    /* 2048 2 MiB pages: present, writable, large */
    mov $ebb_boot_pd, %edi
    mov $0x83, %eax
    mov $2048, %ecx
2:  mov %eax, (%edi)
    add $0x200000, %eax
    add $8, %edi
    loop 2b

    mov $ebb_boot_pml4, %eax
    mov %eax, %cr3
    mov %cr4, %eax
    or $0x20, %eax              /* PAE */
    mov %eax, %cr4
    mov $0xC0000080, %ecx       /* EFER */
    rdmsr
    or $0x900, %eax             /* LME | NXE */
    wrmsr
    mov %cr0, %eax
    or $0x80010001, %eax        /* PG | WP | PE */
    mov %eax, %cr0

    lgdt ebb_boot_gdt_ptr
    ljmp $0x08, $ebb_start64_trampoline

    .code64
ebb_start64_trampoline:
    mov $0x10, %eax
    mov %eax, %ds
    mov %eax, %es
    mov %eax, %ss
    xor %eax, %eax
    mov %eax, %fs
    mov %eax, %gs
    movabs $ebb_boot_stack_top, %rsp
    xor %ebp, %ebp
    mov %esi, %edi              /* zero-extended start-info address */
    call {start64}
3:  cli
    hlt
    jmp 3b
    "#,
    stack_size = const BOOT_STACK_SIZE,
    start64 = sym start64,
    options(att_syntax)
);

extern "C" {
    static __image_start: u8;
    static __image_end: u8;
    static ebb_entry_tsc: u64;
}

/// Nanoseconds from the image's first instruction (the PVH entry) until
/// now, by the TSC (`./ebb bench boot`'s `boot_to_main_ms`).
fn since_entry_ns() -> u64 {
    let ticks = clock::rdtsc().saturating_sub(entry_tsc());
    ticks.saturating_mul(1_000_000) / clock::tsc_khz().max(1)
}

/// The TSC at the image's first instruction.
fn entry_tsc() -> u64 {
    // SAFETY: written once by the entry code before any Rust runs; read-only
    // afterwards.
    unsafe { (&raw const ebb_entry_tsc).read() }
}

/// Where the image lies in physical memory, `[start, end)` (with .bss).
pub fn image_range() -> (u64, u64) {
    (
        (&raw const __image_start) as u64,
        (&raw const __image_end) as u64,
    )
}

extern "Rust" {
    /// Defined by the application with [`crate::entry!`].
    fn __ebb_native_app_main(args: &[&str]) -> i32;
}

/// The first Rust code, on the boot stack in long mode with the boot
/// identity map of the first 4 GiB.
extern "C" fn start64(start_info_paddr: u32) -> ! {
    phases::mark("long mode");
    console::init();
    let info = match start_info::read(start_info_paddr) {
        Ok(info) => info,
        Err(error) => {
            console::emergency(format_args!("ebbflow: bad PVH start info: {error}\n"));
            runtime::exit(i32::from(EXIT_BOOT_FAILURE));
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
    phases::mark("console/cpu");
    let plan = match paging::init(info) {
        Ok(plan) => plan,
        Err(error) => {
            log::error!("cannot build page tables: {error}");
            runtime::exit(i32::from(EXIT_BOOT_FAILURE));
        }
    };
    phases::mark("paging");
    memory::init(plan);
    phases::mark("heap");
    runtime::set_options(options);
    if let Err(error) = cpu::guard_core0_stacks() {
        log::error!("no memory for core 0's interrupt stacks: {error}");
        runtime::exit(i32::from(EXIT_BOOT_FAILURE));
    }
    // Core 0 leaves the boot stack for one with a guard page below, like
    // every other core's.
    let top = match paging::map_stack(smp::CORE_STACK_SIZE) {
        Ok(top) => top,
        Err(error) => {
            log::error!("no memory for core 0's stack: {error}");
            runtime::exit(i32::from(EXIT_BOOT_FAILURE));
        }
    };
    phases::mark("stacks");
    // SAFETY: `top` is the top of a fresh mapped stack that nothing else
    // uses; `start_core0` never returns, so nothing on the boot stack is
    // needed again (what it needs is in statics).
    unsafe {
        asm!(
            "mov rsp, {top}",
            "xor ebp, ebp",
            "call {next}",
            top = in(reg) top,
            next = sym start_core0,
            options(noreturn)
        )
    }
}

/// The rest of the boot, on core 0's own stack: clock, LAPIC, the other
/// cores, then the application.
extern "C" fn start_core0() -> ! {
    let Some(info) = start_info::get() else {
        runtime::exit(i32::from(EXIT_BOOT_FAILURE));
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
    let wall_source = wall_clock::init(options.wall);
    phases::mark("clock");
    apic::init();
    phases::mark("lapic");
    // One MADT walk for the I/O APICs and the CPUs.
    let madt = crate::arch::x86_64::acpi::cpus(&smp::IdentityMapped, info.rsdp);
    phases::mark("acpi");
    apic::mask_ioapics(&madt);
    phases::mark("ioapic");
    // The other cores set themselves up while core 0 enumerates PCI (whose
    // BARs above 512 GiB need new PML4 entries: `finish` gives them to
    // the other cores before the application runs).
    let starting = smp::start_cores(options.cores, &madt);
    phases::mark("cores sent");
    if let Err(error) = ecam::init(info.rsdp) {
        log::warn!("PCI: {error}");
    }
    phases::mark("pci");
    runtime::set_cores(starting.finish().into_boxed_slice());
    phases::mark("cores wait");
    apic::finish_calibration();
    phases::mark("lapic timer");
    let boot_ns = since_entry_ns();
    if log::log_enabled!(log::Level::Debug) {
        apic::describe_ioapics();
        runtime::describe_boot(info);
        phases::describe(entry_tsc());
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

    let mut words: [&str; 64] = [""; 64];
    let mut count = 0;
    for word in args {
        if count == words.len() {
            log::warn!("more than 64 application arguments; the rest are dropped");
            break;
        }
        words[count] = word;
        count += 1;
    }
    // SAFETY: the application defines this function with `entry!`, whose
    // signature the macro checks; it is an ordinary Rust function.
    let code = unsafe { __ebb_native_app_main(&words[..count]) };
    runtime::exit(code)
}
