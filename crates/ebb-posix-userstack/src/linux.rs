//! The few Linux calls this personality makes for itself, on descriptor
//! numbers: placeholders that hold an object's number in Linux's table,
//! and a zero-timeout poll of a Linux descriptor.

use ebb_posix::sysno::nr;
use ebb_posix_hosted::raw::syscall6;

/// fcntl(2): a duplicate at the lowest free number from the argument
/// (`include/uapi/asm-generic/fcntl.h`).
pub const F_DUPFD: usize = 0;
/// fcntl(2): the descriptor flags.
pub const F_GETFD: usize = 1;
/// fcntl(2): set the descriptor flags.
pub const F_SETFD: usize = 2;
/// fcntl(2): the status flags.
pub const F_GETFL: usize = 3;
/// fcntl(2): set the status flags.
pub const F_SETFL: usize = 4;
/// fcntl(2): `F_DUPFD` with close-on-exec set.
pub const F_DUPFD_CLOEXEC: usize = 1030;
/// The close-on-exec descriptor flag.
pub const FD_CLOEXEC: usize = 1;

/// A call with no pointer arguments (or only pointers to this
/// function's own locals), made on Linux.
fn call(number: usize, args: [usize; 6]) -> isize {
    // SAFETY: every caller in this module passes only descriptor numbers,
    // flags, and pointers to live memory it owns (its locals, a static
    // string); none of these calls unmaps memory or ends a thread.
    unsafe { syscall6(number, args) }
}

/// The anchor every placeholder duplicates: `/dev/null` opened with
/// `O_PATH`, on first use, kept open for the process's life. A
/// placeholder so opened can be duplicated, closed and marked
/// close-on-exec, and little else: a call that reached Linux with an
/// object's number by mistake (fchmod, read, write, ioctl) fails with
/// `EBADF` instead of acting on `/dev/null`.
fn anchor() -> Result<usize, isize> {
    use core::sync::atomic::{AtomicIsize, Ordering};
    static ANCHOR: AtomicIsize = AtomicIsize::new(-1);
    let known = ANCHOR.load(Ordering::Acquire);
    if known >= 0 {
        return Ok(known.unsigned_abs());
    }
    const O_RDONLY_CLOEXEC: usize = 0o2_000_000;
    let path = b"/dev/null\0";
    let fd = call(
        nr::OPEN,
        [path.as_ptr() as usize, O_RDONLY_CLOEXEC, 0, 0, 0, 0],
    );
    if fd < 0 {
        return Err(-fd);
    }
    match ANCHOR.compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => Ok(fd.unsigned_abs()),
        Err(other) => {
            // Another thread opened one first: keep its.
            close(fd.unsigned_abs());
            Ok(other.unsigned_abs())
        }
    }
}

/// A new placeholder at the lowest free number (at least `from`):
/// `O_CLOEXEC` as asked, as the object's descriptor would have.
pub fn placeholder(from: usize, cloexec: bool) -> Result<usize, isize> {
    let command = if cloexec { F_DUPFD_CLOEXEC } else { F_DUPFD };
    let fd = call(nr::FCNTL, [anchor()?, command, from, 0, 0, 0]);
    usize::try_from(fd).map_err(|_| -fd)
}

/// fcntl(2) of a descriptor: Linux's answer.
pub fn fcntl(fd: usize, command: usize, arg: usize) -> isize {
    call(nr::FCNTL, [fd, command, arg, 0, 0, 0])
}

/// dup3(2) (`flags` 0 is dup2's meaning for two different numbers).
pub fn dup3(old: usize, new: usize, flags: usize) -> isize {
    call(nr::DUP3, [old, new, flags, 0, 0, 0])
}

/// close(2); Linux's answer.
pub fn close(fd: usize) -> isize {
    call(nr::CLOSE, [fd, 0, 0, 0, 0, 0])
}

/// The poll(2) events of `wanted` that hold for Linux descriptor `fd`
/// now; `None` when it is not open.
pub fn readiness_now(fd: usize, wanted: u32) -> Option<u32> {
    const POLLNVAL: u32 = 0x20;
    let fd = i32::try_from(fd).ok()?;
    let events = i16::try_from(wanted & 0x7fff).unwrap_or(0);
    // struct pollfd: int fd, short events, short revents.
    let mut entry = [0u8; 8];
    entry[..4].copy_from_slice(&fd.to_ne_bytes());
    entry[4..6].copy_from_slice(&events.to_ne_bytes());
    let ready = call(nr::POLL, [entry.as_mut_ptr() as usize, 1, 0, 0, 0, 0]);
    if ready < 0 {
        return None;
    }
    let revents = u32::from(u16::from_ne_bytes([entry[6], entry[7]]));
    (revents & POLLNVAL == 0).then_some(revents)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::sync::{Mutex, MutexGuard};

    /// Tests that open and close descriptors and then look at numbers
    /// take turns: the test threads share one descriptor table.
    pub(crate) fn numbers_to_myself() -> MutexGuard<'static, ()> {
        static NUMBERS: Mutex<()> = Mutex::new(());
        NUMBERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[test]
    fn a_placeholder_takes_the_lowest_free_number_and_closes() {
        let _turn = numbers_to_myself();
        let first = placeholder(0, true).unwrap();
        let second = placeholder(0, false).unwrap();
        assert_ne!(first, second);
        assert_eq!(fcntl(first, F_GETFD, 0), 1, "close-on-exec as asked");
        assert_eq!(fcntl(second, F_GETFD, 0), 0);
        assert_eq!(close(first), 0);
        assert_eq!(
            placeholder(0, true).unwrap(),
            first,
            "the freed number again"
        );
        assert_eq!(close(first), 0);
        assert_eq!(close(second), 0);
        assert_eq!(close(second), -9, "EBADF: it is gone");
    }

    #[test]
    fn a_placeholder_does_nothing_but_hold_its_number() {
        let _turn = numbers_to_myself();
        let fd = placeholder(0, true).unwrap();
        let byte = [0u8; 1];
        // SAFETY: write(2) reads one byte of a live local.
        let wrote = unsafe { syscall6(nr::WRITE, [fd, byte.as_ptr() as usize, 1, 0, 0, 0]) };
        assert_eq!(wrote, -9, "EBADF, not a write to /dev/null");
        close(fd);
    }

    #[test]
    fn a_linux_descriptor_reports_its_readiness_and_a_closed_one_none() {
        let _turn = numbers_to_myself();
        let null = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .unwrap();
        let fd = usize::try_from(null.as_raw_fd()).unwrap();
        // /dev/null is always readable and writable.
        assert_eq!(readiness_now(fd, 0x1 | 0x4), Some(0x1 | 0x4));
        drop(null);
        assert_eq!(readiness_now(fd, 0x1), None);
    }
}
