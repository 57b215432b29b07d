//! Who hears of an object's changes: the wakers of calls blocked on it,
//! and the epoll sets watching it.

use alloc::rc::{Rc, Weak};
use alloc::vec::Vec;
use core::cell::RefCell;
use core::future::{poll_fn, Future};
use core::task::{Poll, Waker};

use crate::epoll::{Epoll, Key};

/// An object's readiness and its notifier.
pub trait Pollable {
    /// The events that hold now (`readiness` bits).
    fn readiness(&self) -> u32;
    /// Who hears of its changes.
    fn notifier(&self) -> &Notifier;
}

/// The listeners of one object.
#[derive(Default)]
pub struct Notifier {
    inner: RefCell<Listeners>,
}

#[derive(Default)]
struct Listeners {
    wakers: Vec<Waker>,
    watchers: Vec<Watcher>,
}

struct Watcher {
    epoll: Weak<Epoll>,
    key: Key,
}

impl Notifier {
    /// Wakes `waker` at the next change.
    pub fn wake_on_change(&self, waker: &Waker) {
        let mut inner = self.inner.borrow_mut();
        if !inner.wakers.iter().any(|known| known.will_wake(waker)) {
            inner.wakers.push(waker.clone());
        }
    }

    /// Something changed: wakes the blocked calls (each then looks again)
    /// and tells each watching epoll set to look at its entry.
    pub fn notify(&self) {
        let (wakers, epolls) = {
            let mut inner = self.inner.borrow_mut();
            inner
                .watchers
                .retain(|watch| watch.epoll.strong_count() > 0);
            let epolls: Vec<(Rc<Epoll>, Key)> = inner
                .watchers
                .iter()
                .filter_map(|watch| Some((watch.epoll.upgrade()?, watch.key)))
                .collect();
            (core::mem::take(&mut inner.wakers), epolls)
        };
        for waker in wakers {
            waker.wake();
        }
        for (epoll, key) in epolls {
            epoll.mark(key);
        }
    }

    pub(crate) fn watch(&self, epoll: &Rc<Epoll>, key: Key) {
        self.inner.borrow_mut().watchers.push(Watcher {
            epoll: Rc::downgrade(epoll),
            key,
        });
    }

    pub(crate) fn unwatch(&self, epoll: &Epoll, key: Key) {
        self.inner
            .borrow_mut()
            .watchers
            .retain(|watch| !(watch.key == key && core::ptr::eq(watch.epoll.as_ptr(), epoll)));
    }

    /// The epoll sets watching, with the entry's key in each.
    pub(crate) fn watchers(&self) -> Vec<(Rc<Epoll>, Key)> {
        self.inner
            .borrow()
            .watchers
            .iter()
            .filter_map(|watch| Some((watch.epoll.upgrade()?, watch.key)))
            .collect()
    }
}

/// Ends at `object`'s next change: what a blocking call waits for after
/// its non-blocking attempt said `EAGAIN`.
pub fn changed(object: &dyn Pollable) -> impl Future<Output = ()> + '_ {
    let mut registered = false;
    poll_fn(move |cx| {
        if registered {
            Poll::Ready(())
        } else {
            registered = true;
            object.notifier().wake_on_change(cx.waker());
            Poll::Pending
        }
    })
}
