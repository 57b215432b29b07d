//! Per-core CPU state: GDT, TSS with interrupt stacks, the IDT, the
//! interrupt entry stubs, and the report printed for an unexpected CPU
//! exception (vector, error code, registers, frame-pointer backtrace).
//!
//! Every vector enters through a small stub (in `global_asm!` below) that
//! pushes a uniform frame ([`Frame`]) and calls [`interrupt`]. Exceptions
//! are fatal for now: the report goes to the serial console and QEMU exits
//! with [`EXIT_CPU_EXCEPTION`]. Interrupts (the LAPIC timer, wake-up IPIs)
//! only acknowledge: their work is done by the event loop after `hlt`
//! returns. Images are built with frame pointers, so `rbp` chains the
//! frames; symbolize the printed addresses on the host
//! (`addr2line -e IMAGE`), which `./ebb run --native` does for you.

use alloc::boxed::Box;
use core::arch::{asm, global_asm};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use spin::Once;
use x86_64::instructions::segmentation::{Segment, CS, DS, ES, SS};
use x86_64::instructions::tables::{lidt, load_tss};
use x86_64::registers::control::{Cr2, Cr3};
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;
use x86_64::structures::DescriptorTablePointer;
use x86_64::VirtAddr;

use ebb_boot_abi::EXIT_CPU_EXCEPTION;

use crate::arch::x86_64::debug_exit::exit;
use crate::arch::x86_64::{apic, console, paging};

/// Bytes of each interrupt stack (IST).
const IST_STACK_SIZE: usize = 16 * 1024;
/// IST slots: 1 double fault, 2 NMI, 3 machine check, 4 page fault, 5
/// every interrupt (the TSS numbers them from 1; the array from 0). The
/// page fault has its own stack so that a stack overflow into a guard page
/// is reported as the page fault it is, not as a double fault.
///
/// Interrupts (vectors 32 to 255) have one too, so that an interrupt never
/// pushes its frame onto the stack it interrupted: code compiled with a
/// red zone (the 128 bytes below rsp a leaf function may use without
/// moving rsp, psABI §3.2.2), as C programs linked into the image may be,
/// keeps it intact (issue 18). One stack serves them all: handlers run
/// with interrupts off and never nest. Exceptions 0 to 31 besides the four
/// above stay on the current stack; they are fatal and reported.
const IST_DOUBLE_FAULT: usize = 0;
const IST_NMI: usize = 1;
const IST_MACHINE_CHECK: usize = 2;
const IST_PAGE_FAULT: usize = 3;
const IST_INTERRUPTS: usize = 4;
/// Every IST slot in use, in slot order.
const IST_SLOTS: [usize; 5] = [
    IST_DOUBLE_FAULT,
    IST_NMI,
    IST_MACHINE_CHECK,
    IST_PAGE_FAULT,
    IST_INTERRUPTS,
];

/// The registers an interrupt stub saves, lowest address first, then what
/// the stub and the CPU pushed.
#[repr(C)]
#[derive(Debug)]
pub struct Frame {
    r15: u64,
    r14: u64,
    r13: u64,
    r12: u64,
    r11: u64,
    r10: u64,
    r9: u64,
    r8: u64,
    rbp: u64,
    rdi: u64,
    rsi: u64,
    rdx: u64,
    rcx: u64,
    rbx: u64,
    rax: u64,
    vector: u64,
    error: u64,
    rip: u64,
    cs: u64,
    rflags: u64,
    rsp: u64,
    ss: u64,
}

// Entry stubs. Exceptions 8, 10-14, 17, 21, 29 and 30 push an error code;
// for the others the stub pushes 0 so that every frame has the same shape.
// `ebb_isr_table` lists (vector, stub address) pairs for `init_core0`.
global_asm!(
    r#"
    .macro EBB_ISR_NOERR n
ebb_isr_\n:
    push $0
    push $\n
    jmp ebb_isr_common
    .endm
    .macro EBB_ISR_ERR n
ebb_isr_\n:
    push $\n
    jmp ebb_isr_common
    .endm

    .section .text.ebb_isr, "ax"
    .irp n, 0,1,2,3,4,5,6,7,9,15,16,18,19,20,22,23,24,25,26,27,28,31,48,49,64,255
    EBB_ISR_NOERR \n
    .endr
    .irp n, 8,10,11,12,13,14,17,21,29,30
    EBB_ISR_ERR \n
    .endr

ebb_isr_common:
    push %rax
    push %rbx
    push %rcx
    push %rdx
    push %rsi
    push %rdi
    push %rbp
    push %r8
    push %r9
    push %r10
    push %r11
    push %r12
    push %r13
    push %r14
    push %r15
    mov %rsp, %rdi
    cld
    call {handler}
    pop %r15
    pop %r14
    pop %r13
    pop %r12
    pop %r11
    pop %r10
    pop %r9
    pop %r8
    pop %rbp
    pop %rdi
    pop %rsi
    pop %rdx
    pop %rcx
    pop %rbx
    pop %rax
    add $16, %rsp
    iretq

    .section .rodata.ebb_isr, "a"
    .p2align 3
    .global ebb_isr_table
ebb_isr_table:
    .irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,48,49,64,255
    .quad \n
    .quad ebb_isr_\n
    .endr
    "#,
    handler = sym interrupt,
    options(att_syntax)
);

/// How many (vector, stub) pairs `ebb_isr_table` holds.
const STUBS: usize = 36;

extern "C" {
    static ebb_isr_table: [[u64; 2]; STUBS];
}

/// One 16-byte IDT gate.
#[repr(C)]
#[derive(Clone, Copy)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    attributes: u8,
    offset_mid: u16,
    offset_high: u32,
    reserved: u32,
}

impl Gate {
    const MISSING: Gate = Gate {
        offset_low: 0,
        selector: 0,
        ist: 0,
        attributes: 0,
        offset_mid: 0,
        offset_high: 0,
        reserved: 0,
    };

    /// A present interrupt gate (interrupts stay off in the handler).
    fn new(handler: u64, selector: SegmentSelector, ist: u8) -> Gate {
        Gate {
            offset_low: handler as u16,
            selector: selector.0,
            ist,
            attributes: 0x8e,
            offset_mid: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Idt([Gate; 256]);

#[repr(C, align(16))]
struct Stack(UnsafeCell<[u8; IST_STACK_SIZE]>);

// SAFETY: each stack is used only by the CPU, as the IST stack of one
// vector on core 0 until `guard_core0_stacks`; Rust code never reads or
// writes it through the static.
unsafe impl Sync for Stack {}

/// Core 0's first interrupt stacks: statics, because the IDT is loaded
/// before the page allocator exists (so that boot faults are reported).
/// [`guard_core0_stacks`] replaces them with guarded ones.
static BOOT_IST_STACKS: [Stack; IST_SLOTS.len()] =
    [const { Stack(UnsafeCell::new([0; IST_STACK_SIZE])) }; IST_SLOTS.len()];

/// Core 0's TSS, written once more after the heap exists.
struct Core0Tss(UnsafeCell<TaskStateSegment>);

// SAFETY: written only by core 0, at boot, with interrupts off and before
// the other cores start; the CPU reads it when it takes an interrupt.
unsafe impl Sync for Core0Tss {}

static CORE0_TSS: Core0Tss = Core0Tss(UnsafeCell::new(TaskStateSegment::new()));

/// Most cores a node has (`smp.rs` counts started cores in a `u64`).
const MAX_CORES: usize = 64;

/// The tops of each core's interrupt stacks (0: not set), by core number,
/// for [`interrupt_stacks`] and `crash=ist-overflow`.
static IST_TOPS: [[AtomicU64; IST_SLOTS.len()]; MAX_CORES] =
    [const { [const { AtomicU64::new(0) }; IST_SLOTS.len()] }; MAX_CORES];

struct Gdt {
    table: GlobalDescriptorTable,
    code: SegmentSelector,
    data: SegmentSelector,
    tss: SegmentSelector,
}

static GDT: Once<Gdt> = Once::new();
static IDT: Once<Idt> = Once::new();

/// # Safety
/// `tss` stays valid (and is this core's alone) for good.
unsafe fn make_gdt(tss: *const TaskStateSegment) -> Gdt {
    let mut table = GlobalDescriptorTable::new();
    let code = table.append(Descriptor::kernel_code_segment());
    let data = table.append(Descriptor::kernel_data_segment());
    // SAFETY: the caller's contract: `tss` lives for good.
    let tss = table.append(unsafe { Descriptor::tss_segment_unchecked(tss) });
    Gdt {
        table,
        code,
        data,
        tss,
    }
}

/// Loads `gdt` (its segments and TSS) and the shared IDT on this core.
fn load(gdt: &'static Gdt) {
    super::fpu::enable();
    gdt.table.load();
    // SAFETY: the selector names this GDT's flat 64-bit code segment, which
    // maps the same addresses as the boot GDT's; no translation changes.
    unsafe { CS::set_reg(gdt.code) };
    // SAFETY: the selector names this GDT's flat data segment; the stack's
    // addresses stay the same.
    unsafe { SS::set_reg(gdt.data) };
    // SAFETY: the flat data segment maps every address as before, so data
    // accesses through DS are unchanged.
    unsafe { DS::set_reg(gdt.data) };
    // SAFETY: the flat data segment maps every address as before, so string
    // instructions' ES accesses are unchanged.
    unsafe { ES::set_reg(gdt.data) };
    // SAFETY: the selector names this GDT's descriptor of its 'static TSS,
    // which is this core's own: not loaded (busy) on any other core.
    unsafe { load_tss(gdt.tss) };
    let idt = IDT.call_once(|| {
        let mut idt = Idt([Gate::MISSING; 256]);
        // SAFETY: `ebb_isr_table` is the constant table of the
        // `global_asm!` above, STUBS pairs long.
        let stubs = unsafe { &ebb_isr_table };
        for &[vector, stub] in stubs {
            let ist = match vector {
                8 => IST_DOUBLE_FAULT + 1,
                2 => IST_NMI + 1,
                18 => IST_MACHINE_CHECK + 1,
                14 => IST_PAGE_FAULT + 1,
                32.. => IST_INTERRUPTS + 1,
                _ => 0,
            };
            idt.0[vector as usize] = Gate::new(stub, gdt.code, ist as u8);
        }
        idt
    });
    let pointer = DescriptorTablePointer {
        limit: (core::mem::size_of::<Idt>() - 1) as u16,
        base: VirtAddr::new(idt.0.as_ptr() as u64),
    };
    // SAFETY: the IDT is 'static and its gates point at the stubs above,
    // which save every register and return with `iretq`.
    unsafe { lidt(&pointer) };
}

/// Loads core 0's GDT (code, data, TSS), TSS (interrupt stacks: the boot
/// statics for now) and the IDT. After this an exception produces a report
/// instead of a reset.
pub fn init_core0() {
    let tss = CORE0_TSS.0.get();
    for (slot, stack) in BOOT_IST_STACKS.iter().enumerate() {
        let top = stack.0.get() as u64 + IST_STACK_SIZE as u64;
        // SAFETY: boot, core 0 alone, interrupts off, the TSS not loaded
        // yet: nothing else reads or writes it.
        unsafe { (*tss).interrupt_stack_table[slot] = VirtAddr::new(top) };
    }
    // SAFETY: the TSS is a static, core 0's alone.
    load(GDT.call_once(|| unsafe { make_gdt(tss) }));
}

/// Moves core 0's interrupt stacks to the stacks' region, each with an
/// unmapped guard page below (like every other core's), so that an
/// overflow of an interrupt stack faults into the report instead of
/// running over the memory below. Needs the page allocator; runs once on
/// core 0, at boot, with interrupts off and no exception in progress (so
/// no IST stack is in use).
pub fn guard_core0_stacks() -> Result<(), paging::PagingError> {
    let tss = CORE0_TSS.0.get();
    for slot in IST_SLOTS {
        let top = paging::map_stack(IST_STACK_SIZE as u64)?;
        // The CPU reads IST entries from memory at each interrupt, so the
        // loaded TSS needs no reload. Maskable interrupts are off at boot.
        // SAFETY: one aligned 8-byte store (never torn); an NMI or machine
        // check taken meanwhile runs on the old or new stack, both mapped.
        unsafe { (*tss).interrupt_stack_table[slot] = VirtAddr::new(top) };
        IST_TOPS[0][slot].store(top, Ordering::Relaxed);
    }
    Ok(())
}

/// Gives another core its own GDT and TSS, with interrupt stacks (guard
/// pages below them) from the stacks' region, and loads them and the IDT.
/// Runs on that core, once, with the heap up.
pub fn init_other_core(core: usize) -> Result<(), paging::PagingError> {
    let mut tss = TaskStateSegment::new();
    for slot in IST_SLOTS {
        let top = paging::map_stack(IST_STACK_SIZE as u64)?;
        tss.interrupt_stack_table[slot] = VirtAddr::new(top);
        if let Some(tops) = IST_TOPS.get(core) {
            tops[slot].store(top, Ordering::Relaxed);
        }
    }
    let tss: &'static TaskStateSegment = Box::leak(Box::new(tss));
    // SAFETY: the TSS is leaked: it lives for good, and only this core
    // loads it.
    load(Box::leak(Box::new(unsafe { make_gdt(tss) })));
    Ok(())
}

/// Core `core`'s interrupt stacks as `[bottom, top)`, double fault, NMI,
/// machine check, page fault, interrupts in that order; `None` until they
/// are in the stacks' region (for core 0: until `guard_core0_stacks`).
/// Each has an unmapped guard page below `bottom`.
pub fn interrupt_stacks(core: usize) -> Option<[(u64, u64); IST_SLOTS.len()]> {
    let tops = IST_TOPS.get(core)?;
    let mut stacks = [(0, 0); IST_SLOTS.len()];
    for (stack, top) in stacks.iter_mut().zip(tops) {
        let top = top.load(Ordering::Relaxed);
        if top == 0 {
            return None;
        }
        *stack = (top - IST_STACK_SIZE as u64, top);
    }
    Some(stacks)
}

/// Every interrupt and exception, called by the stubs with interrupts off.
extern "C" fn interrupt(frame: *mut Frame) {
    // SAFETY: the stub passes its own stack frame, laid out as `Frame`,
    // valid until this function returns.
    let frame = unsafe { &mut *frame };
    match frame.vector {
        14 => page_fault(frame),
        0..=31 => exception(frame, None),
        apic::TIMER_VECTOR => {
            apic::eoi();
            apic::tick();
        }
        apic::WAKE_VECTOR => apic::eoi(),
        apic::DEVICE_VECTOR => apic::device_interrupt(),
        apic::SPURIOUS_VECTOR => {}
        _ => exception(frame, None),
    }
}

/// A page fault: resolved if it is a first touch of this core's EbbRef
/// table or of a demand-zero region, else reported with what the address
/// is.
fn page_fault(frame: &Frame) {
    let address = Cr2::read_raw();
    let write = frame.error & 2 != 0;
    match paging::map_table_page(address) {
        paging::TablePage::Mapped => return,
        paging::TablePage::NoMemory => exception(
            frame,
            Some("in the EbbRef table, with no memory left for its page"),
        ),
        paging::TablePage::NotTable => {}
    }
    let outcome = PAGE_FAULT_HANDLER
        .get()
        .map_or(PageFaultOutcome::NotMine, |handler| handler(address, write));
    let note = match outcome {
        PageFaultOutcome::Resolved => return,
        PageFaultOutcome::Fatal(note) => note,
        PageFaultOutcome::NotMine if paging::is_stack_guard(address) => {
            "in the guard page below a stack: stack overflow"
        }
        PageFaultOutcome::NotMine => "not mapped",
    };
    exception(frame, Some(note))
}

/// What the upper layer's page-fault handler made of a fault.
pub enum PageFaultOutcome {
    /// Resolved (a page is mapped now): retry the access.
    Resolved,
    /// In its area but fatal; the note says what the address is.
    Fatal(&'static str),
    /// Not in any area it manages.
    NotMine,
}

/// The handler for page faults outside the EbbRef table (`mm`: virtual
/// regions and the large allocations' window), registered once at boot.
static PAGE_FAULT_HANDLER: Once<fn(u64, bool) -> PageFaultOutcome> = Once::new();

/// Registers the handler that page faults outside the EbbRef table go to
/// (address, whether a write), before any such fault can happen (boot).
pub fn set_page_fault_handler(handler: fn(u64, bool) -> PageFaultOutcome) {
    PAGE_FAULT_HANDLER.call_once(|| handler);
}

/// Names of the exception vectors.
fn exception_name(vector: u64) -> &'static str {
    match vector {
        0 => "divide error (#DE)",
        1 => "debug (#DB)",
        2 => "non-maskable interrupt",
        3 => "breakpoint (#BP)",
        4 => "overflow (#OF)",
        5 => "bound range exceeded (#BR)",
        6 => "invalid opcode (#UD)",
        7 => "device not available (#NM)",
        8 => "double fault (#DF)",
        10 => "invalid TSS (#TS)",
        11 => "segment not present (#NP)",
        12 => "stack-segment fault (#SS)",
        13 => "general protection fault (#GP)",
        14 => "page fault (#PF)",
        16 => "x87 floating-point exception (#MF)",
        17 => "alignment check (#AC)",
        18 => "machine check (#MC)",
        19 => "SIMD floating-point exception (#XM)",
        20 => "virtualization exception (#VE)",
        21 => "control protection exception (#CP)",
        _ => "unexpected vector",
    }
}

/// Set by the first report: a fault while reporting exits at once.
static REPORTING: AtomicBool = AtomicBool::new(false);

fn exception(frame: &Frame, note: Option<&str>) -> ! {
    if REPORTING.swap(true, Ordering::Relaxed) {
        console::emergency(format_args!(
            "\nebbflow: exception {} at {:#x} while reporting a fault\n",
            frame.vector, frame.rip
        ));
        exit(i32::from(EXIT_CPU_EXCEPTION));
    }
    let out = console::emergency;
    out(format_args!(
        "\nebbflow: CPU EXCEPTION {} {}, error code {:#x}\n",
        frame.vector,
        exception_name(frame.vector),
        frame.error
    ));
    if frame.vector == 14 {
        let cause = frame.error;
        out(format_args!(
            "  page fault at address CR2={:#018x}: {} {} ({})\n",
            Cr2::read_raw(),
            if cause & 0x10 != 0 {
                "instruction fetch"
            } else if cause & 2 != 0 {
                "write"
            } else {
                "read"
            },
            if cause & 1 != 0 {
                "violating protection"
            } else {
                "of a non-present page"
            },
            if cause & 4 != 0 { "user" } else { "kernel" },
        ));
        if let Some(note) = note {
            out(format_args!("  the address is {note}\n"));
        }
    }
    out(format_args!(
        "  RIP={:#018x} CS={:#x} RFLAGS={:#x} RSP={:#018x} SS={:#x} CR3={:#x}\n",
        frame.rip,
        frame.cs,
        frame.rflags,
        frame.rsp,
        frame.ss,
        Cr3::read_raw().0.start_address().as_u64()
    ));
    out(format_args!(
        "  RAX={:#018x} RBX={:#018x} RCX={:#018x} RDX={:#018x}\n",
        frame.rax, frame.rbx, frame.rcx, frame.rdx
    ));
    out(format_args!(
        "  RSI={:#018x} RDI={:#018x} RBP={:#018x} R8 ={:#018x}\n",
        frame.rsi, frame.rdi, frame.rbp, frame.r8
    ));
    out(format_args!(
        "  R9 ={:#018x} R10={:#018x} R11={:#018x} R12={:#018x}\n",
        frame.r9, frame.r10, frame.r11, frame.r12
    ));
    out(format_args!(
        "  R13={:#018x} R14={:#018x} R15={:#018x}\n",
        frame.r13, frame.r14, frame.r15
    ));
    backtrace(Some(frame.rip), frame.rbp);
    exit(i32::from(EXIT_CPU_EXCEPTION))
}

/// The frame pointer of the caller.
#[inline(always)]
pub fn current_rbp() -> u64 {
    let rbp: u64;
    // SAFETY: reads a register.
    unsafe { asm!("mov {}, rbp", out(reg) rbp, options(nomem, nostack, preserves_flags)) };
    rbp
}

/// Prints `rip` and the return addresses along the `rbp` chain, in the
/// form `./ebb run --native` symbolizes (`  #N 0xADDRESS`).
pub fn backtrace(rip: Option<u64>, mut rbp: u64) {
    console::emergency(format_args!(
        "  backtrace (symbolize with addr2line -e IMAGE):\n"
    ));
    let first = match rip {
        Some(rip) => {
            console::emergency(format_args!("    #0 {rip:#018x}\n"));
            1
        }
        None => 0,
    };
    for depth in first..48 {
        if rbp == 0 || !rbp.is_multiple_of(8) || !paging::is_mapped_ram(rbp, 16) {
            break;
        }
        let at = rbp as *const u64;
        // SAFETY: `rbp` is 8-aligned and both words lie in mapped RAM (just
        // checked); a stale chain yields wrong addresses, not a fault.
        let next = unsafe { at.read() };
        // SAFETY: `rbp + 8` is the second of the two words checked mapped
        // above, 8-aligned; a stale chain yields a wrong address, not a fault.
        let ret = unsafe { at.wrapping_add(1).read() };
        if ret == 0 {
            break;
        }
        // A return address points after the call: show the call itself.
        console::emergency(format_args!("    #{depth} {:#018x}\n", ret - 1));
        if next <= rbp {
            break;
        }
        rbp = next;
    }
}
