//! Per-core timers: a binary heap of deadlines with lazy cancellation.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, BinaryHeap};
use core::cmp::Reverse;

use crate::Instant;

/// Names a timer so it can be cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimerId(u64);

pub(crate) enum Callback {
    Once(Box<dyn FnOnce()>),
    Every(Box<dyn FnMut()>),
}

struct Timer {
    deadline: Instant,
    /// Zero for one-shot timers.
    period_ns: u64,
    /// `None` while the callback runs.
    callback: Option<Callback>,
}

/// Deadlines in a heap ordered by (deadline, id), so timers with equal
/// deadlines fire in the order they were set. Cancelling removes the entry
/// from `timers`; its heap item is skipped when it surfaces.
#[derive(Default)]
pub(crate) struct TimerQueue {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    timers: BTreeMap<u64, Timer>,
    next_id: u64,
}

impl TimerQueue {
    pub fn add(&mut self, deadline: Instant, period_ns: u64, callback: Callback) -> TimerId {
        let id = self.next_id;
        self.next_id += 1;
        self.timers.insert(
            id,
            Timer {
                deadline,
                period_ns,
                callback: Some(callback),
            },
        );
        self.heap.push(Reverse((deadline, id)));
        TimerId(id)
    }

    /// True if the timer existed and will not fire again.
    pub fn cancel(&mut self, id: TimerId) -> bool {
        self.timers.remove(&id.0).is_some()
    }

    /// The earliest live deadline.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        while let Some(&Reverse((deadline, id))) = self.heap.peek() {
            match self.timers.get(&id) {
                Some(timer) if timer.deadline == deadline => return Some(deadline),
                _ => {
                    self.heap.pop();
                }
            }
        }
        None
    }

    /// Takes the callback of the next timer due at `now`. A periodic timer
    /// is re-armed at once for its next period (skipping periods that
    /// already passed), and its callback must be handed back with
    /// `restore` after it ran.
    pub fn take_due(&mut self, now: Instant) -> Option<(TimerId, Callback)> {
        let deadline = self.next_deadline()?;
        if deadline > now {
            return None;
        }
        let Reverse((_, id)) = self.heap.pop()?;
        let timer = self.timers.get_mut(&id)?;
        let callback = timer.callback.take()?;
        if timer.period_ns == 0 {
            self.timers.remove(&id);
        } else {
            let mut next = timer.deadline.0.saturating_add(timer.period_ns);
            if next <= now.0 {
                let missed = (now.0 - next) / timer.period_ns + 1;
                next = next.saturating_add(missed.saturating_mul(timer.period_ns));
            }
            timer.deadline = Instant(next);
            self.heap.push(Reverse((Instant(next), id)));
        }
        Some((TimerId(id), callback))
    }

    /// Gives a periodic timer its callback back, unless it was cancelled
    /// while the callback ran.
    pub fn restore(&mut self, id: TimerId, callback: Callback) {
        if let Some(timer) = self.timers.get_mut(&id.0) {
            timer.callback = Some(callback);
        }
    }

    pub fn clear(&mut self) {
        self.heap.clear();
        self.timers.clear();
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use alloc::rc::Rc;
    use alloc::vec::Vec;
    use core::cell::RefCell;

    fn record(log: &Rc<RefCell<Vec<u32>>>, value: u32) -> Callback {
        let log = Rc::clone(log);
        Callback::Once(Box::new(move || log.borrow_mut().push(value)))
    }

    fn fire_all(queue: &mut TimerQueue, now: Instant) {
        while let Some((id, callback)) = queue.take_due(now) {
            match callback {
                Callback::Once(f) => f(),
                Callback::Every(mut f) => {
                    f();
                    queue.restore(id, Callback::Every(f));
                }
            }
        }
    }

    #[test]
    fn deadline_order_ties_by_creation_and_cancel() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let mut queue = TimerQueue::default();
        queue.add(Instant(30), 0, record(&log, 3));
        queue.add(Instant(10), 0, record(&log, 1));
        let cancelled = queue.add(Instant(20), 0, record(&log, 99));
        queue.add(Instant(20), 0, record(&log, 2));
        queue.add(Instant(20), 0, record(&log, 22));
        assert!(queue.cancel(cancelled));
        assert!(!queue.cancel(cancelled));
        assert_eq!(queue.next_deadline(), Some(Instant(10)));
        fire_all(&mut queue, Instant(25));
        assert_eq!(*log.borrow(), [1, 2, 22]);
        fire_all(&mut queue, Instant(100));
        assert_eq!(*log.borrow(), [1, 2, 22, 3]);
        assert_eq!(queue.next_deadline(), None);
    }

    #[test]
    fn periodic_timers_skip_missed_periods() {
        let count = Rc::new(RefCell::new(0));
        let counter = Rc::clone(&count);
        let mut queue = TimerQueue::default();
        let id = queue.add(
            Instant(10),
            10,
            Callback::Every(Box::new(move || *counter.borrow_mut() += 1)),
        );
        fire_all(&mut queue, Instant(10));
        assert_eq!(*count.borrow(), 1);
        assert_eq!(queue.next_deadline(), Some(Instant(20)));
        fire_all(&mut queue, Instant(55));
        assert_eq!(
            *count.borrow(),
            2,
            "late periodic timers fire once, not per missed period"
        );
        assert_eq!(queue.next_deadline(), Some(Instant(60)));
        assert!(queue.cancel(id));
        fire_all(&mut queue, Instant(1000));
        assert_eq!(*count.borrow(), 2);
    }
}
