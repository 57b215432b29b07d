//! The standard streams natively (issue 18: "standard streams: to the
//! console"): writes to descriptors 1 and 2 go to the serial console,
//! reads of 0 are at end of file, and none is a terminal (`ENOTTY`), so
//! musl buffers standard output fully, as it does for a pipe on Linux.
//! Other descriptors are the file system's (next slice): `EBADF` until
//! then.

use ebb_posix::errno::{EBADF, EINVAL, ENOTTY, ESPIPE};

use super::user::{self, IoVec};

/// Whether `fd` is one of the standard streams.
fn is_stream(fd: usize) -> bool {
    fd <= 2
}

fn print(bytes: &[u8]) {
    for chunk in bytes.utf8_chunks() {
        ebb_native::arch::x86_64::console::print(format_args!("{}", chunk.valid()));
        if !chunk.invalid().is_empty() {
            ebb_native::arch::x86_64::console::print(format_args!("\u{fffd}"));
        }
    }
}

/// write(2).
pub fn write(fd: usize, addr: usize, len: usize) -> isize {
    if fd != 1 && fd != 2 {
        return -EBADF;
    }
    match user::bytes(addr, len) {
        Ok(bytes) => {
            print(bytes);
            isize::try_from(len).unwrap_or(isize::MAX)
        }
        Err(errno) => -errno,
    }
}

/// writev(2).
pub fn writev(fd: usize, iov: usize, count: usize) -> isize {
    if fd != 1 && fd != 2 {
        return -EBADF;
    }
    // Linux's UIO_MAXIOV.
    if count > 1024 {
        return -EINVAL;
    }
    let mut total = 0usize;
    for index in 0..count {
        let entry = match user::get::<IoVec>(iov + index * core::mem::size_of::<IoVec>()) {
            Ok(entry) => entry,
            Err(errno) => return -errno,
        };
        match user::bytes(entry.base, entry.len) {
            Ok(bytes) => print(bytes),
            Err(errno) => return -errno,
        }
        total = total.saturating_add(entry.len);
    }
    isize::try_from(total).unwrap_or(isize::MAX)
}

/// read(2): standard input is empty.
pub fn read(fd: usize) -> isize {
    if fd == 0 {
        0
    } else {
        -EBADF
    }
}

/// ioctl(2): no stream is a terminal.
pub fn ioctl(fd: usize) -> isize {
    if is_stream(fd) {
        -ENOTTY
    } else {
        -EBADF
    }
}

/// lseek(2): the streams do not seek.
pub fn lseek(fd: usize) -> isize {
    if is_stream(fd) {
        -ESPIPE
    } else {
        -EBADF
    }
}

/// close(2) of a stream: closed (nothing to release).
pub fn close(fd: usize) -> Option<isize> {
    is_stream(fd).then_some(0)
}
