//! Idle handlers: run once per loop turn, after the bounded event batch.

use alloc::boxed::Box;
use alloc::vec::Vec;

/// Names an idle handler so it can be removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IdleId(usize);

enum Slot {
    Free,
    Ready(Box<dyn FnMut()>),
    /// The handler is running; `removed` if it was removed meanwhile.
    Running {
        removed: bool,
    },
}

#[derive(Default)]
pub(crate) struct IdleHandlers {
    slots: Vec<Slot>,
    live: usize,
}

impl IdleHandlers {
    pub fn add(&mut self, handler: Box<dyn FnMut()>) -> IdleId {
        self.live += 1;
        if let Some(index) = self
            .slots
            .iter()
            .position(|slot| matches!(slot, Slot::Free))
        {
            self.slots[index] = Slot::Ready(handler);
            IdleId(index)
        } else {
            self.slots.push(Slot::Ready(handler));
            IdleId(self.slots.len() - 1)
        }
    }

    pub fn remove(&mut self, id: IdleId) -> bool {
        let Some(slot) = self.slots.get_mut(id.0) else {
            return false;
        };
        match slot {
            Slot::Ready(_) => *slot = Slot::Free,
            Slot::Running { removed: false } => *slot = Slot::Running { removed: true },
            Slot::Free | Slot::Running { removed: true } => return false,
        }
        self.live -= 1;
        true
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn len_slots(&self) -> usize {
        self.slots.len()
    }

    /// Takes handler `index` out to run it (so it may add or remove
    /// handlers, itself included).
    pub fn start(&mut self, index: usize) -> Option<Box<dyn FnMut()>> {
        let slot = self.slots.get_mut(index)?;
        match core::mem::replace(slot, Slot::Running { removed: false }) {
            Slot::Ready(handler) => Some(handler),
            other => {
                *slot = other;
                None
            }
        }
    }

    pub fn finish(&mut self, index: usize, handler: Box<dyn FnMut()>) {
        let slot = &mut self.slots[index];
        *slot = match slot {
            Slot::Running { removed: true } => Slot::Free,
            _ => Slot::Ready(handler),
        };
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.live = 0;
    }
}
