//! The events group: epoll sets, eventfds, pipes and poll(2), all on the
//! objects of this crate. A waiting `epoll_wait` or `poll` parks the
//! calling C thread until a watched object changes or its timeout (an
//! Ebbflow timer) passes.

use alloc::rc::Rc;
use alloc::vec::Vec;
use core::time::Duration;

use ebb_posix::errno::{EBADF, EINVAL, EPERM};
use ebb_posix_files::table::{O_CLOEXEC, O_NONBLOCK, O_RDONLY, O_RDWR, O_WRONLY};

use super::blocking::{wait_any, yield_to_loop};
use super::{answer, get, get_timespec, low32, put, Host, Named};
use crate::epoll::{self, Epoll, EVENT_BYTES};
use crate::eventfd::{EventFd, EFD_SEMAPHORE};
use crate::readiness::{ALWAYS, POLLNVAL};
use crate::{pipe, Object};

/// Linux's limit on `maxevents` (`EP_MAX_EVENTS`: INT_MAX / 12).
const MAX_EVENTS: usize = (i32::MAX as usize) / EVENT_BYTES;
/// poll(2)'s limit on descriptors: RLIMIT_NOFILE.
const MAX_POLL_FDS: usize = ebb_posix_files::table::MAX_FDS;
/// `sizeof(struct pollfd)`: an `int` descriptor, `short` events and
/// `short` revents.
pub const POLLFD_BYTES: usize = 8;

/// A millisecond timeout as the calls take it: negative is none.
fn millis(raw: usize) -> Option<Duration> {
    u64::try_from(low32(raw).cast_signed())
        .ok()
        .map(Duration::from_millis)
}

/// `O_CLOEXEC`/`O_NONBLOCK` from flags that use their bits.
fn descriptor_flags(flags: u32, access: u32) -> u32 {
    access | (flags & (O_CLOEXEC | O_NONBLOCK))
}

/// epoll_create1(2) (epoll_create(2) with a positive size is
/// `epoll_create1(0)`).
pub fn epoll_create1(host: &impl Host, flags: usize) -> isize {
    let flags = low32(flags);
    if flags & !O_CLOEXEC != 0 {
        return -EINVAL;
    }
    answer(host.install(Object::Epoll(Epoll::new()), descriptor_flags(flags, O_RDWR)))
}

/// epoll_create(2): the size is a hint that must be positive.
pub fn epoll_create(host: &impl Host, size: usize) -> isize {
    if low32(size).cast_signed() <= 0 {
        return -EINVAL;
    }
    epoll_create1(host, 0)
}

fn epoll_of(host: &impl Host, fd: usize) -> Result<Rc<Epoll>, isize> {
    match host.named(fd, EINVAL)?.object {
        Object::Epoll(epoll) => Ok(epoll),
        _ => Err(EINVAL),
    }
}

/// epoll_ctl(2). A descriptor that names no object cannot be watched:
/// `EPERM`, as Linux says for a regular file (and the platform's own
/// descriptors, files or Linux's, are not pollable objects here).
pub fn epoll_ctl(host: &impl Host, epfd: usize, op: usize, fd: usize, event: usize) -> isize {
    answer((|| {
        let epoll = epoll_of(host, epfd)?;
        if fd == epfd {
            return Err(EINVAL);
        }
        let object = host.named(fd, EPERM)?.object;
        let op = low32(op);
        let (events, data) = if op == epoll::EPOLL_CTL_DEL {
            (0, 0)
        } else {
            epoll::parse_event(get::<EVENT_BYTES>(host, event)?)
        };
        let fd = i32::try_from(fd).map_err(|_| EBADF)?;
        epoll.control(op, fd, &object, events, data)?;
        Ok(0)
    })())
}

/// epoll_wait(2) and epoll_pwait(2) (the signal mask is not used: no
/// signal is ever delivered to a parked call).
pub fn epoll_wait(
    host: &impl Host,
    epfd: usize,
    events: usize,
    max: usize,
    timeout: usize,
) -> isize {
    answer((|| {
        let max = usize::try_from(low32(max).cast_signed()).map_err(|_| EINVAL)?;
        if max == 0 || max > MAX_EVENTS {
            return Err(EINVAL);
        }
        let epoll = epoll_of(host, epfd)?;
        let out = host.bytes_mut(events, max * EVENT_BYTES)?;
        let timeout = millis(timeout);
        let deadline = timeout.map(|after| ebb_event::now() + after);
        let object = Object::Epoll(Rc::clone(&epoll));
        // A zero timeout lets the loop run once before it says nothing.
        let mut yielded = timeout != Some(Duration::ZERO);
        loop {
            let ready = epoll.collect(max);
            if !ready.is_empty() {
                for (slot, (events, data)) in out.chunks_exact_mut(EVENT_BYTES).zip(&ready) {
                    slot.copy_from_slice(&epoll::event_bytes(*events, *data));
                }
                return Ok(ready.len());
            }
            let left = deadline.map(|deadline| deadline.saturating_since(ebb_event::now()));
            if left == Some(Duration::ZERO) {
                if !yielded {
                    yielded = true;
                    yield_to_loop(host);
                    continue;
                }
                return Ok(0);
            }
            wait_any(host, core::slice::from_ref(&object), left)?;
        }
    })())
}

/// eventfd2(2) (eventfd(2) has no flags).
pub fn eventfd2(host: &impl Host, initial: usize, flags: usize) -> isize {
    let flags = low32(flags);
    if flags & !(EFD_SEMAPHORE | O_CLOEXEC | O_NONBLOCK) != 0 {
        return -EINVAL;
    }
    answer(host.install(
        Object::EventFd(Rc::new(EventFd::new(low32(initial), flags))),
        descriptor_flags(flags, O_RDWR),
    ))
}

/// pipe2(2) (pipe(2) has no flags): the two descriptors at `fds`.
pub fn pipe2(host: &impl Host, fds: usize, flags: usize) -> isize {
    let flags = low32(flags);
    if flags & !(O_CLOEXEC | O_NONBLOCK) != 0 {
        return -EINVAL;
    }
    answer((|| {
        // Checked before anything is made.
        host.bytes_mut(fds, 8)?;
        let (reader, writer) = pipe::pipe();
        let read_fd = host.install(
            Object::Pipe(Rc::new(reader)),
            descriptor_flags(flags, O_RDONLY),
        )?;
        let write_fd = match host.install(
            Object::Pipe(Rc::new(writer)),
            descriptor_flags(flags, O_WRONLY),
        ) {
            Ok(fd) => fd,
            Err(errno) => {
                host.close(read_fd);
                return Err(errno);
            }
        };
        let as_int = |fd: usize| i32::try_from(fd).unwrap_or(i32::MAX);
        let mut pair = [0u8; 8];
        pair[..4].copy_from_slice(&as_int(read_fd).to_ne_bytes());
        pair[4..].copy_from_slice(&as_int(write_fd).to_ne_bytes());
        put(host, fds, &pair)?;
        Ok(0)
    })())
}

/// poll(2) and ppoll(2) (`timeout` already in the call's terms: `None`
/// waits for ever). A descriptor that names no object is as the host's
/// [`Host::other_readiness`] says; only objects wake a waiting poll.
pub fn poll(host: &impl Host, fds: usize, count: usize, timeout: Option<Duration>) -> isize {
    answer((|| {
        if count > MAX_POLL_FDS {
            return Err(EINVAL);
        }
        // The whole array, checked once: every entry's address below is
        // then inside it and cannot overflow.
        if count > 0 {
            host.bytes(fds, count * POLLFD_BYTES)?;
        }
        let deadline = timeout.map(|after| ebb_event::now() + after);
        // A zero timeout lets the loop run once before it says nothing.
        let mut yielded = timeout != Some(Duration::ZERO);
        loop {
            let mut watched = Vec::new();
            let mut ready = 0usize;
            for index in 0..count {
                let at = fds + index * POLLFD_BYTES;
                let mut entry = get::<POLLFD_BYTES>(host, at)?;
                let fd = i32::from_ne_bytes([entry[0], entry[1], entry[2], entry[3]]);
                let events = u16::from_ne_bytes([entry[4], entry[5]]);
                let wanted = u32::from(events) | ALWAYS;
                let holds = match usize::try_from(fd) {
                    Err(_) => 0,
                    Ok(fd) => match host.named(fd, EPERM) {
                        Ok(Named { object, .. }) => {
                            let holds = object.pollable().readiness() & wanted;
                            watched.push(object);
                            holds
                        }
                        Err(EPERM) => host.other_readiness(fd, wanted).unwrap_or(POLLNVAL),
                        Err(_) => POLLNVAL,
                    },
                };
                let revents = u16::try_from(holds & 0xffff).unwrap_or(0);
                entry[6..].copy_from_slice(&revents.to_ne_bytes());
                if holds != 0 {
                    ready += 1;
                }
                put(host, at, &entry)?;
            }
            let left = deadline.map(|deadline| deadline.saturating_since(ebb_event::now()));
            if ready == 0 && left == Some(Duration::ZERO) && !yielded {
                yielded = true;
                yield_to_loop(host);
                continue;
            }
            if ready > 0 || left == Some(Duration::ZERO) {
                return Ok(ready);
            }
            wait_any(host, &watched, left)?;
        }
    })())
}

/// poll(2): a timeout in milliseconds, negative for none.
pub fn poll_millis(host: &impl Host, fds: usize, count: usize, timeout: usize) -> isize {
    poll(host, fds, count, millis(timeout))
}

/// ppoll(2): a `struct timespec` timeout, null for none (the signal
/// mask is not used).
pub fn ppoll(host: &impl Host, fds: usize, count: usize, timeout: usize) -> isize {
    if timeout == 0 {
        return poll(host, fds, count, None);
    }
    match get_timespec(host, timeout) {
        Ok(nanos) => poll(host, fds, count, Some(Duration::from_nanos(nanos))),
        Err(errno) => -errno,
    }
}
