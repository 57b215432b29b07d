//! Blocking on objects: a call on a descriptor that is not `O_NONBLOCK`
//! parks the calling C thread until the object changes, then tries
//! again; waits with timeouts use the event loop's timers.

use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;

use ebb_posix::errno::EAGAIN;

use super::{Host, Named};
use crate::Object;

/// Runs `attempt` until it says something other than `EAGAIN`, waiting
/// for `object`'s next change between tries; at once if `nonblocking`.
///
/// # Errors
///
/// `attempt`'s, and `EAGAIN` when the caller cannot park.
pub fn blocking<T>(
    host: &impl Host,
    object: &Object,
    nonblocking: bool,
    mut attempt: impl FnMut() -> Result<T, isize>,
) -> Result<T, isize> {
    loop {
        match attempt() {
            Err(EAGAIN) if !nonblocking => {
                if host.wait(crate::changed(object.pollable())).is_none() {
                    return Err(EAGAIN);
                }
            }
            other => return other,
        }
    }
}

/// Lets the event loop run one turn (its other tasks, and the network's
/// receive path) before the calling C thread goes on.
///
/// A poll with a zero timeout that finds nothing ready calls it before
/// it answers: the loop only runs while C threads are parked, so a
/// program that polls without waiting (Redis does while a script runs
/// long, to take `SCRIPT KILL`) would otherwise never see another byte.
pub fn yield_to_loop(host: &impl Host) {
    let _ = host.wait(ebb_event::yield_now());
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
/// no limit).
///
/// # Errors
///
/// `EAGAIN` when the caller cannot park.
pub fn wait_any(
    host: &impl Host,
    objects: &[Object],
    timeout: Option<Duration>,
) -> Result<Woke, isize> {
    let changed = host.wait(async {
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
///
/// # Errors
///
/// The object's.
pub fn read(host: &impl Host, named: &Named, buf: &mut [u8]) -> Result<usize, isize> {
    blocking(host, &named.object, named.nonblocking, || {
        named.object.read(buf)
    })
}

/// write(2) of `bytes` to an object's descriptor. A blocking write to
/// a pipe or socket returns when all went (pipe(7), tcp(7)); a
/// non-blocking one, with what fit. An eventfd takes one 8-byte value
/// per write, whatever the buffer's length (eventfd(2)).
///
/// # Errors
///
/// The object's, when nothing went.
pub fn write(host: &impl Host, named: &Named, bytes: &[u8]) -> Result<usize, isize> {
    let streams = matches!(named.object, Object::Socket(_) | Object::Pipe(_));
    let mut done = 0;
    loop {
        match blocking(host, &named.object, named.nonblocking, || {
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
