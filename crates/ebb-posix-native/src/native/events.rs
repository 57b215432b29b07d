//! The events group natively: epoll sets, eventfds, pipes and poll(2),
//! all on this core's objects (`ebb_posix_objects`). A waiting
//! `epoll_wait` or `poll` parks the calling C thread on the event loop
//! until a watched object changes or its timeout (an Ebbflow timer)
//! passes.

use alloc::rc::Rc;
use alloc::vec::Vec;
use core::time::Duration;

use ebb_posix::errno::{EBADF, EINVAL, EPERM};
use ebb_posix_files::table::{Target, O_CLOEXEC, O_NONBLOCK, O_RDONLY, O_RDWR, O_WRONLY};
use ebb_posix_objects::epoll::{self, Epoll, EVENT_BYTES};
use ebb_posix_objects::eventfd::{EventFd, EFD_SEMAPHORE};
use ebb_posix_objects::readiness::{ALWAYS, EPOLLIN, EPOLLOUT, POLLNVAL};
use ebb_posix_objects::{pipe, Object};

use super::objects::{self, answer, low32, Named};
use super::{files, user};

/// Linux's limit on `maxevents` (`EP_MAX_EVENTS`: INT_MAX / 12).
const MAX_EVENTS: usize = (i32::MAX as usize) / EVENT_BYTES;
/// poll(2)'s limit on descriptors: RLIMIT_NOFILE.
const MAX_POLL_FDS: usize = ebb_posix_files::table::MAX_FDS;

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
pub fn epoll_create1(flags: usize) -> isize {
    let flags = low32(flags);
    if flags & !O_CLOEXEC != 0 {
        return -EINVAL;
    }
    answer(objects::install(
        Object::Epoll(Epoll::new()),
        descriptor_flags(flags, O_RDWR),
    ))
}

/// epoll_create(2): the size is a hint that must be positive.
pub fn epoll_create(size: usize) -> isize {
    if low32(size).cast_signed() <= 0 {
        return -EINVAL;
    }
    epoll_create1(0)
}

fn epoll_of(fd: usize) -> Result<Rc<Epoll>, isize> {
    match objects::named(fd, EINVAL)?.object {
        Object::Epoll(epoll) => Ok(epoll),
        _ => Err(EINVAL),
    }
}

/// epoll_ctl(2).
pub fn epoll_ctl(epfd: usize, op: usize, fd: usize, event: usize) -> isize {
    answer((|| {
        let epoll = epoll_of(epfd)?;
        if fd == epfd {
            return Err(EINVAL);
        }
        // A file or stream cannot be watched (Linux: EPERM for a regular
        // file; the console is not a pollable device here).
        let object = objects::named(fd, EPERM)?.object;
        let op = low32(op);
        let (events, data) = if op == epoll::EPOLL_CTL_DEL {
            (0, 0)
        } else {
            epoll::parse_event(user::get::<[u8; EVENT_BYTES]>(event)?)
        };
        let fd = i32::try_from(fd).map_err(|_| EBADF)?;
        epoll.control(op, fd, &object, events, data)?;
        Ok(0)
    })())
}

/// epoll_wait(2) and epoll_pwait(2) (the signal mask is not used: no
/// signal is ever delivered).
pub fn epoll_wait(epfd: usize, events: usize, max: usize, timeout: usize) -> isize {
    answer((|| {
        let max = usize::try_from(low32(max).cast_signed()).map_err(|_| EINVAL)?;
        if max == 0 || max > MAX_EVENTS {
            return Err(EINVAL);
        }
        let epoll = epoll_of(epfd)?;
        let out = user::bytes_mut(events, max * EVENT_BYTES)?;
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
                    objects::yield_to_loop();
                    continue;
                }
                return Ok(0);
            }
            objects::wait_any(core::slice::from_ref(&object), left)?;
        }
    })())
}

/// eventfd2(2) (eventfd(2) has no flags).
pub fn eventfd2(initial: usize, flags: usize) -> isize {
    let flags = low32(flags);
    if flags & !(EFD_SEMAPHORE | O_CLOEXEC | O_NONBLOCK) != 0 {
        return -EINVAL;
    }
    answer(objects::install(
        Object::EventFd(Rc::new(EventFd::new(low32(initial), flags))),
        descriptor_flags(flags, O_RDWR),
    ))
}

/// pipe2(2) (pipe(2) has no flags): the two descriptors at `fds`.
pub fn pipe2(fds: usize, flags: usize) -> isize {
    let flags = low32(flags);
    if flags & !(O_CLOEXEC | O_NONBLOCK) != 0 {
        return -EINVAL;
    }
    answer((|| {
        user::get::<[i32; 2]>(fds)?;
        let (reader, writer) = pipe::pipe();
        let read_fd = objects::install(
            Object::Pipe(Rc::new(reader)),
            descriptor_flags(flags, O_RDONLY),
        )?;
        let write_fd = match objects::install(
            Object::Pipe(Rc::new(writer)),
            descriptor_flags(flags, O_WRONLY),
        ) {
            Ok(fd) => fd,
            Err(errno) => {
                let _ = files::close(read_fd);
                return Err(errno);
            }
        };
        let as_int = |fd: usize| i32::try_from(fd).unwrap_or(i32::MAX);
        user::put(fds, [as_int(read_fd), as_int(write_fd)])?;
        Ok(0)
    })())
}

/// `struct pollfd`.
#[derive(Clone, Copy)]
#[repr(C)]
struct PollFd {
    fd: i32,
    events: i16,
    revents: i16,
}

/// poll(2) and ppoll(2) (`timeout` already in the call's terms: `None`
/// waits for ever). Files and the standard streams are always ready, as
/// on Linux for regular files.
pub fn poll(fds: usize, count: usize, timeout: Option<Duration>) -> isize {
    answer((|| {
        if count > MAX_POLL_FDS {
            return Err(EINVAL);
        }
        // The whole array, checked once: every entry's address below is
        // then inside it and cannot overflow.
        let entry_bytes = core::mem::size_of::<PollFd>();
        if count > 0 {
            user::bytes(fds, count * entry_bytes)?;
        }
        let deadline = timeout.map(|after| ebb_event::now() + after);
        // A zero timeout lets the loop run once before it says nothing.
        let mut yielded = timeout != Some(Duration::ZERO);
        loop {
            let mut watched = Vec::new();
            let mut ready = 0usize;
            for index in 0..count {
                let at = fds + index * entry_bytes;
                let mut entry: PollFd = user::get(at)?;
                let wanted = u32::from(entry.events.cast_unsigned()) | ALWAYS;
                let holds = if entry.fd < 0 {
                    0
                } else {
                    let fd = usize::try_from(entry.fd).unwrap_or(usize::MAX);
                    match files::with(|table| table.target(fd)) {
                        Err(_) => POLLNVAL,
                        Ok(Target::Object { .. }) => match objects::named(fd, EBADF) {
                            Ok(Named { object, .. }) => {
                                let holds = object.pollable().readiness() & wanted;
                                watched.push(object);
                                holds
                            }
                            Err(_) => POLLNVAL,
                        },
                        Ok(_) => (EPOLLIN | EPOLLOUT) & wanted,
                    }
                };
                entry.revents = i16::try_from(holds & 0xffff).unwrap_or(0);
                if holds != 0 {
                    ready += 1;
                }
                user::put(at, entry)?;
            }
            let left = deadline.map(|deadline| deadline.saturating_since(ebb_event::now()));
            if ready == 0 && left == Some(Duration::ZERO) && !yielded {
                yielded = true;
                objects::yield_to_loop();
                continue;
            }
            if ready > 0 || left == Some(Duration::ZERO) {
                return Ok(ready);
            }
            objects::wait_any(&watched, left)?;
        }
    })())
}

/// poll(2): a timeout in milliseconds, negative for none.
pub fn poll_millis(fds: usize, count: usize, timeout: usize) -> isize {
    poll(fds, count, millis(timeout))
}

/// ppoll(2): a `struct timespec` timeout, null for none (the signal
/// mask is not used).
pub fn ppoll(fds: usize, count: usize, timeout: usize) -> isize {
    if timeout == 0 {
        return poll(fds, count, None);
    }
    match super::clock::requested(timeout) {
        Ok(nanos) => poll(fds, count, Some(Duration::from_nanos(nanos))),
        Err(errno) => -errno,
    }
}
