//! Telling code outside the platform when one of its file descriptors has
//! data: a multishot `IORING_OP_POLL_ADD` on the core's ring, so a device
//! such as a TAP file (`ebb-userstack`) is served from the same event loop
//! as everything else and an idle core still sleeps in the kernel.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::rc::{Rc, Weak};

use io_uring::{cqueue, opcode, types};

use crate::driver::{OpToken, Reactor};

thread_local! {
    static REACTOR: RefCell<Weak<Reactor>> = const { RefCell::new(Weak::new()) };
}

/// Remembers this core's reactor (none on epoll cores).
pub(crate) fn set_reactor(reactor: Option<&Rc<Reactor>>) {
    REACTOR.with(|current| *current.borrow_mut() = reactor.map_or_else(Weak::new, Rc::downgrade));
}

/// Stops the watch when dropped: no callback runs after that.
pub struct ReadableWatch {
    reactor: Weak<Reactor>,
    token: Rc<Cell<Option<OpToken>>>,
}

impl Drop for ReadableWatch {
    fn drop(&mut self) {
        if let (Some(reactor), Some(token)) = (self.reactor.upgrade(), self.token.take()) {
            reactor.cancel(token);
        }
    }
}

/// Calls `on_readable` on this core each time `fd` becomes readable, until
/// the returned watch is dropped or the core ends. The callback should read
/// until the file says `EAGAIN` (the poll reports edges, not levels). `fd`
/// must stay open while watched.
///
/// # Errors
///
/// `Unsupported` on a core without io_uring (the epoll backend): the caller
/// can poll from an idle handler instead.
pub fn watch_readable(fd: RawFd, on_readable: Box<dyn FnMut()>) -> io::Result<ReadableWatch> {
    let reactor = REACTOR
        .with(|current| current.borrow().upgrade())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "watching a file needs a core running on io_uring",
            )
        })?;
    let token = Rc::new(Cell::new(None));
    let callback = Rc::new(RefCell::new(on_readable));
    arm(&reactor, fd, &token, callback);
    Ok(ReadableWatch {
        reactor: Rc::downgrade(&reactor),
        token,
    })
}

fn arm(
    reactor: &Rc<Reactor>,
    fd: RawFd,
    token: &Rc<Cell<Option<OpToken>>>,
    callback: Rc<RefCell<Box<dyn FnMut()>>>,
) {
    let poll = opcode::PollAdd::new(types::Fd(fd), u32::from(libc::POLLIN.unsigned_abs()))
        .multi(true)
        .build();
    let weak_reactor = Rc::downgrade(reactor);
    let rearm_token = Rc::clone(token);
    let on_complete = move |result: i32, flags: u32| {
        if result < 0 || rearm_token.get().is_none() {
            // Cancelled (the watch was dropped, or the core is ending), the
            // fd is gone, or the watch was dropped before the cancellation
            // reached the kernel: stop, without calling back.
            return false;
        }
        (callback.borrow_mut())();
        if !cqueue::more(flags) && rearm_token.get().is_some() {
            // The kernel ended the multishot poll: start another.
            if let Some(reactor) = weak_reactor.upgrade() {
                arm(&reactor, fd, &rearm_token, Rc::clone(&callback));
            }
            return false;
        }
        true
    };
    // SAFETY: a poll request points to no memory of ours.
    let submitted = unsafe { reactor.submit(poll, Box::new(on_complete)) };
    token.set(Some(submitted));
}
