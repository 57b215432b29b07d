//! The futex wait queues of a C program's threads (futex(2)): who waits
//! on which address, woken in the order they came (Linux wakes in
//! priority order, and all our threads have one priority). Platform-
//! neutral and tested on the host; the native half blocks the waiting
//! thread's stackful event until its [`Waiter`] is woken or its timeout
//! passes (`native/threads.rs`).
//!
//! The caller checks the futex word's value against the expected one
//! before [`FutexQueues::enqueue`], with nothing run in between (all of a
//! program's threads share one core and switch only when one blocks), so
//! a wake between the check and the wait cannot be lost: futex(2)'s
//! atomicity guarantee, by construction.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use core::task::{Context, Poll, Waker};

use spin::Mutex;

/// One thread waiting on a futex.
#[derive(Debug, Default)]
pub struct Waiter {
    /// The address it waits on now (a requeue moves it).
    address: AtomicUsize,
    woken: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Waiter {
    /// Ready once woken; until then the task behind `cx` is woken with it.
    pub fn poll_woken(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.woken.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        *self.waker.lock() = Some(cx.waker().clone());
        // A wake between the first check and storing the waker found no
        // waker to call: look again.
        if self.woken.load(Ordering::Acquire) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }

    /// Whether it was woken.
    pub fn is_woken(&self) -> bool {
        self.woken.load(Ordering::Acquire)
    }

    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        if let Some(waker) = self.waker.lock().take() {
            waker.wake();
        }
    }
}

/// The waiters of every futex address, in arrival order.
#[derive(Debug, Default)]
pub struct FutexQueues {
    queues: BTreeMap<usize, VecDeque<Arc<Waiter>>>,
}

impl FutexQueues {
    /// No waiters, usable in a `static`.
    pub const EMPTY: FutexQueues = FutexQueues {
        queues: BTreeMap::new(),
    };

    /// A new waiter at the back of `address`'s queue.
    pub fn enqueue(&mut self, address: usize) -> Arc<Waiter> {
        let waiter = Arc::new(Waiter {
            address: AtomicUsize::new(address),
            ..Waiter::default()
        });
        self.queues
            .entry(address)
            .or_default()
            .push_back(Arc::clone(&waiter));
        waiter
    }

    /// FUTEX_WAKE: wakes up to `count` waiters of `address`, oldest
    /// first; how many it woke.
    pub fn wake(&mut self, address: usize, count: usize) -> usize {
        let Some(queue) = self.queues.get_mut(&address) else {
            return 0;
        };
        let woken = count.min(queue.len());
        for waiter in queue.drain(..woken) {
            waiter.wake();
        }
        if queue.is_empty() {
            self.queues.remove(&address);
        }
        woken
    }

    /// FUTEX_REQUEUE: wakes up to `wake` waiters of `from`, then moves up
    /// to `moved` of the rest, in order, to the back of `to`'s queue; how
    /// many it woke plus how many it moved (futex(2): FUTEX_CMP_REQUEUE's
    /// result).
    pub fn requeue(&mut self, from: usize, to: usize, wake: usize, moved: usize) -> usize {
        let woken = self.wake(from, wake);
        if from == to {
            // Moving a queue onto itself changes nothing; Linux counts them.
            let stay = self.queues.get(&from).map_or(0, VecDeque::len);
            return woken + moved.min(stay);
        }
        let Some(queue) = self.queues.get_mut(&from) else {
            return woken;
        };
        let count = moved.min(queue.len());
        let taken: VecDeque<Arc<Waiter>> = queue.drain(..count).collect();
        if queue.is_empty() {
            self.queues.remove(&from);
        }
        for waiter in &taken {
            waiter.address.store(to, Ordering::Relaxed);
        }
        self.queues.entry(to).or_default().extend(taken);
        woken + count
    }

    /// Takes a waiter whose timeout passed out of its queue; `false` if a
    /// wake came first (and it is no longer queued).
    pub fn cancel(&mut self, waiter: &Arc<Waiter>) -> bool {
        if waiter.is_woken() {
            return false;
        }
        let address = waiter.address.load(Ordering::Relaxed);
        let Some(queue) = self.queues.get_mut(&address) else {
            return false;
        };
        let before = queue.len();
        queue.retain(|queued| !Arc::ptr_eq(queued, waiter));
        let removed = queue.len() != before;
        if queue.is_empty() {
            self.queues.remove(&address);
        }
        removed
    }

    /// How many wait on `address`.
    #[must_use]
    pub fn waiting(&self, address: usize) -> usize {
        self.queues.get(&address).map_or(0, VecDeque::len)
    }
}

/// Shared by a program's threads.
pub type SharedFutexQueues = Mutex<FutexQueues>;

#[cfg(test)]
mod tests {
    extern crate std;

    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn waker() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (Arc::clone(&count), Waker::from(count))
    }

    #[test]
    fn wakes_go_oldest_first_and_fire_the_waiters_waker() {
        let mut queues = FutexQueues::default();
        let (first, second) = (queues.enqueue(8), queues.enqueue(8));
        let (count, waker) = waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(first.poll_woken(&mut cx), Poll::Pending);
        assert_eq!(queues.wake(8, 1), 1);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert_eq!(first.poll_woken(&mut cx), Poll::Ready(()));
        assert!(!second.is_woken());
        assert_eq!(queues.wake(8, 5), 1);
        assert_eq!(queues.wake(8, 5), 0);
        assert_eq!(queues.waiting(8), 0);
    }

    #[test]
    fn a_requeue_wakes_some_and_moves_the_rest_in_order() {
        let mut queues = FutexQueues::default();
        let waiters: std::vec::Vec<_> = (0..4).map(|_| queues.enqueue(16)).collect();
        let earlier = queues.enqueue(32);
        assert_eq!(queues.requeue(16, 32, 1, 2), 3);
        assert!(waiters[0].is_woken());
        assert_eq!((queues.waiting(16), queues.waiting(32)), (1, 3));
        // The moved ones queue behind the waiter already there.
        assert_eq!(queues.wake(32, 1), 1);
        assert!(earlier.is_woken());
        assert_eq!(queues.wake(32, 1), 1);
        assert!(waiters[1].is_woken() && !waiters[2].is_woken());
    }

    #[test]
    fn a_timed_out_waiter_leaves_its_queue_unless_woken_first() {
        let mut queues = FutexQueues::default();
        let (gone, stays) = (queues.enqueue(8), queues.enqueue(8));
        assert!(queues.cancel(&gone));
        assert_eq!(queues.waiting(8), 1);
        assert_eq!(queues.wake(8, 1), 1);
        assert!(stays.is_woken());
        assert!(!queues.cancel(&stays), "woken before its timeout");
        // A moved waiter is cancelled from where it was moved to.
        let moved = queues.enqueue(8);
        queues.requeue(8, 24, 0, 1);
        assert!(queues.cancel(&moved));
        assert_eq!((queues.waiting(8), queues.waiting(24)), (0, 0));
    }
}
