//! The program's memory, as the system calls read and write it: the
//! pointers a C program passes, checked for null (`EFAULT`, as Linux
//! answers) and otherwise used as they are. A library OS has one address
//! space, and the program is trusted with it like the rest of the image:
//! a bad pointer faults the image with the platform's report, as it would
//! kill the process on Linux.

use ebb_posix::errno::EFAULT;

/// Writes `value` at `addr`.
pub fn put<T: Copy>(addr: usize, value: T) -> Result<(), isize> {
    if addr == 0 {
        return Err(EFAULT);
    }
    // SAFETY: the program passed `addr` for the system call to store a
    // `T` there, as the kernel would; unaligned is allowed, as for
    // copy_to_user.
    unsafe { (addr as *mut T).write_unaligned(value) };
    Ok(())
}

/// Reads a `T` from `addr`.
pub fn get<T: Copy>(addr: usize) -> Result<T, isize> {
    if addr == 0 {
        return Err(EFAULT);
    }
    // SAFETY: the program passed `addr` for the system call to read a
    // `T` from, as the kernel would; `T` is plain data (`Copy`, and the
    // callers' types are integers and structs of them).
    Ok(unsafe { (addr as *const T).read_unaligned() })
}

/// The `len` bytes at `addr`.
pub fn bytes<'a>(addr: usize, len: usize) -> Result<&'a [u8], isize> {
    if len == 0 {
        return Ok(&[]);
    }
    if addr == 0 {
        return Err(EFAULT);
    }
    // SAFETY: the program passed `len` bytes at `addr` to be read during
    // this call, and does not write them meanwhile (it is in the call).
    Ok(unsafe { core::slice::from_raw_parts(addr as *const u8, len) })
}

/// The `len` bytes at `addr`, to be written.
pub fn bytes_mut<'a>(addr: usize, len: usize) -> Result<&'a mut [u8], isize> {
    if len == 0 {
        return Ok(&mut []);
    }
    if addr == 0 {
        return Err(EFAULT);
    }
    // SAFETY: the program passed `len` bytes at `addr` to be filled by
    // this call and does not touch them meanwhile (it is in the call).
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

/// `struct iovec`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct IoVec {
    /// The buffer.
    pub base: usize,
    /// Its length.
    pub len: usize,
}
