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

/// A new placeholder at the lowest free number, close-on-exec as asked:
/// `/dev/null` opened with `O_PATH`. Such a descriptor can be
/// duplicated, closed and marked close-on-exec, and little else: a call
/// that reached Linux with an object's number by mistake (fchmod, read,
/// write, ioctl) fails with `EBADF` instead of acting on `/dev/null`.
pub fn placeholder(cloexec: bool) -> Result<usize, isize> {
    const O_PATH: usize = 0o10_000_000;
    const O_CLOEXEC: usize = 0o2_000_000;
    let flags = O_PATH | if cloexec { O_CLOEXEC } else { 0 };
    let path = b"/dev/null\0";
    let fd = call(nr::OPEN, [path.as_ptr() as usize, flags, 0, 0, 0, 0]);
    usize::try_from(fd).map_err(|_| -fd)
}

/// The calling thread's id (gettid(2)).
#[must_use]
pub fn gettid() -> usize {
    usize::try_from(call(nr::GETTID, [0; 6])).unwrap_or(0)
}

/// Takes every free number below `below` with a placeholder, so that
/// descriptors opened until [`release_reserved`] land above it; the
/// numbers taken. When a placeholder cannot be had before `below` (a low
/// `RLIMIT_NOFILE`), nothing stays taken: the library's descriptors then
/// come first, which only moves the program's numbers.
#[must_use]
pub fn reserve_below(below: usize) -> Vec<usize> {
    let mut taken = Vec::new();
    loop {
        match placeholder(true) {
            Ok(fd) if fd < below => taken.push(fd),
            Ok(fd) => {
                close(fd);
                return taken;
            }
            Err(_) => {
                release_reserved(&taken);
                return Vec::new();
            }
        }
    }
}

/// Closes what [`reserve_below`] took.
pub fn release_reserved(taken: &[usize]) {
    for &fd in taken {
        close(fd);
    }
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
        let first = placeholder(true).unwrap();
        let second = placeholder(false).unwrap();
        assert_ne!(first, second);
        assert_eq!(fcntl(first, F_GETFD, 0), 1, "close-on-exec as asked");
        assert_eq!(fcntl(second, F_GETFD, 0), 0);
        assert_eq!(close(first), 0);
        assert_eq!(placeholder(true).unwrap(), first, "the freed number again");
        assert_eq!(close(first), 0);
        assert_eq!(close(second), 0);
        assert_eq!(close(second), -9, "EBADF: it is gone");
    }

    #[test]
    fn a_placeholder_does_nothing_but_hold_its_number() {
        let _turn = numbers_to_myself();
        let fd = placeholder(true).unwrap();
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

    #[test]
    fn a_reservation_holds_every_low_number_and_gives_them_back() {
        let _turn = numbers_to_myself();
        let taken = reserve_below(40);
        assert!(!taken.is_empty() && taken.iter().all(|&fd| fd < 40));
        let next = placeholder(true).unwrap();
        assert!(next >= 40, "the next descriptor lands above: {next}");
        release_reserved(&taken);
        close(next);
        let again = placeholder(true).unwrap();
        assert!(again < 40, "the numbers are free again: {again}");
        close(again);
    }
}
