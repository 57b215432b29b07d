//! The descriptors that name objects (`ebb_posix_objects`): sockets,
//! epoll sets, eventfds and pipes, kept in this core's object table and
//! named by the file table's `Target::Object`. Here: installing one,
//! finding one, releasing those whose last descriptor closed, and
//! blocking a call on a descriptor that is not `O_NONBLOCK` (the calling
//! C thread parks on the event loop until the object changes).

use alloc::vec::Vec;
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;

use ebb_posix::errno::{EAGAIN, EBADF, EMFILE, ENETUNREACH};
use ebb_posix_files::table::{Target, O_NONBLOCK};
use ebb_posix_objects::{object, Object};

use super::{files, threads};

/// A call's result as the program gets it: the value, or `-errno`.
pub fn answer(result: Result<usize, isize>) -> isize {
    match result {
        Ok(value) => isize::try_from(value).unwrap_or(isize::MAX),
        Err(errno) => -errno,
    }
}

/// The low 32 bits of an argument (an `int` or `unsigned` in C).
pub fn low32(raw: usize) -> u32 {
    u32::try_from(raw & 0xffff_ffff).unwrap_or(0)
}

/// A descriptor's object and whether it is non-blocking.
pub struct Named {
    /// The object.
    pub object: Object,
    /// `O_NONBLOCK` is set on its description.
    pub nonblocking: bool,
}

/// The object `fd` names; `not_one` when it names a file or stream,
/// `EBADF` when it names nothing.
pub fn named(fd: usize, not_one: isize) -> Result<Named, isize> {
    let (target, flags) = files::with(|table| Ok((table.target(fd)?, table.status_flags(fd)?)))?;
    let Target::Object { id, .. } = target else {
        return Err(not_one);
    };
    let object = object::with_here(|objects| objects.get(id))
        .flatten()
        .ok_or(EBADF)?;
    Ok(Named {
        object,
        nonblocking: flags & O_NONBLOCK != 0,
    })
}

/// Gives `object` a descriptor (the lowest free) with `flags` (access
/// mode, `O_NONBLOCK`, `O_CLOEXEC`).
pub fn install(object: Object, flags: u32) -> Result<usize, isize> {
    let kind = object.kind();
    let id = object::with_here(|objects| objects.insert(object)).ok_or(ENETUNREACH)??;
    match files::with(|table| table.open_object(id, kind, flags)) {
        Ok(fd) => Ok(fd),
        Err(errno) => {
            if let Some(Some(object)) = object::with_here(|objects| objects.remove(id)) {
                object::release(&object);
            }
            Err(if errno == EBADF { EMFILE } else { errno })
        }
    }
}

/// Releases the objects whose last descriptor just closed (after
/// close, dup2, dup3).
pub fn release_closed() {
    let released: Vec<u32> = files::with(|table| Ok(table.take_released())).unwrap_or_default();
    for id in released {
        // Taken out of the table first: a socket's release calls into the
        // network stack, which may call back into the table's objects.
        if let Some(Some(object)) = object::with_here(|objects| objects.remove(id)) {
            object::release(&object);
        }
    }
}

/// Runs `attempt` until it says something other than `EAGAIN`, waiting
/// for `object`'s next change between tries; at once if `nonblocking`.
pub fn blocking<T>(
    object: &Object,
    nonblocking: bool,
    mut attempt: impl FnMut() -> Result<T, isize>,
) -> Result<T, isize> {
    loop {
        match attempt() {
            Err(EAGAIN) if !nonblocking => {
                if threads::wait(ebb_posix_objects::changed(object.pollable())).is_none() {
                    return Err(EAGAIN);
                }
            }
            other => return other,
        }
    }
}

/// Lets this core's event loop run one turn (its other tasks, and the
/// network's receive path) before the calling C thread goes on.
///
/// A poll with a zero timeout that finds nothing ready calls it before
/// it answers: the loop only runs while C threads are parked, so a
/// program that polls without waiting (Redis does while a script runs
/// long, to take `SCRIPT KILL`) would otherwise never see another byte.
pub fn yield_to_loop() {
    let _ = threads::wait(ebb_event::yield_now());
}

/// How a wait ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Woke {
    /// A watched object changed.
    Changed,
    /// The timeout passed.
    TimedOut,
}

/// Waits until one of `objects` changes or `timeout` passes (`None`:
/// no limit). `EAGAIN` when the caller is not a C thread that can park
/// (nothing would ever wake it: the caller must not spin on it).
pub fn wait_any(objects: &[Object], timeout: Option<Duration>) -> Result<Woke, isize> {
    let changed = threads::wait(async {
        let mut expiry = pin!(async {
            match timeout {
                Some(after) => ebb_event::sleep(after).await,
                None => core::future::pending().await,
            }
        });
        let mut registered = false;
        poll_fn(|cx| {
            if registered {
                // Woken: by a change, or by the timer.
                return Poll::Ready(expiry.as_mut().poll(cx).is_pending());
            }
            registered = true;
            for object in objects {
                object.pollable().notifier().wake_on_change(cx.waker());
            }
            if expiry.as_mut().poll(cx).is_ready() {
                Poll::Ready(false)
            } else {
                Poll::Pending
            }
        })
        .await
    });
    match changed {
        Some(true) => Ok(Woke::Changed),
        Some(false) => Ok(Woke::TimedOut),
        None => Err(EAGAIN),
    }
}

/// read(2) of an object's descriptor, into `buf`.
pub fn read(named: &Named, buf: &mut [u8]) -> Result<usize, isize> {
    blocking(&named.object, named.nonblocking, || named.object.read(buf))
}

/// write(2) of `bytes` to an object's descriptor. A blocking write to
/// a pipe or socket returns when all went (pipe(7), tcp(7)); a
/// non-blocking one, with what fit. An eventfd takes one 8-byte value
/// per write, whatever the buffer's length (eventfd(2)).
pub fn write(named: &Named, bytes: &[u8]) -> Result<usize, isize> {
    let streams = matches!(named.object, Object::Socket(_) | Object::Pipe(_));
    let mut done = 0;
    loop {
        match blocking(&named.object, named.nonblocking, || {
            named.object.write(&bytes[done..])
        }) {
            Ok(count) => {
                done += count;
                if !streams || named.nonblocking || done >= bytes.len() || count == 0 {
                    return Ok(done);
                }
            }
            Err(_) if done > 0 => return Ok(done),
            Err(errno) => return Err(errno),
        }
    }
}
