//! epoll(7): an interest list of descriptors and the ones that may be
//! ready. An object's change puts its entries on the ready list
//! ([`Epoll::mark`]); `epoll_wait` looks at each listed entry's object,
//! reports what holds, and keeps a level-triggered entry listed (the next
//! wait looks again, as Linux does), drops an edge-triggered one until
//! its next change, and disarms a one-shot one until `EPOLL_CTL_MOD`.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::rc::{Rc, Weak};
use alloc::vec::Vec;
use core::cell::RefCell;

use ebb_posix::errno::{EEXIST, EINVAL, ENOENT};

use crate::notify::{Notifier, Pollable};
use crate::object::Object;
use crate::readiness::{ALWAYS, EPOLLET, EPOLLIN, EPOLLONESHOT};

/// epoll_ctl(2)'s operations.
pub const EPOLL_CTL_ADD: u32 = 1;
/// Remove a descriptor.
pub const EPOLL_CTL_DEL: u32 = 2;
/// Change a descriptor's events.
pub const EPOLL_CTL_MOD: u32 = 3;
/// `struct epoll_event` on x86-64: packed, `u32` events then `u64` data.
pub const EVENT_BYTES: usize = 12;

/// An entry's key: the descriptor and its object's identity
/// ([`Object::identity`]). Linux keys an entry by (file, fd), so a
/// descriptor closed while a duplicate keeps its object watched, then
/// reused for another object, can be added again.
pub(crate) type Key = (i32, usize);

/// One epoll set.
pub struct Epoll {
    set: RefCell<Set>,
    notifier: Notifier,
    me: Weak<Epoll>,
}

#[derive(Default)]
struct Set {
    entries: BTreeMap<Key, Entry>,
    /// Entries to look at, in order, each once.
    listed: VecDeque<Key>,
    is_listed: BTreeSet<Key>,
}

struct Entry {
    object: Object,
    events: u32,
    data: u64,
    disarmed: bool,
}

impl Epoll {
    /// An empty set.
    #[must_use]
    pub fn new() -> Rc<Epoll> {
        Rc::new_cyclic(|me| Epoll {
            set: RefCell::new(Set::default()),
            notifier: Notifier::default(),
            me: me.clone(),
        })
    }

    /// epoll_ctl(2): `EPOLL_CTL_ADD`, `_MOD` or `_DEL` of `fd` (naming
    /// `object`) with `events` and the caller's `data`.
    pub fn control(
        &self,
        op: u32,
        fd: i32,
        object: &Object,
        events: u32,
        data: u64,
    ) -> Result<(), isize> {
        if matches!(object, Object::Epoll(_)) {
            // An epoll set inside another: Linux allows it; nothing here
            // needs it yet.
            return Err(EINVAL);
        }
        let key = (fd, object.identity());
        match op {
            EPOLL_CTL_ADD => {
                {
                    let mut set = self.set.borrow_mut();
                    if set.entries.contains_key(&key) {
                        return Err(EEXIST);
                    }
                    set.entries.insert(
                        key,
                        Entry {
                            object: object.clone(),
                            events,
                            data,
                            disarmed: false,
                        },
                    );
                }
                if let Some(me) = self.me.upgrade() {
                    object.pollable().notifier().watch(&me, key);
                }
            }
            EPOLL_CTL_MOD => {
                let mut set = self.set.borrow_mut();
                let entry = set.entries.get_mut(&key).ok_or(ENOENT)?;
                entry.events = events;
                entry.data = data;
                entry.disarmed = false;
            }
            EPOLL_CTL_DEL => {
                let removed = self.set.borrow_mut().entries.remove(&key).ok_or(ENOENT)?;
                removed.object.pollable().notifier().unwatch(self, key);
                return Ok(());
            }
            _ => return Err(EINVAL),
        }
        // A new or changed entry may be ready now.
        self.mark(key);
        Ok(())
    }

    /// The entry `key`'s object changed: list it to be looked at.
    pub(crate) fn mark(&self, key: Key) {
        {
            let mut set = self.set.borrow_mut();
            if !set.is_listed.insert(key) {
                return;
            }
            set.listed.push_back(key);
        }
        self.notifier.notify();
    }

    /// The entry `key`'s object is gone (its last descriptor closed).
    pub(crate) fn forget(&self, key: Key) {
        self.set.borrow_mut().entries.remove(&key);
    }

    /// The set's last descriptor closed: it stops watching.
    pub(crate) fn release(&self) {
        let entries = core::mem::take(&mut self.set.borrow_mut().entries);
        for (key, entry) in entries {
            entry.object.pollable().notifier().unwatch(self, key);
        }
    }

    /// What holds now, at most `max` (events, data) pairs; empty when
    /// nothing is ready (the caller may then wait for [`crate::changed`]
    /// on the set).
    pub fn collect(&self, max: usize) -> Vec<(u32, u64)> {
        let mut ready = Vec::new();
        let rounds = self.set.borrow().listed.len();
        for _ in 0..rounds {
            if ready.len() >= max {
                break;
            }
            let looked = {
                let mut set = self.set.borrow_mut();
                let Some(key) = set.listed.pop_front() else {
                    break;
                };
                set.is_listed.remove(&key);
                set.entries
                    .get(&key)
                    .filter(|entry| !entry.disarmed)
                    .map(|entry| (key, entry.object.clone(), entry.events, entry.data))
            };
            let Some((key, object, events, data)) = looked else {
                continue;
            };
            // No borrow of the set here: a socket's readiness asks the
            // network stack.
            let holds = object.pollable().readiness() & (events | ALWAYS);
            if holds == 0 {
                continue;
            }
            ready.push((holds, data));
            let mut set = self.set.borrow_mut();
            if events & EPOLLONESHOT != 0 {
                if let Some(entry) = set.entries.get_mut(&key) {
                    entry.disarmed = true;
                }
            } else if events & EPOLLET == 0 && set.is_listed.insert(key) {
                set.listed.push_back(key);
            }
        }
        ready
    }
}

impl Pollable for Epoll {
    fn readiness(&self) -> u32 {
        if self.set.borrow().listed.is_empty() {
            0
        } else {
            EPOLLIN
        }
    }

    fn notifier(&self) -> &Notifier {
        &self.notifier
    }
}

/// `struct epoll_event`'s 12 bytes for (events, data).
#[must_use]
pub fn event_bytes(events: u32, data: u64) -> [u8; EVENT_BYTES] {
    let mut bytes = [0u8; EVENT_BYTES];
    bytes[..4].copy_from_slice(&events.to_ne_bytes());
    bytes[4..].copy_from_slice(&data.to_ne_bytes());
    bytes
}

/// (events, data) from `struct epoll_event`'s 12 bytes.
#[must_use]
pub fn parse_event(bytes: [u8; EVENT_BYTES]) -> (u32, u64) {
    let mut events = [0u8; 4];
    events.copy_from_slice(&bytes[..4]);
    let mut data = [0u8; 8];
    data.copy_from_slice(&bytes[4..]);
    (u32::from_ne_bytes(events), u64::from_ne_bytes(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventfd::EventFd;
    use crate::readiness::EPOLLOUT;

    fn counter() -> (Object, Rc<EventFd>) {
        let fd = Rc::new(EventFd::new(0, 0));
        (Object::EventFd(Rc::clone(&fd)), fd)
    }

    #[test]
    fn level_triggered_entries_are_reported_while_they_hold() {
        let epoll = Epoll::new();
        let (object, counter) = counter();
        epoll
            .control(EPOLL_CTL_ADD, 5, &object, EPOLLIN, 55)
            .unwrap();
        assert!(epoll.collect(8).is_empty());
        counter.write(&1u64.to_ne_bytes()).unwrap();
        assert_eq!(epoll.collect(8), [(EPOLLIN, 55)]);
        assert_eq!(epoll.collect(8), [(EPOLLIN, 55)]);
        counter.read(&mut [0u8; 8]).unwrap();
        assert!(epoll.collect(8).is_empty());
    }

    #[test]
    fn edge_triggered_and_one_shot_entries_report_a_change_once() {
        let epoll = Epoll::new();
        let (edge, edge_counter) = counter();
        let (once, once_counter) = counter();
        epoll
            .control(EPOLL_CTL_ADD, 1, &edge, EPOLLIN | EPOLLET, 1)
            .unwrap();
        epoll
            .control(EPOLL_CTL_ADD, 2, &once, EPOLLIN | EPOLLONESHOT, 2)
            .unwrap();
        edge_counter.write(&1u64.to_ne_bytes()).unwrap();
        once_counter.write(&1u64.to_ne_bytes()).unwrap();
        assert_eq!(epoll.collect(8), [(EPOLLIN, 1), (EPOLLIN, 2)]);
        assert!(epoll.collect(8).is_empty());
        edge_counter.write(&1u64.to_ne_bytes()).unwrap();
        once_counter.write(&1u64.to_ne_bytes()).unwrap();
        assert_eq!(epoll.collect(8), [(EPOLLIN, 1)]);
        epoll
            .control(EPOLL_CTL_MOD, 2, &once, EPOLLIN | EPOLLOUT, 3)
            .unwrap();
        assert_eq!(epoll.collect(8), [(EPOLLIN | EPOLLOUT, 3)]);
    }

    #[test]
    fn control_answers_as_epoll_ctl_does() {
        let epoll = Epoll::new();
        let (object, _counter) = counter();
        assert_eq!(
            epoll.control(EPOLL_CTL_MOD, 4, &object, EPOLLIN, 0),
            Err(ENOENT)
        );
        assert_eq!(epoll.control(EPOLL_CTL_DEL, 4, &object, 0, 0), Err(ENOENT));
        epoll
            .control(EPOLL_CTL_ADD, 4, &object, EPOLLOUT, 0)
            .unwrap();
        assert_eq!(
            epoll.control(EPOLL_CTL_ADD, 4, &object, EPOLLIN, 0),
            Err(EEXIST)
        );
        assert_eq!(epoll.control(9, 4, &object, EPOLLIN, 0), Err(EINVAL));
        let nested = Object::Epoll(Epoll::new());
        assert_eq!(
            epoll.control(EPOLL_CTL_ADD, 6, &nested, EPOLLIN, 0),
            Err(EINVAL)
        );
        epoll.control(EPOLL_CTL_DEL, 4, &object, 0, 0).unwrap();
        assert!(epoll.collect(8).is_empty());
    }

    #[test]
    fn entries_are_keyed_by_descriptor_and_object_as_linux_keys_them() {
        // fd 4 named `first`, was closed while a duplicate kept `first`
        // open and watched, and now names `second`.
        let epoll = Epoll::new();
        let (first, first_counter) = counter();
        let (second, second_counter) = counter();
        epoll.control(EPOLL_CTL_ADD, 4, &first, EPOLLIN, 1).unwrap();
        epoll
            .control(EPOLL_CTL_ADD, 4, &second, EPOLLIN, 2)
            .unwrap();
        first_counter.write(&1u64.to_ne_bytes()).unwrap();
        second_counter.write(&1u64.to_ne_bytes()).unwrap();
        assert_eq!(epoll.collect(8), [(EPOLLIN, 1), (EPOLLIN, 2)]);
        epoll.control(EPOLL_CTL_DEL, 4, &second, 0, 0).unwrap();
        assert_eq!(epoll.control(EPOLL_CTL_DEL, 4, &second, 0, 0), Err(ENOENT));
        assert_eq!(epoll.collect(8), [(EPOLLIN, 1)]);
        // The object's release (its last descriptor closed) drops its
        // entry whatever descriptor it was added under.
        crate::object::release(&first);
        assert!(epoll.collect(8).is_empty());
    }

    #[test]
    fn at_most_max_events_come_back_and_the_rest_wait_their_turn() {
        let epoll = Epoll::new();
        let counters: Vec<_> = (0..5).map(|_| counter()).collect();
        for (fd, (object, counter)) in (0i32..).zip(&counters) {
            counter.write(&1u64.to_ne_bytes()).unwrap();
            let data = u64::try_from(fd).unwrap();
            epoll
                .control(EPOLL_CTL_ADD, fd, object, EPOLLIN, data)
                .unwrap();
        }
        let first: Vec<u64> = epoll.collect(3).into_iter().map(|(_, d)| d).collect();
        assert_eq!(first, [0, 1, 2]);
        let next: Vec<u64> = epoll.collect(3).into_iter().map(|(_, d)| d).collect();
        assert_eq!(next, [3, 4, 0]);
    }

    #[test]
    fn events_round_trip_through_the_packed_layout() {
        let bytes = event_bytes(EPOLLIN | EPOLLET, 0x1122_3344_5566_7788);
        assert_eq!(
            parse_event(bytes),
            (EPOLLIN | EPOLLET, 0x1122_3344_5566_7788)
        );
    }
}
