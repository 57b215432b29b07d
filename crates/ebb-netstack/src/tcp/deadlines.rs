//! When each connection's next timer is due, ordered so that the stack
//! finds the due ones and its own next wake-up without looking at every
//! connection.
//!
//! A min-heap of `(deadline, id)` with lazy deletion, where a deadline
//! moving *later* costs no heap operation. That is the common move: RFC
//! 6298 §5.3 restarts the retransmission timer on every ACK of new data,
//! so on a busy connection each segment pushes its deadline out a little.
//! Each connection keeps the deadline its one live heap entry is queued
//! for and the deadline it wants (`Slot`); arming later (or disarming)
//! only updates what it wants, arming earlier pushes a new entry. When an
//! entry reaches the top and its connection wants a later time, it is
//! re-queued there instead of firing; a disarmed connection's entry just
//! lapses. So the stack may wake early (never late), and timers still
//! fire exactly at their deadlines (no wheel granularity), as the
//! simulated-clock trace tests check against RFC 6298 and RFC 9293.
//!
//! Entries no longer queued for (superseded by an earlier push, or of a
//! forgotten connection) are skipped when they reach the top, and are
//! bounded: when they outnumber the connections, the heap is rebuilt from
//! the wanted deadlines.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;

use ebb_event::Instant;
use hashbrown::hash_map::Entry;
use hashbrown::HashMap;

use super::flow_hash::FlowHash;

/// One connection's place in the heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    /// The deadline of the connection's live heap entry.
    queued: Instant,
    /// When its timer is due: never before `queued` (`None`: disarmed,
    /// the entry lapses when it reaches the top).
    wanted: Option<Instant>,
}

/// Connection deadlines, earliest first.
pub(crate) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    slots: HashMap<u64, Slot, FlowHash>,
}

impl Deadlines {
    pub(crate) fn new(hash: FlowHash) -> Self {
        Deadlines {
            heap: BinaryHeap::new(),
            slots: HashMap::with_hasher(hash),
        }
    }

    /// Connection `id`'s next timer is now `at` (`None`: no timer).
    pub(crate) fn arm(&mut self, id: u64, at: Option<Instant>) {
        let push = match (self.slots.entry(id), at) {
            (Entry::Occupied(mut slot), Some(at)) => {
                let slot = slot.get_mut();
                slot.wanted = Some(at);
                // Later (or the same): the queued entry wakes the stack
                // first and is moved on then.
                (at < slot.queued).then(|| {
                    slot.queued = at;
                    at
                })
            }
            (Entry::Occupied(mut slot), None) => {
                slot.get_mut().wanted = None;
                None
            }
            (Entry::Vacant(slot), Some(at)) => {
                slot.insert(Slot {
                    queued: at,
                    wanted: Some(at),
                });
                Some(at)
            }
            (Entry::Vacant(_), None) => None,
        };
        if let Some(at) = push {
            self.heap.push(Reverse((at, id)));
            self.compact_if_stale();
            self.drop_stale_top();
        }
    }

    /// Connection `id` is gone: its entries lapse.
    pub(crate) fn forget(&mut self, id: u64) {
        if self.slots.remove(&id).is_some() {
            self.drop_stale_top();
        }
    }

    /// Takes the connections whose deadline is at or before `now`, in
    /// deadline order; they are disarmed until re-armed.
    pub(crate) fn take_due(&mut self, now: Instant, due: &mut Vec<u64>) {
        // Called on every poll of the stack: nothing due costs one peek.
        if self.next().is_none_or(|at| at > now) {
            return;
        }
        while let Some(&Reverse((at, id))) = self.heap.peek() {
            if at > now {
                break;
            }
            self.heap.pop();
            let Some(slot) = self.slots.get_mut(&id) else {
                continue;
            };
            if slot.queued != at {
                continue; // superseded by an earlier entry
            }
            match slot.wanted {
                Some(wanted) if wanted == at => {
                    self.slots.remove(&id);
                    due.push(id);
                }
                // Moved later since it was queued: queued again there
                // (and taken in this loop if that is due too, so `due`
                // stays in deadline order).
                Some(wanted) => {
                    slot.queued = wanted;
                    self.heap.push(Reverse((wanted, id)));
                }
                None => {
                    self.slots.remove(&id);
                }
            }
        }
        self.drop_stale_top();
    }

    /// The earliest deadline, or an earlier time when a connection's
    /// deadline moved later or went away since it was queued (one early
    /// wake-up then). Every change ends with a queued entry on top (or
    /// none), so this needs no clean-up of its own.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|&Reverse((at, _))| at)
    }

    fn drop_stale_top(&mut self) {
        while let Some(&Reverse((at, id))) = self.heap.peek() {
            if self.slots.get(&id).is_some_and(|slot| slot.queued == at) {
                return;
            }
            self.heap.pop();
        }
    }

    /// Rebuilds the heap from the wanted deadlines when superseded entries
    /// outnumber the connections (each push is one entry, so this costs
    /// O(1) amortized per push).
    fn compact_if_stale(&mut self) {
        if self.heap.len() > 2 * self.slots.len() + 64 {
            self.slots.retain(|_, slot| slot.wanted.is_some());
            let mut entries = Vec::with_capacity(self.slots.len());
            for (&id, slot) in &mut self.slots {
                let at = slot.wanted.unwrap_or(slot.queued);
                slot.queued = at;
                entries.push(Reverse((at, id)));
            }
            self.heap = BinaryHeap::from(entries);
        }
    }

    /// Entries held, queued and superseded (for the bound tests).
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

    fn deadlines() -> Deadlines {
        Deadlines::new(FlowHash::with_seed(7))
    }

    /// Runs `d` as a stack would: wakes at each `next()` up to `until` and
    /// records (time, id) of every connection that came due.
    fn run_until(d: &mut Deadlines, until: Instant) -> (Vec<(Instant, u64)>, usize) {
        let (mut fired, mut wake_ups, mut due) = (Vec::new(), 0, Vec::new());
        while let Some(now) = d.next().filter(|&t| t <= until) {
            wake_ups += 1;
            d.take_due(now, &mut due);
            fired.extend(due.drain(..).map(|id| (now, id)));
        }
        (fired, wake_ups)
    }

    #[test]
    fn due_connections_come_out_in_deadline_order_and_rearming_replaces() {
        let mut d = deadlines();
        d.arm(1, Some(at(30)));
        d.arm(2, Some(at(10)));
        d.arm(3, Some(at(20)));
        d.arm(1, Some(at(5))); // re-armed earlier: the 30 ms entry is superseded
        d.arm(3, None); // disarmed
        assert_eq!(d.next(), Some(at(5)));
        let mut due = Vec::new();
        d.take_due(at(25), &mut due);
        assert_eq!(due, [1, 2]);
        due.clear();
        d.take_due(at(100), &mut due);
        assert!(due.is_empty(), "superseded and disarmed entries never fire");
        assert_eq!(d.next(), None);
    }

    #[test]
    fn arming_later_adds_no_entry() {
        let mut d = deadlines();
        d.arm(1, Some(at(100)));
        for ms in 101..10_000 {
            d.arm(1, Some(at(ms)));
        }
        assert_eq!(d.held(), 1);
        assert_eq!(
            d.next(),
            Some(at(100)),
            "the queued entry still wakes first"
        );
    }

    #[test]
    fn an_entry_moved_later_requeues_at_the_wanted_time_and_fires_only_then() {
        let mut d = deadlines();
        d.arm(1, Some(at(100)));
        d.arm(1, Some(at(250)));
        let mut due = Vec::new();
        d.take_due(at(100), &mut due);
        assert!(due.is_empty(), "woken early, nothing due");
        assert_eq!(d.next(), Some(at(250)));
        assert_eq!(d.held(), 1);
        d.take_due(at(249), &mut due);
        assert!(due.is_empty());
        d.take_due(at(250), &mut due);
        assert_eq!(due, [1]);
        assert_eq!(d.next(), None);
    }

    #[test]
    fn a_stack_woken_at_each_next_sees_every_timer_exactly_at_its_deadline() {
        let mut d = deadlines();
        d.arm(1, Some(at(100)));
        d.arm(2, Some(at(120)));
        d.arm(1, Some(at(300))); // later: lazily
        d.arm(2, Some(at(110))); // earlier: pushed
        d.arm(3, Some(at(50)));
        d.arm(3, Some(at(200)));
        d.arm(3, Some(at(150))); // later than queued, earlier than wanted
        let (fired, wake_ups) = run_until(&mut d, at(1_000));
        assert_eq!(fired, [(at(110), 2), (at(150), 3), (at(300), 1)]);
        assert_eq!(wake_ups, 5, "two early wake-ups: 50 and 100 ms");
    }

    #[test]
    fn several_requeued_entries_due_at_once_come_out_in_deadline_order() {
        let mut d = deadlines();
        d.arm(1, Some(at(10)));
        d.arm(2, Some(at(20)));
        d.arm(1, Some(at(40)));
        d.arm(2, Some(at(30)));
        let mut due = Vec::new();
        d.take_due(at(50), &mut due);
        assert_eq!(due, [2, 1]);
    }

    #[test]
    fn arming_earlier_fires_at_the_earlier_time() {
        let mut d = deadlines();
        d.arm(1, Some(at(500)));
        d.arm(1, Some(at(200)));
        assert_eq!(d.next(), Some(at(200)));
        let (fired, _) = run_until(&mut d, at(1_000));
        assert_eq!(fired, [(at(200), 1)], "fires once, at the earlier time");
        assert_eq!(d.held(), 0, "the superseded 500 ms entry is gone");
    }

    #[test]
    fn a_disarmed_connection_never_fires_and_rearming_it_takes_no_new_entry() {
        let mut d = deadlines();
        d.arm(1, Some(at(100)));
        d.arm(1, None);
        assert_eq!(d.held(), 1, "the entry lapses lazily");
        d.arm(1, Some(at(150))); // re-armed later than the lapsing entry
        assert_eq!(d.held(), 1);
        d.arm(2, Some(at(100)));
        d.arm(2, None);
        let (fired, wake_ups) = run_until(&mut d, at(1_000));
        assert_eq!(fired, [(at(150), 1)]);
        assert_eq!(wake_ups, 2, "one early wake-up at 100 ms");
        assert_eq!((d.held(), d.next()), (0, None));
        assert!(
            d.slots.is_empty(),
            "lapsed connections leave nothing behind"
        );
    }

    #[test]
    fn a_forgotten_connection_leaves_nothing() {
        let mut d = deadlines();
        d.arm(1, Some(at(100)));
        d.arm(2, Some(at(200)));
        d.forget(1);
        assert_eq!(d.next(), Some(at(200)));
        d.forget(2);
        assert_eq!((d.held(), d.next()), (0, None));
        let (fired, _) = run_until(&mut d, at(1_000));
        assert!(fired.is_empty());
    }

    #[test]
    fn rearming_the_same_deadline_adds_nothing_and_stale_entries_stay_bounded() {
        let mut d = deadlines();
        for round in 0..10_000u64 {
            // Ever earlier, so every arm pushes.
            let deadline = Some(at(20_000 - round));
            d.arm(round % 4, deadline);
            d.arm(round % 4, deadline);
            // Ever later: no entry at all.
            d.arm(4, Some(at(round)));
        }
        assert!(d.held() <= 2 * 5 + 64 + 1, "held {}", d.held());
        let earliest = d.slots.values().filter_map(|s| s.wanted).min();
        assert!(d.next().is_some() && d.next() <= earliest);
        let mut due = Vec::new();
        d.take_due(at(20_000), &mut due);
        due.sort_unstable();
        assert_eq!(due, [0, 1, 2, 3, 4]);
    }
}
