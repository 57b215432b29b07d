//! Cross-core messages.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::sync::atomic::Ordering;

use crossbeam_queue::SegQueue;

use crate::sync::{fence, AtomicBool};
use crate::task::TaskHeader;

/// What one core sends another.
pub(crate) enum Message {
    /// Run this closure as an event there.
    Event(Box<dyn FnOnce() + Send>),
    /// Poll this task there (its home core).
    Wake(Arc<TaskHeader>),
}

/// The queue under a [`Mailbox`]: a lock-free multi-producer queue. The
/// sleep handshake asks nothing of its memory orderings beyond a push
/// being a write that `is_empty` reads: the mailbox's own SeqCst fences
/// order the two sides.
pub(crate) trait Inbox {
    type Item;
    fn push(&self, item: Self::Item);
    fn pop(&self) -> Option<Self::Item>;
    fn is_empty(&self) -> bool;
}

impl<T> Inbox for SegQueue<T> {
    type Item = T;
    fn push(&self, item: T) {
        SegQueue::push(self, item);
    }
    fn pop(&self) -> Option<T> {
        SegQueue::pop(self)
    }
    fn is_empty(&self) -> bool {
        SegQueue::is_empty(self)
    }
}

/// A core's inbox: a lock-free queue any core may push to, and whether the
/// owner is (about to be) halted and so needs a notification.
///
/// The queue is a parameter only so that the loom model
/// (`tests::loom_*`) can put a queue loom sees in its place.
pub(crate) struct Mailbox<Q = SegQueue<Message>> {
    queue: Q,
    sleeping: AtomicBool,
}

impl Mailbox {
    pub fn new() -> Self {
        Mailbox::with_inbox(SegQueue::new())
    }
}

impl<Q: Inbox> Mailbox<Q> {
    fn with_inbox(queue: Q) -> Self {
        Mailbox {
            queue,
            sleeping: AtomicBool::new(false),
        }
    }

    /// Queues `message`; true if the owner must be notified. Pairs with
    /// `prepare_to_sleep`: the owner announces sleep and then checks the
    /// queue, the sender pushes and then checks the announcement, each with
    /// a SeqCst fence between its write and its read. The two fences are
    /// ordered one way or the other, and the side whose fence comes second
    /// sees the other's write (C++20 [atomics.fences]), so no wake-up is
    /// lost. The fences make this hold whatever orderings the queue uses
    /// inside (SeqCst accesses alone would rely on crossbeam's internals),
    /// and they are what loom can check (it treats SeqCst accesses as
    /// AcqRel).
    pub fn push(&self, message: Q::Item) -> bool {
        self.queue.push(message);
        fence(Ordering::SeqCst);
        self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst)
    }

    pub fn pop(&self) -> Option<Q::Item> {
        self.queue.pop()
    }

    /// Announces that the owner is about to halt; false (and no
    /// announcement) if messages are already waiting.
    pub fn prepare_to_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if self.queue.is_empty() {
            true
        } else {
            self.sleeping.store(false, Ordering::SeqCst);
            false
        }
    }

    pub fn woke_up(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }
}

#[cfg(all(test, loom))]
mod tests {
    use super::{Inbox, Mailbox};
    use core::sync::atomic::Ordering;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;

    /// A queue of indistinguishable messages that loom sees: a count,
    /// pushed with release and checked with acquire, weaker than
    /// crossbeam's `SegQueue` (which loom cannot see), so the model checks
    /// the handshake at the level of the flag and fences we own and asks
    /// the queue for no more than [`Inbox`] does.
    struct CountingInbox(AtomicUsize);

    impl Inbox for CountingInbox {
        type Item = ();
        fn push(&self, (): ()) {
            self.0.fetch_add(1, Ordering::Release);
        }
        fn pop(&self) -> Option<()> {
            self.0
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .ok()
                .map(|_| ())
        }
        fn is_empty(&self) -> bool {
            self.0.load(Ordering::Acquire) == 0
        }
    }

    /// No lost wake-up: the owner announces sleep and checks its inbox
    /// while a sender pushes and checks the announcement. In every
    /// interleaving either the owner sees the message (and does not
    /// sleep) or the sender sees the announcement (and notifies).
    #[test]
    fn loom_mailbox_sleep_wake_no_lost_wakeup() {
        loom::model(|| {
            let mailbox = Arc::new(Mailbox::with_inbox(CountingInbox(AtomicUsize::new(0))));
            let sender = {
                let mailbox = Arc::clone(&mailbox);
                loom::thread::spawn(move || mailbox.push(()))
            };
            let sleeps = mailbox.prepare_to_sleep();
            let notified = sender.join().unwrap();
            // A notification for an owner that did not sleep is possible
            // (the sender saw the announcement before the owner withdrew
            // it) and harmless: the owner's next halt returns at once.
            assert!(
                !sleeps || notified,
                "the owner sleeps and nobody notifies it"
            );
            mailbox.woke_up();
            assert_eq!(mailbox.pop(), Some(()));
            assert_eq!(mailbox.pop(), None);
        });
    }

    /// Two senders and a sleeper: the owner is notified at most once per
    /// announcement, and if it sleeps at least one sender notifies it.
    #[test]
    fn loom_mailbox_two_senders_notify_once() {
        loom::model(|| {
            let mailbox = Arc::new(Mailbox::with_inbox(CountingInbox(AtomicUsize::new(0))));
            let senders: [_; 2] = core::array::from_fn(|_| {
                let mailbox = Arc::clone(&mailbox);
                loom::thread::spawn(move || mailbox.push(()))
            });
            let sleeps = mailbox.prepare_to_sleep();
            let notifications = senders
                .into_iter()
                .map(|s| usize::from(s.join().unwrap()))
                .sum::<usize>();
            if sleeps {
                assert_eq!(
                    notifications, 1,
                    "a sleeping owner is notified exactly once"
                );
            } else {
                assert!(
                    notifications <= 1,
                    "one announcement, {notifications} notifications"
                );
            }
        });
    }
}
