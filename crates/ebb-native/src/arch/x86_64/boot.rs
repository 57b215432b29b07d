//! The PVH entry point: the ELF note QEMU looks for, the 32-bit entry that
//! turns on long mode with a temporary identity map of the first 4 GiB, and
//! the first Rust code ([`start64`]), which hands over to the boot
//! sequence (`runtime/startup.rs`) through the link-time hook
//! `ebb_native_boot`: nothing can be registered before the first Rust code
//! runs, so that one call up is fixed by its symbol, as the application's
//! `__ebb_native_app_main` is.
//!
//! PVH (Xen's "PVH boot ABI", which QEMU implements for `-kernel` on q35 and
//! microvm): entry in 32-bit protected mode with paging off, flat segments,
//! interrupts off, `%ebx` = physical address of the start-info structure.

use core::arch::{asm, global_asm};

use crate::arch::x86_64::clock;

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
pub fn since_entry_ns() -> u64 {
    let ticks = clock::rdtsc().saturating_sub(entry_tsc());
    ticks.saturating_mul(1_000_000) / clock::tsc_khz().max(1)
}

/// The TSC at the image's first instruction.
pub fn entry_tsc() -> u64 {
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
    /// The boot sequence (`runtime::startup`): brings every layer up and
    /// runs the application. The one hook fixed at link time.
    fn ebb_native_boot(start_info_paddr: u32) -> !;
}

/// The first Rust code, on the boot stack in long mode with the boot
/// identity map of the first 4 GiB.
extern "C" fn start64(start_info_paddr: u32) -> ! {
    // SAFETY: `runtime::startup` defines `ebb_native_boot` with this
    // signature (an ordinary Rust function); it is called once, here.
    unsafe { ebb_native_boot(start_info_paddr) }
}

/// Moves this core to the stack whose top is `top` and calls `next`
/// there; what was on the old stack is never needed again.
///
/// # Safety
/// `top` is the top of a mapped stack that nothing else uses, and nothing
/// on the current stack is used after the switch.
pub unsafe fn switch_stack(top: u64, next: extern "C" fn() -> !) -> ! {
    // SAFETY: the caller's contract: `top` is a fresh mapped stack, and
    // `next` never returns, so the current stack is abandoned.
    unsafe {
        asm!(
            "mov rsp, {top}",
            "xor ebp, ebp",
            "call {next}",
            top = in(reg) top,
            next = in(reg) next,
            options(noreturn)
        )
    }
}
