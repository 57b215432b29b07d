//! The standard streams natively (issue 18: "standard streams: to the
//! console"): output and error go to the serial console, input is at
//! its end. Which descriptors are streams is the descriptor table's
//! business (`files.rs`); none is a terminal (`ENOTTY` from ioctl), so
//! musl buffers standard output fully, as into a pipe on Linux.

use ebb_posix::errno::EBADF;

/// Writes `bytes` to stream `stream` (1 or 2); the count written.
pub fn write(stream: u8, bytes: &[u8]) -> Result<usize, isize> {
    if stream == 0 {
        return Err(EBADF);
    }
    for chunk in bytes.utf8_chunks() {
        ebb_native::arch::x86_64::console::print(format_args!("{}", chunk.valid()));
        if !chunk.invalid().is_empty() {
            ebb_native::arch::x86_64::console::print(format_args!("\u{fffd}"));
        }
    }
    Ok(bytes.len())
}

/// Reads from stream `stream`: standard input is empty.
pub fn read(stream: u8) -> Result<usize, isize> {
    if stream == 0 {
        Ok(0)
    } else {
        Err(EBADF)
    }
}
