//! The serial console: COM1 (a 16550 UART at port 0x3f8), which QEMU
//! connects to its standard output with `-serial stdio`.
//!
//! [`print!`](crate::print) and [`println!`](crate::println) go through a
//! spin lock. Reports from exception and panic handlers use
//! [`emergency`], which needs no lock and no initialization, so that a fault
//! in the middle of a `println!` can still be reported.

use core::fmt::{self, Write};

use spin::Mutex;
use uart_16550::backend::PioBackend;
use uart_16550::{Config, Uart16550, Uart16550Tty};
use x86_64::instructions::port::Port;

/// COM1's base port.
const COM1: u16 = 0x3f8;

static CONSOLE: Mutex<Option<Uart16550Tty<PioBackend>>> = Mutex::new(None);

/// Sets COM1 up (115200 baud, 8N1, FIFO). Without a UART (`init`'s
/// presence check fails) the console drops output. The driver's loopback
/// self-test (`Uart16550Tty::new_port`) is left out: it is for real
/// hardware's wiring, and its ~100 port accesses each cost a trip into
/// QEMU's device model at boot.
pub fn init() {
    // SAFETY: COM1 is the platform's console; nothing else drives its
    // ports, and this runs once, before anything prints.
    let uart = unsafe { Uart16550::new_port(COM1) }
        .ok()
        .and_then(|mut uart| {
            uart.init(Config::default()).ok()?;
            Some(Uart16550Tty::from_inner(uart))
        });
    *CONSOLE.lock() = uart;
}

/// Writes `args` to the console (used by `print!`).
pub fn print(args: fmt::Arguments<'_>) {
    x86_64::instructions::interrupts::without_interrupts(|| {
        if let Some(uart) = CONSOLE.lock().as_mut() {
            let _ = uart.write_fmt(args);
        }
    });
}

/// Writes `bytes` as they are (a C program's output, which need not be
/// UTF-8, split anywhere), with `\n` sent as `\r\n` as [`print`] does.
pub fn write_bytes(bytes: &[u8]) {
    x86_64::instructions::interrupts::without_interrupts(|| {
        if let Some(uart) = CONSOLE.lock().as_mut() {
            let uart = uart.inner_mut();
            for line in bytes.split_inclusive(|&byte| byte == b'\n') {
                match line.strip_suffix(b"\n") {
                    Some(text) => {
                        uart.send_bytes_exact(text);
                        uart.send_bytes_exact(b"\r\n");
                    }
                    None => uart.send_bytes_exact(line),
                }
            }
        }
    });
}

/// A writer straight to COM1's registers, with `\n` turned into `\r\n`.
struct Raw;

impl Raw {
    fn byte(byte: u8) {
        let mut status: Port<u8> = Port::new(COM1 + 5);
        let mut data: Port<u8> = Port::new(COM1);
        for _ in 0..100_000 {
            // SAFETY: reading COM1's line-status register has no side effect.
            if unsafe { status.read() } & 0x20 != 0 {
                break;
            }
        }
        // SAFETY: writing COM1's transmit register only sends the byte.
        unsafe { data.write(byte) };
    }
}

impl Write for Raw {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for byte in text.bytes() {
            if byte == b'\n' {
                Raw::byte(b'\r');
            }
            Raw::byte(byte);
        }
        Ok(())
    }
}

/// Writes `args` to COM1 without the console's lock (exception and panic
/// reports: the lock may be held by the code that faulted).
pub fn emergency(args: fmt::Arguments<'_>) {
    let _ = Raw.write_fmt(args);
}

/// Prints to the serial console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::arch::x86_64::console::print(format_args!($($arg)*)) };
}

/// Prints a line to the serial console.
#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => { $crate::arch::x86_64::console::print(format_args!("{}\n", format_args!($($arg)*))) };
}
