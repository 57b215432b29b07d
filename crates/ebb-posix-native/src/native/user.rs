//! The program's memory, as the system calls read and write it.
//!
//! A library OS has one address space and no protection between the C
//! program and the rest of the image: the program is trusted with it
//! like the rest of the image. So a pointer is checked only for what the
//! kernel would refuse without looking at page tables: null (`EFAULT`),
//! and a range that wraps around the address space or is longer than a
//! Rust slice may be (`EFAULT`). A pointer into unmapped memory faults the
//! image with the platform's report (as it would kill the process on
//! Linux); a pointer into the image's own memory is written as asked,
//! which on Linux would have been `EFAULT` or another process's memory.

/// The most bytes one read or write moves (Linux's `MAX_RW_COUNT`).
pub use ebb_posix_objects::calls::MAX_RW_COUNT;

use ebb_posix_objects::calls::check_range as checked;

/// Writes `value` at `addr`.
pub fn put<T: Copy>(addr: usize, value: T) -> Result<(), isize> {
    checked(addr, core::mem::size_of::<T>())?;
    // SAFETY: the program passed `addr` for this call to store a `T` (the
    // module's trust model); `checked` refused null and wrapping ranges;
    // `write_unaligned` needs no alignment.
    unsafe { (addr as *mut T).write_unaligned(value) };
    Ok(())
}

/// Reads a `T` from `addr`.
pub fn get<T: Copy>(addr: usize) -> Result<T, isize> {
    checked(addr, core::mem::size_of::<T>())?;
    // SAFETY: the program passed `addr` for this call to read a `T` (the
    // module's trust model); `checked` refused null and wrapping ranges;
    // `T` is plain data (integers and structs of them: any bits valid).
    Ok(unsafe { (addr as *const T).read_unaligned() })
}

/// The `len` bytes at `addr`.
pub fn bytes<'a>(addr: usize, len: usize) -> Result<&'a [u8], isize> {
    if len == 0 {
        return Ok(&[]);
    }
    checked(addr, len)?;
    // SAFETY: the program passed these bytes to be read by this call (the
    // module's trust model) and its only thread is in the call; `checked`
    // refused null, wrapping and over-isize::MAX ranges.
    Ok(unsafe { core::slice::from_raw_parts(addr as *const u8, len) })
}

/// The `len` bytes at `addr`, to be written.
pub fn bytes_mut<'a>(addr: usize, len: usize) -> Result<&'a mut [u8], isize> {
    if len == 0 {
        return Ok(&mut []);
    }
    checked(addr, len)?;
    // SAFETY: the program passed these bytes to be filled by this call
    // (the module's trust model) and its only thread is in the call;
    // `checked` refused null, wrapping and over-isize::MAX ranges.
    Ok(unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, len) })
}

/// `struct timespec` (and `struct timeval`: seconds and micro- instead
/// of nanoseconds), x86_64.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Timespec {
    /// Seconds.
    pub sec: i64,
    /// Nanoseconds (microseconds in a timeval).
    pub fraction: i64,
}
