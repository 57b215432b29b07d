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
    ebb_native::arch::x86_64::console::write_bytes(bytes);
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
