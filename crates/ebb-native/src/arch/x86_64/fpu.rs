//! The x87 FPU and SSE for code compiled for the x86_64 psABI: C programs
//! linked into the image (issue 18's POSIX personality) use SSE registers
//! for floating point, structure copies and vectorised loops, and musl's
//! `printf` uses x87 `long double`. Ebbflow's own Rust code is built for
//! `x86_64-unknown-none`, which uses neither (soft float), so interrupt
//! handlers never touch these registers and leave a program's values in
//! them intact.
//!
//! Intel SDM Vol. 3A §13.1.3 ("Initialization of the SSE Extensions"):
//! CR4.OSFXSR (bit 9) and CR4.OSXMMEXCPT (bit 10) set, CR0.EM (bit 2)
//! clear, CR0.MP (bit 1) set; and §9.2 ("FPU Initialization"): `fninit`
//! puts the x87 control word at its default (0x37F, all exceptions
//! masked), which the reset value (0x40) is not.

use core::arch::asm;

use x86_64::registers::control::{Cr0, Cr0Flags, Cr4, Cr4Flags};

/// Turns the FPU and SSE on for this core.
pub fn enable() {
    let mut cr0 = Cr0::read();
    cr0.remove(Cr0Flags::EMULATE_COPROCESSOR | Cr0Flags::TASK_SWITCHED);
    cr0.insert(Cr0Flags::MONITOR_COPROCESSOR);
    // SAFETY: clearing EM and TS and setting MP only lets x87/SSE
    // instructions run instead of faulting (#NM/#UD); no memory or
    // translation changes.
    unsafe { Cr0::write(cr0) };
    let mut cr4 = Cr4::read();
    cr4.insert(Cr4Flags::OSFXSR | Cr4Flags::OSXMMEXCPT_ENABLE);
    // SAFETY: these two bits only allow SSE instructions and route SIMD
    // floating-point exceptions to #XM (masked by MXCSR's default); paging
    // bits are untouched.
    unsafe { Cr4::write(cr4) };
    // SAFETY: `fninit` resets only the x87 state of this core, which no
    // code has used yet (the platform's code never does).
    unsafe { asm!("fninit", options(nomem, nostack)) };
}
