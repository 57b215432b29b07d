//! Leaving QEMU with an exit code through its `isa-debug-exit` device (the
//! encoding: `ebb_boot_abi::exit`). Here, at the bottom, so that an
//! exception report or a failed boot can end the machine without calling
//! up into the runtime.

use core::arch::asm;

use ebb_boot_abi::{debug_exit_value, DEBUG_EXIT_PORT};
use x86_64::instructions::port::Port;

use crate::arch::x86_64::console;

/// Leaves QEMU with exit code `code` (see `ebb_boot_abi::exit` for the encoding).
/// Without an `isa-debug-exit` device, says so and halts forever.
pub fn exit(code: i32) -> ! {
    let mut port: Port<u32> = Port::new(DEBUG_EXIT_PORT);
    // SAFETY: writing the isa-debug-exit port ends QEMU; if no device is
    // there, the write is ignored.
    unsafe { port.write(u32::from(debug_exit_value(code))) };
    console::emergency(format_args!(
        "ebbflow: exit code {code}, but there is no isa-debug-exit device at {DEBUG_EXIT_PORT:#x}: halting\n"
    ));
    loop {
        // SAFETY: halting with interrupts off stops this core for good.
        unsafe { asm!("cli", "hlt", options(nomem, nostack)) };
    }
}
