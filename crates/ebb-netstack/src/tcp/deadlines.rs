//! When each connection's next timer is due, ordered so that the stack
//! finds the due ones and its own next wake-up without looking at every
//! connection.
//!
//! A min-heap of `(deadline, id)` with lazy deletion: re-arming pushes a
//! new entry and remembers it as the connection's current one; entries
//! that are no longer current are skipped when they reach the top. Exact
//! deadlines are kept (no wheel granularity), so the simulated-clock trace
//! tests see timers fire exactly when RFC 6298 and RFC 9293 say. Stale
//! entries are bounded: when they outnumber the live ones the heap is
//! rebuilt from the current deadlines.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;

use ebb_event::Instant;
use hashbrown::HashMap;

use super::flow_hash::FlowHash;

/// Connection deadlines, earliest first.
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The deadline each connection is armed for now.
    current: HashMap<u64, Instant, FlowHash>,
}

impl Deadlines {
    pub(crate) fn new(hash: FlowHash) -> Self {
        Deadlines {
            heap: BinaryHeap::new(),
            current: HashMap::with_hasher(hash),
        }
    }

    /// Connection `id`'s next timer is now `at` (`None`: no timer).
    pub(crate) fn arm(&mut self, id: u64, at: Option<Instant>) {
        match at {
            Some(at) => {
                if self.current.insert(id, at) != Some(at) {
                    self.heap.push(Reverse((at, id)));
                    self.compact_if_stale();
                }
            }
            None => {
                self.current.remove(&id);
            }
        }
        self.drop_stale_top();
    }

    /// Takes the connections whose deadline is at or before `now`, in
    /// deadline order; they are disarmed until re-armed.
    pub(crate) fn take_due(&mut self, now: Instant, due: &mut Vec<u64>) {
        while let Some(&Reverse((at, id))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            if self.current.get(&id) == Some(&at) {
                self.current.remove(&id);
                due.push(id);
            }
        }
        self.drop_stale_top();
    }

    /// The earliest deadline. Every change ends with a live entry on top
    /// (or none), so this needs no clean-up of its own.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|&Reverse((at, _))| at)
    }

    fn drop_stale_top(&mut self) {
        while let Some(&Reverse((at, id))) = self.heap.peek() {
            if self.current.get(&id) == Some(&at) {
                return;
            }
            self.heap.pop();
        }
    }

    fn compact_if_stale(&mut self) {
        if self.heap.len() > 2 * self.current.len() + 64 {
            self.heap = self
                .current
                .iter()
                .map(|(&id, &at)| Reverse((at, id)))
                .collect();
        }
    }

    /// Entries held, live and stale (for the bound test).
    #[cfg(test)]
    fn held(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant(ms * 1_000_000)
    }

    #[test]
    fn due_connections_come_out_in_deadline_order_and_rearming_replaces() {
        let mut d = Deadlines::new(FlowHash::with_seed(7));
        d.arm(1, Some(at(30)));
        d.arm(2, Some(at(10)));
        d.arm(3, Some(at(20)));
        d.arm(1, Some(at(5))); // re-armed earlier: the 30 ms entry is stale
        d.arm(3, None); // disarmed
        assert_eq!(d.next(), Some(at(5)));
        let mut due = Vec::new();
        d.take_due(at(25), &mut due);
        assert_eq!(due, [1, 2]);
        due.clear();
        d.take_due(at(100), &mut due);
        assert!(due.is_empty(), "stale and disarmed entries never fire");
        assert_eq!(d.next(), None);
    }

    #[test]
    fn rearming_the_same_deadline_adds_nothing_and_stale_entries_stay_bounded() {
        let mut d = Deadlines::new(FlowHash::with_seed(7));
        for round in 0..10_000u64 {
            d.arm(round % 4, Some(at(1_000 + round)));
            d.arm(round % 4, Some(at(1_000 + round)));
        }
        assert!(d.held() <= 2 * 4 + 64 + 1, "held {}", d.held());
        assert_eq!(d.next(), d.current.values().copied().min());
    }
}
