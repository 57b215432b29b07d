//! eventfd(2): a 64-bit counter that `write` adds to and `read` takes.

use core::cell::Cell;

use ebb_posix::errno::{EAGAIN, EINVAL};

use crate::notify::{Notifier, Pollable};
use crate::readiness::{EPOLLIN, EPOLLOUT};

/// `EFD_SEMAPHORE`: each read takes 1.
pub const EFD_SEMAPHORE: u32 = 1;
/// The largest count (eventfd(2): 0xfffffffffffffffe).
const MAX: u64 = u64::MAX - 1;

/// One eventfd.
pub struct EventFd {
    count: Cell<u64>,
    semaphore: bool,
    notifier: Notifier,
}

impl EventFd {
    /// A counter starting at `initial`; `flags` may hold `EFD_SEMAPHORE`.
    #[must_use]
    pub fn new(initial: u32, flags: u32) -> EventFd {
        EventFd {
            count: Cell::new(u64::from(initial)),
            semaphore: flags & EFD_SEMAPHORE != 0,
            notifier: Notifier::default(),
        }
    }

    /// read(2): 8 bytes, the count (or 1 as a semaphore), which it takes;
    /// `EAGAIN` at 0, `EINVAL` for a buffer under 8 bytes.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, isize> {
        let out = buf.get_mut(..8).ok_or(EINVAL)?;
        let count = self.count.get();
        if count == 0 {
            return Err(EAGAIN);
        }
        let taken = if self.semaphore { 1 } else { count };
        self.count.set(count - taken);
        out.copy_from_slice(&taken.to_ne_bytes());
        self.notifier.notify();
        Ok(8)
    }

    /// write(2): adds the 8-byte value; `EAGAIN` if the count would pass
    /// its largest, `EINVAL` for fewer than 8 bytes or `u64::MAX`.
    pub fn write(&self, bytes: &[u8]) -> Result<usize, isize> {
        let value: [u8; 8] = bytes
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or(EINVAL)?;
        let value = u64::from_ne_bytes(value);
        if value == u64::MAX {
            return Err(EINVAL);
        }
        let count = self.count.get();
        match count.checked_add(value) {
            Some(sum) if sum <= MAX => self.count.set(sum),
            _ => return Err(EAGAIN),
        }
        if value > 0 {
            self.notifier.notify();
        }
        Ok(8)
    }
}

impl Pollable for EventFd {
    fn readiness(&self) -> u32 {
        let count = self.count.get();
        let mut ready = 0;
        if count > 0 {
            ready |= EPOLLIN;
        }
        if count < MAX {
            ready |= EPOLLOUT;
        }
        ready
    }

    fn notifier(&self) -> &Notifier {
        &self.notifier
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(v: u64) -> [u8; 8] {
        v.to_ne_bytes()
    }

    #[test]
    fn reads_take_the_count_and_block_at_zero() {
        let fd = EventFd::new(0, 0);
        let mut buf = [0u8; 8];
        assert_eq!(fd.read(&mut buf), Err(EAGAIN));
        assert_eq!(fd.readiness(), EPOLLOUT);
        fd.write(&value(3)).unwrap();
        fd.write(&value(4)).unwrap();
        assert_eq!(fd.readiness(), EPOLLIN | EPOLLOUT);
        assert_eq!(fd.read(&mut buf), Ok(8));
        assert_eq!(u64::from_ne_bytes(buf), 7);
        assert_eq!(fd.read(&mut buf), Err(EAGAIN));
    }

    #[test]
    fn a_semaphore_gives_one_at_a_time() {
        let fd = EventFd::new(2, EFD_SEMAPHORE);
        let mut buf = [0u8; 8];
        for _ in 0..2 {
            assert_eq!(fd.read(&mut buf), Ok(8));
            assert_eq!(u64::from_ne_bytes(buf), 1);
        }
        assert_eq!(fd.read(&mut buf), Err(EAGAIN));
    }

    #[test]
    fn bad_sizes_and_overflow_are_refused_as_linux_does() {
        let fd = EventFd::new(0, 0);
        assert_eq!(fd.read(&mut [0u8; 7]), Err(EINVAL));
        assert_eq!(fd.write(&[1, 2, 3]), Err(EINVAL));
        assert_eq!(fd.write(&value(u64::MAX)), Err(EINVAL));
        fd.write(&value(MAX)).unwrap();
        assert_eq!(fd.write(&value(1)), Err(EAGAIN));
        assert_eq!(fd.readiness(), EPOLLIN);
    }
}
