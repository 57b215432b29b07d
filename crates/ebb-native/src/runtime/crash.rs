//! Faults on purpose (`crash=KIND` on the command line), to test the
//! exception and panic reports end to end (`crates/ebb-cli/tests/native.rs`
//! checks the reports and the symbolized frames of these functions).

use core::arch::asm;

use ebb_boot_abi::Crash;

use crate::arch::x86_64::cpu;
use crate::arch::x86_64::debug_exit::exit;
use crate::mm::regions::DemandZeroRegion;

/// Faults on purpose (`crash=KIND`), from an event, to test the reports.
#[inline(never)]
pub fn crash_now(crash: Crash) {
    log::info!("crashing on purpose ({crash:?})");
    match crash {
        Crash::NullLoad => {
            // SAFETY: not sound, on purpose: page 0 is never mapped, so this
            // load faults before it returns anything.
            let value = unsafe { core::ptr::read_volatile(core::ptr::null::<u64>()) };
            log::error!("read {value} from address 0?");
        }
        // SAFETY: `ud2` raises #UD, reported and fatal; nothing returns.
        Crash::InvalidOpcode => unsafe { asm!("ud2", options(nomem, nostack)) },
        // SAFETY: `int3` raises #BP, reported and fatal.
        Crash::Breakpoint => unsafe { asm!("int3", options(nomem, nostack)) },
        Crash::Panic => panic!("crash=panic asked for a panic"),
        Crash::GuardPage => {
            let mut region = DemandZeroRegion::new(4096).expect("a region");
            let end = region.as_mut_slice().as_mut_ptr_range().end;
            // SAFETY: not sound, on purpose: `end` is the region's guard
            // page, never mapped, so this store faults.
            unsafe { end.write_volatile(1) };
        }
        Crash::StackOverflow => {
            let depth = recurse(0);
            log::error!("recursed {depth} deep without overflowing?");
        }
        Crash::IstOverflow => {
            let Some(stacks) = cpu::interrupt_stacks(0) else {
                log::error!("core 0 has no guarded interrupt stacks");
                return;
            };
            // The NMI's stack: no NMI comes under QEMU unless asked for.
            let (bottom, _) = stacks[1];
            // SAFETY: not sound, on purpose: this core's code now runs on
            // an interrupt stack (as a handler would) and overflows it; the
            // page fault that follows runs on its own stack and is fatal.
            unsafe {
                asm!(
                    "mov rsp, {sp}",
                    "call {next}",
                    sp = in(reg) bottom + 1024,
                    next = sym overflow_interrupt_stack,
                    options(noreturn)
                )
            }
        }
    }
}

/// Recurses on an interrupt stack until its guard page
/// (`crash=ist-overflow`).
extern "C" fn overflow_interrupt_stack() -> ! {
    let depth = recurse(0);
    log::error!("recursed {depth} deep on an interrupt stack without overflowing?");
    exit(1)
}

/// Recurses until the stack overflows (`crash=stack-overflow`): on purpose.
#[allow(unconditional_recursion)]
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut frame = [depth; 64];
    core::hint::black_box(&mut frame);
    recurse(depth + 1) + frame[7]
}
