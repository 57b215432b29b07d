//! How a native image's exit code leaves QEMU.
//!
//! QEMU's `isa-debug-exit` device (`-device
//! isa-debug-exit,iobase=0xf4,iosize=0x04`) ends QEMU with status
//! `(value << 1) | 1` when the guest writes `value` to its port. Status 1 is
//! also what QEMU returns for its own errors (bad option, missing image), so
//! the guest writes `code + 1`: an application exit code `c` in
//! `0..=`[`MAX_EXIT_CODE`] leaves QEMU as status `2c + 3`, and every other
//! status means something else ([`decode_qemu_status`]). Codes outside that
//! range are reported as 1, the generic failure.
//!
//! The platform itself uses [`EXIT_PANIC`] (like Rust's own panic exit code
//! on hosted), [`EXIT_CPU_EXCEPTION`] (an unexpected CPU exception, after a
//! report on the serial console) and [`EXIT_BOOT_FAILURE`].

/// The I/O port of QEMU's `isa-debug-exit` device as the launcher sets it up.
pub const DEBUG_EXIT_PORT: u16 = 0xf4;

/// The largest application exit code that leaves QEMU unchanged.
pub const MAX_EXIT_CODE: u8 = 126;

/// Exit code of a native image that panicked.
pub const EXIT_PANIC: u8 = 101;

/// Exit code of a native image stopped by an unexpected CPU exception.
pub const EXIT_CPU_EXCEPTION: u8 = 102;

/// Exit code of a native image that could not boot (bad start information,
/// no memory).
pub const EXIT_BOOT_FAILURE: u8 = 103;

/// The value the guest writes to [`DEBUG_EXIT_PORT`] to exit with `code`.
pub fn debug_exit_value(code: i32) -> u8 {
    let code = u8::try_from(code)
        .ok()
        .filter(|&c| c <= MAX_EXIT_CODE)
        .unwrap_or(1);
    code + 1
}

/// What a QEMU exit status means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QemuExit {
    /// The guest exited through `isa-debug-exit` with this code.
    Guest(u8),
    /// QEMU itself failed (status 1): bad options, missing image, ...
    QemuFailed,
    /// The guest stopped without an exit code (status 0: a reset with
    /// `-no-reboot`, e.g. a triple fault, or a power-off).
    NoExitCode,
    /// `timeout` ended QEMU (status 124).
    TimedOut,
    /// Any other status (QEMU killed by a signal, ...).
    Other(i32),
}

/// Decodes the exit status of `timeout SECS qemu-system-x86_64 ...`.
pub fn decode_qemu_status(status: i32) -> QemuExit {
    match status {
        0 => QemuExit::NoExitCode,
        1 => QemuExit::QemuFailed,
        124 => QemuExit::TimedOut,
        3..=255 if status % 2 == 1 => QemuExit::Guest(u8::try_from((status - 3) / 2).unwrap_or(1)),
        _ => QemuExit::Other(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_round_trip_through_qemu() {
        for code in 0..=i32::from(MAX_EXIT_CODE) {
            let status = (i32::from(debug_exit_value(code)) << 1) | 1;
            assert_eq!(
                decode_qemu_status(status),
                QemuExit::Guest(u8::try_from(code).unwrap())
            );
        }
        assert_eq!(debug_exit_value(-1), 2);
        assert_eq!(debug_exit_value(127), 2);
        assert_eq!(decode_qemu_status(0), QemuExit::NoExitCode);
        assert_eq!(decode_qemu_status(1), QemuExit::QemuFailed);
        assert_eq!(decode_qemu_status(124), QemuExit::TimedOut);
        assert_eq!(decode_qemu_status(137), QemuExit::Guest(67));
        assert_eq!(decode_qemu_status(2), QemuExit::Other(2));
    }
}
