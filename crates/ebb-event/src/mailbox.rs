//! Cross-core messages.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};

use crossbeam_queue::SegQueue;

use crate::task::TaskHeader;

/// What one core sends another.
pub(crate) enum Message {
    /// Run this closure as an event there.
    Event(Box<dyn FnOnce() + Send>),
    /// Poll this task there (its home core).
    Wake(Arc<TaskHeader>),
}

/// A core's inbox: a lock-free queue any core may push to, and whether the
/// owner is (about to be) halted and so needs a notification.
pub(crate) struct Mailbox {
    queue: SegQueue<Message>,
    sleeping: AtomicBool,
}

impl Mailbox {
    pub fn new() -> Self {
        Mailbox {
            queue: SegQueue::new(),
            sleeping: AtomicBool::new(false),
        }
    }

    /// Queues `message`; true if the owner must be notified. Pairs with
    /// `prepare_to_sleep`: the owner announces sleep and then checks the
    /// queue, the sender pushes and then checks the announcement (both
    /// SeqCst), so at least one of them sees the other and no wake-up is
    /// lost.
    pub fn push(&self, message: Message) -> bool {
        self.queue.push(message);
        self.sleeping.load(Ordering::SeqCst) && self.sleeping.swap(false, Ordering::SeqCst)
    }

    pub fn pop(&self) -> Option<Message> {
        self.queue.pop()
    }

    /// Announces that the owner is about to halt; false (and no
    /// announcement) if messages are already waiting.
    pub fn prepare_to_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
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
