//! The threads of a C program: their ids and what each asked to have
//! cleared when it ends (clone(2)'s `CLONE_CHILD_CLEARTID`,
//! set_tid_address(2)). Platform-neutral and tested on the host.

use alloc::collections::BTreeMap;

/// Thread ids and clear-on-exit addresses.
#[derive(Debug)]
pub struct ThreadTable {
    /// Live threads: id → address to clear and wake at exit (0: none).
    live: BTreeMap<i32, usize>,
    next: i32,
    /// The thread running now.
    current: i32,
}

/// How a thread's exit went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exited {
    /// The address to store 0 at and wake one waiter of (0: none).
    pub clear_tid: usize,
    /// It was the last thread: the program ends.
    pub last: bool,
}

impl ThreadTable {
    /// A program whose only thread, running, is `main` (the process id,
    /// as on Linux).
    #[must_use]
    pub const fn new(main: i32) -> ThreadTable {
        ThreadTable {
            live: BTreeMap::new(),
            next: main + 1,
            current: main,
        }
    }

    /// Registers the main thread (a `const` table cannot hold it yet).
    pub fn start(&mut self) {
        self.live.entry(self.current).or_insert(0);
    }

    /// A new thread's id, clearing `clear_tid` at exit.
    pub fn create(&mut self, clear_tid: usize) -> i32 {
        let tid = self.next;
        // Ids are never reused within a run; past i32::MAX, wrap below
        // the live ones (Linux reuses ids too).
        self.next = self.next.checked_add(1).unwrap_or(2);
        while self.live.contains_key(&self.next) {
            self.next = self.next.checked_add(1).unwrap_or(2);
        }
        self.live.insert(tid, clear_tid);
        tid
    }

    /// Forgets `tid`, made by [`ThreadTable::create`] for a thread that
    /// did not start.
    pub fn forget(&mut self, tid: i32) {
        self.live.remove(&tid);
    }

    /// The thread running now.
    #[must_use]
    pub fn current(&self) -> i32 {
        self.current
    }

    /// Records that `tid` runs now.
    pub fn switch_to(&mut self, tid: i32) {
        self.current = tid;
    }

    /// set_tid_address(2) of the current thread.
    pub fn set_clear_tid(&mut self, address: usize) -> i32 {
        self.live.insert(self.current, address);
        self.current
    }

    /// The current thread ends.
    pub fn exit_current(&mut self) -> Exited {
        let clear_tid = self.live.remove(&self.current).unwrap_or(0);
        Exited {
            clear_tid,
            last: self.live.is_empty(),
        }
    }

    /// How many threads live.
    #[must_use]
    pub fn live(&self) -> usize {
        self.live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_get_new_ids_and_the_last_exit_ends_the_program() {
        let mut table = ThreadTable::new(1);
        table.start();
        assert_eq!(table.set_clear_tid(0x1000), 1);
        let (a, b) = (table.create(0x2000), table.create(0));
        assert_eq!((a, b, table.live()), (2, 3, 3));
        table.switch_to(a);
        assert_eq!(
            table.exit_current(),
            Exited {
                clear_tid: 0x2000,
                last: false
            }
        );
        table.switch_to(1);
        assert_eq!(table.exit_current().clear_tid, 0x1000);
        table.switch_to(b);
        assert!(table.exit_current().last);
        assert_eq!(table.create(0), 4, "ids are not reused");
        let unstarted = table.create(0);
        table.forget(unstarted);
        assert_eq!(
            table.live(),
            1,
            "a forgotten id does not keep the program alive"
        );
    }

    #[test]
    fn ids_wrap_past_the_largest_around_live_ones() {
        let mut table = ThreadTable::new(i32::MAX - 1);
        table.start();
        assert_eq!(table.create(0), i32::MAX);
        assert_eq!(table.create(0), 2);
        assert_eq!(table.create(0), 3);
    }
}
