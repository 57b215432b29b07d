//! Starting the other cores (application processors, APs): their LAPIC ids
//! come from the ACPI MADT ([`crate::arch::x86_64::acpi`]); each is started with
//! INIT-SIPI-SIPI (Intel SDM vol. 3A §9.4.4) into a real-mode trampoline
//! copied to [`TRAMPOLINE`], which enters long mode on core 0's page tables
//! and jumps to 64-bit code in the image; there the core finds its entry in
//! `ebb_ap_table` by its initial APIC id (CPUID leaf 1, EBX[31:24]) and
//! switches to its own PML4 and its own stack (guard page below).
//!
//! All cores start at once: core 0 fills every core's entry, sends all the
//! INITs, then all the SIPIs, and goes on with the boot (PCI) while the
//! cores set themselves up; before the application runs it waits until
//! every core says it runs. The legacy 10 ms wait after INIT and the 200 µs
//! between the two SIPIs are for old hardware; QEMU needs neither, so a
//! second SIPI is only sent to cores that have not answered the first
//! after 1 ms.

use alloc::vec::Vec;
use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicU64, Ordering};

use spin::Once;

use crate::arch::x86_64::acpi::{self, PhysicalMemory};
use crate::arch::x86_64::{apic, clock, cpu, paging};

/// Where the trampoline is copied: page 8, a real-mode start-up vector
/// (SIPI vector 0x08), in low RAM that QEMU's firmware leaves free and
/// that the boot no longer needs (the start info was copied at entry).
pub const TRAMPOLINE: u64 = 0x8000;
/// Each core's main stack.
pub const CORE_STACK_SIZE: u64 = 512 * 1024;

// The trampoline: 16-bit code at TRAMPOLINE (CS:IP = 0x0800:0000), a GDT
// and the slots core 0 fills. It turns long mode on directly from real
// mode (PAE, CR3, EFER.LME|NXE, then CR0.PE|PG at once) and far-jumps to
// `ebb_ap_start64` in the image. Addresses inside it are
// `label - ebb_trampoline_start + 0x8000`.
global_asm!(
    r#"
    .section .rodata.ebb_trampoline, "a"
    .p2align 4
    .global ebb_trampoline_start
    .global ebb_trampoline_end
ebb_trampoline_start:
    .code16
    cli
    cld
    xor %ax, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    lgdtl (ebb_trampoline_gdt_ptr - ebb_trampoline_start + {base})
    mov %cr4, %eax
    or $0x20, %eax                  /* PAE */
    mov %eax, %cr4
    movl (ebb_trampoline_cr3 - ebb_trampoline_start + {base}), %eax
    mov %eax, %cr3
    mov $0xC0000080, %ecx           /* EFER */
    rdmsr
    or $0x900, %eax                 /* LME | NXE */
    wrmsr
    mov %cr0, %eax
    or $0x80010001, %eax            /* PG | WP | PE */
    mov %eax, %cr0
    ljmpl $0x08, $ebb_ap_start64
    .code64

    .p2align 3
ebb_trampoline_gdt:
    .quad 0
    .quad 0x00af9a000000ffff        /* 0x08: 64-bit code */
    .quad 0x00cf92000000ffff        /* 0x10: data */
ebb_trampoline_gdt_ptr:
    .word 23
    .long ebb_trampoline_gdt - ebb_trampoline_start + {base}
    .p2align 3
ebb_trampoline_cr3:
    .quad 0
ebb_trampoline_end:

    /* Per APIC id: CR3, stack top, core number (3 quads). */
    .section .bss.ebb_ap_table, "aw", @nobits
    .p2align 3
    .global ebb_ap_table
ebb_ap_table:
    .skip 256 * 24

    .section .text.ebb_ap, "ax"
ebb_ap_start64:
    mov $0x10, %eax
    mov %eax, %ds
    mov %eax, %es
    mov %eax, %ss
    xor %eax, %eax
    mov %eax, %fs
    mov %eax, %gs
    mov $1, %eax
    cpuid
    shr $24, %ebx                   /* initial APIC id */
    lea (%rbx, %rbx, 2), %rbx       /* x 3 quads */
    mov ebb_ap_table(, %rbx, 8), %rax
    mov %rax, %cr3
    mov ebb_ap_table + 8(, %rbx, 8), %rsp
    mov ebb_ap_table + 16(, %rbx, 8), %rdi
    xor %ebp, %ebp
    call {ap_main}
1:  cli
    hlt
    jmp 1b
    "#,
    base = const TRAMPOLINE,
    ap_main = sym ap_main,
    options(att_syntax)
);

extern "C" {
    static ebb_trampoline_start: u8;
    static ebb_trampoline_end: u8;
    static mut ebb_ap_table: [[u64; 3]; 256];
}

/// One bit per core number that said it started.
static STARTED: AtomicU64 = AtomicU64::new(0);

/// Physical memory, identity mapped: all memory-map ranges (ACPI tables
/// included) and the first 2 MiB (the BIOS area) except page 0.
pub(crate) struct IdentityMapped;

impl PhysicalMemory for IdentityMapped {
    fn read(&self, addr: u64, buffer: &mut [u8]) {
        for (i, byte) in buffer.iter_mut().enumerate() {
            // SAFETY: the ACPI walk reads firmware tables in ranges the
            // page tables identity-map (this type's contract); volatile because it is
            // memory the firmware wrote, read once.
            *byte = unsafe { ((addr + i as u64) as *const u8).read_volatile() };
        }
    }
}

/// Cores that [`start_cores`] sent on their way: [`Starting::finish`]
/// waits until they run.
pub struct Starting {
    /// LAPIC ids of the cores known to run: core 0 (this one).
    running: Vec<u32>,
    /// (core number, LAPIC id, PML4) of each core sent the IPIs.
    planned: Vec<(u64, u32, u64)>,
    /// `clock::nanos()` when the start-up IPIs went out.
    sent_at: u64,
}

/// Starts up to `wanted - 1` more cores without waiting for them: they set
/// themselves up (stacks, GDT/TSS, LAPIC) while core 0 goes on with the
/// boot, and [`Starting::finish`] waits for them before the application
/// runs. Fewer if the MADT lists fewer CPUs or no memory is left (both are
/// reported). Each core, once set up, calls `core_main` with its number
/// (the runtime's hook: its event loop) and never returns.
pub fn start_cores(
    wanted: usize,
    madt: &Result<acpi::Cpus, acpi::AcpiError>,
    core_main: fn(usize) -> !,
) -> Starting {
    CORE_MAIN.call_once(|| core_main);
    let mut starting = Starting {
        running: Vec::from([apic::id()]),
        planned: Vec::new(),
        sent_at: 0,
    };
    if wanted <= 1 {
        return starting;
    }
    let cpus = match madt {
        Ok(cpus) => cpus,
        Err(error) => {
            log::warn!("cannot list the CPUs ({error}): running 1 core");
            return starting;
        }
    };
    let this = starting.running[0];
    let others: Vec<u32> = cpus
        .apic_ids()
        .iter()
        .copied()
        .filter(|&id| id != this)
        .take(wanted - 1)
        .collect();
    if others.len() + 1 < wanted {
        log::warn!(
            "cores={wanted} asked, but the MADT lists {} CPUs: running {}",
            cpus.apic_ids().len(),
            others.len() + 1
        );
    }
    copy_trampoline();
    // Every core's entry first, then the IPIs.
    let planned = &mut starting.planned;
    for id in others {
        let core = planned.len() as u64 + 1;
        if id > 255 || core >= 64 {
            log::warn!("LAPIC id {id} cannot be started in xAPIC mode");
            break;
        }
        let (Ok(pml4), Ok(stack)) = (paging::new_core_pml4(), paging::map_stack(CORE_STACK_SIZE))
        else {
            log::warn!("no memory to start core {core}");
            break;
        };
        let entry = (&raw mut ebb_ap_table)
            .cast::<[u64; 3]>()
            .wrapping_add(id as usize);
        // SAFETY: `id < 256` is inside the table, which only core 0 writes,
        // before it starts the core that reads this entry.
        unsafe { entry.write_volatile([pml4, stack, core]) };
        planned.push((core, id, pml4));
    }
    for &(_, id, _) in planned.iter() {
        apic::send_init(id);
    }
    for &(_, id, _) in planned.iter() {
        apic::send_startup(id, (TRAMPOLINE >> 12) as u8);
    }
    starting.sent_at = clock::nanos();
    starting
}

impl Starting {
    /// Gives the started cores the identity-map entries core 0's PML4
    /// gained since their PML4s were copied from it (`map_device` for PCI
    /// windows above 512 GiB), waits until every core says it runs (a
    /// second SIPI to those silent 1 ms after the first), and returns the
    /// LAPIC ids of the running cores, core 0 first.
    pub fn finish(self) -> Vec<u32> {
        let Starting {
            mut running,
            planned,
            sent_at,
        } = self;
        for &(_, _, pml4) in &planned {
            paging::share_new_entries(pml4);
        }
        let all: u64 = planned.iter().map(|&(core, _, _)| 1 << core).sum();
        let first_wait = (sent_at + 1_000_000).saturating_sub(clock::nanos());
        if !wait_started(all, first_wait) {
            let started = STARTED.load(Ordering::Acquire);
            for &(core, id, _) in &planned {
                if started & (1 << core) == 0 {
                    apic::send_startup(id, (TRAMPOLINE >> 12) as u8);
                }
            }
            wait_started(all, 200_000_000);
        }
        let started = STARTED.load(Ordering::Acquire);
        for &(core, id, _) in &planned {
            if started & (1 << core) == 0 {
                log::warn!(
                    "core {core} (LAPIC id {id}) did not start within 200 ms; running {core}"
                );
                break;
            }
            running.push(id);
        }
        running
    }
}

fn copy_trampoline() {
    let start = &raw const ebb_trampoline_start;
    let len = (&raw const ebb_trampoline_end) as usize - start as usize;
    // SAFETY: the trampoline is `len` bytes of the image; page 8 is
    // identity-mapped low RAM that nothing else uses (see TRAMPOLINE).
    unsafe { core::ptr::copy_nonoverlapping(start, TRAMPOLINE as *mut u8, len) };
    // The CR3 slot, the trampoline's last quad: core 0's tables, which
    // identity-map the trampoline and the image for every core.
    let slot = (TRAMPOLINE + len as u64 - 8) as *mut u64;
    // SAFETY: the slot is in the copy just made, 8-aligned (`.p2align 3`,
    // TRAMPOLINE page-aligned); no other core runs yet.
    unsafe { slot.write_volatile(paging::core0_pml4()) };
}

/// Waits up to `ns` until every core in the bit set `all` started.
fn wait_started(all: u64, ns: u64) -> bool {
    let end = clock::nanos() + ns;
    loop {
        if STARTED.load(Ordering::Acquire) & all == all {
            return true;
        }
        if clock::nanos() >= end {
            return false;
        }
        core::hint::spin_loop();
    }
}

/// The first Rust code of another core: on its own stack and page tables,
/// interrupts off. Sets the CPU and the LAPIC up, says it started, and
/// waits for the node to run its event loop.
extern "C" fn ap_main(core: u64) -> ! {
    if let Err(error) = cpu::init_other_core(core as usize) {
        log::warn!("core {core}: {error}");
    }
    apic::enable();
    STARTED.fetch_or(1 << core, Ordering::Release);
    match CORE_MAIN.get() {
        Some(core_main) => core_main(core as usize),
        None => loop {
            // Unreachable: `start_cores` registers it before any core
            // starts. Without it this core has nothing to run.
            // SAFETY: halting with interrupts off stops this core for good.
            unsafe { asm!("cli", "hlt", options(nomem, nostack)) };
        },
    }
}

/// What each core runs after its setup (the runtime's, given to
/// [`start_cores`]).
static CORE_MAIN: Once<fn(usize) -> !> = Once::new();

/// Sleeps until an interrupt (a wake-up IPI) arrives. `sti` takes effect
/// after `hlt` begins, so a wake-up sent after the caller's last check
/// still ends the halt.
pub fn halt_until_interrupt() {
    // SAFETY: the handlers (timer, wake-up) only acknowledge and return;
    // interrupts go off again at once.
    unsafe { asm!("sti", "hlt", "cli", options(nomem, nostack)) };
}
