//! Read-copy-update for data every core reads (DESIGN §2).
//!
//! Events are never preempted, so a read-side section costs nothing: it is
//! a closure ([`read`]) that runs inside one event. Its guard cannot leave
//! the closure, so it can be held neither across `.await` nor across a
//! cooperative yield ([`crate::block_on`] refuses to yield inside it).
//!
//! Grace periods: the node keeps a global epoch and, per core, the epoch the
//! core saw at its last quiescent point, the top of its event loop. A halted
//! core publishes `IDLE` (quiescent for any epoch) and republishes a real
//! epoch before it runs anything. [`call_rcu`] takes a new epoch `g` for its
//! callback; the callback runs on its own core once every core has
//! published an epoch `>= g` or is idle, i.e. has passed a quiescent point
//! after the call. An idle core therefore never stalls a grace period.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use ebb_core::CoreId;

use crate::manager::manager;
use crate::EventError;

const IDLE: u64 = u64::MAX;

/// One cache line per core, so publishing an epoch does not bounce the
/// neighbours' lines.
#[repr(align(64))]
struct Seen(AtomicU64);

/// Node-wide RCU state.
pub(crate) struct RcuShared {
    epoch: AtomicU64,
    seen: Box<[Seen]>,
}

impl RcuShared {
    pub fn new(cores: usize) -> Self {
        RcuShared {
            epoch: AtomicU64::new(1),
            // Cores count as idle until their loop first turns.
            seen: (0..cores)
                .map(|_| Seen(AtomicU64::new(IDLE)))
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        }
    }

    /// The oldest epoch any running core may still be reading under.
    fn completed(&self) -> u64 {
        self.seen
            .iter()
            .map(|seen| seen.0.load(Ordering::SeqCst))
            .min()
            .unwrap_or(IDLE)
    }
}

/// A callback and the epoch every core must have reached before it runs.
type Pending = (u64, Box<dyn FnOnce()>);

/// One core's RCU state.
#[derive(Default)]
pub(crate) struct RcuLocal {
    pending: RefCell<VecDeque<Pending>>,
    read_depth: Cell<u32>,
}

impl RcuLocal {
    /// The top of the loop: publish the epoch, run callbacks whose grace
    /// period ended.
    pub fn quiescent(&self, core: CoreId, shared: &RcuShared) {
        let epoch = shared.epoch.load(Ordering::SeqCst);
        shared.seen[core.0].0.store(epoch, Ordering::SeqCst);
        if self.pending.borrow().is_empty() {
            return;
        }
        let completed = shared.completed();
        loop {
            let ready = {
                let mut pending = self.pending.borrow_mut();
                match pending.front() {
                    Some(&(needed, _)) if needed <= completed => pending.pop_front(),
                    _ => None,
                }
            };
            match ready {
                Some((_, callback)) => callback(),
                None => break,
            }
        }
    }

    pub fn go_idle(&self, core: CoreId, shared: &RcuShared) {
        shared.seen[core.0].0.store(IDLE, Ordering::SeqCst);
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.borrow().is_empty()
    }

    pub fn in_read_section(&self) -> bool {
        self.read_depth.get() > 0
    }

    /// At shutdown: callbacks whose grace period never ended are dropped
    /// without running (the data they would free is leaked, never freed
    /// under a reader).
    pub fn abandon(&self) {
        let pending = core::mem::take(&mut *self.pending.borrow_mut());
        core::mem::forget(pending);
    }
}

/// Runs `callback` on this core after a grace period: once every core of
/// the node has passed a quiescent point (or was idle) since this call.
/// Callbacks of one core run in the order they were registered.
pub fn call_rcu(callback: impl FnOnce() + 'static) -> Result<(), EventError> {
    let local = manager().ok_or(EventError::NotOnCore)?;
    let needed = local.root().rcu.epoch.fetch_add(1, Ordering::SeqCst) + 1;
    local
        .rcu
        .pending
        .borrow_mut()
        .push_back((needed, Box::new(callback)));
    Ok(())
}

/// Proof of being inside a read-side section; lives only inside [`read`].
pub struct ReadGuard {
    _not_send: PhantomData<*const ()>,
}

#[cfg(all(test, loom))]
impl ReadGuard {
    /// A guard for a loom model's reader thread (models run no event loop
    /// and never end a grace period, so every section is safe).
    pub(crate) fn for_model() -> Self {
        ReadGuard {
            _not_send: PhantomData,
        }
    }
}

/// Runs `body` as a read-side section. References obtained through the
/// guard cannot outlive the closure.
///
/// # Panics
///
/// Off a core: a thread that runs no event loop passes no quiescent points,
/// so grace periods could end under its reads.
#[track_caller]
pub fn read<R>(body: impl FnOnce(&ReadGuard) -> R) -> R {
    struct Depth<'a>(Option<&'a Cell<u32>>);
    impl Drop for Depth<'_> {
        fn drop(&mut self) {
            if let Some(depth) = self.0 {
                depth.set(depth.get() - 1);
            }
        }
    }
    let Some(local) = manager() else {
        panic!("ebb_event::rcu::read called on a thread that is not an Ebbflow core")
    };
    let depth = &local.rcu.read_depth;
    depth.set(depth.get() + 1);
    let _depth = Depth(Some(depth));
    body(&ReadGuard {
        _not_send: PhantomData,
    })
}

/// [`read`] if the calling thread is a core; `None` (without running
/// `body`) otherwise.
pub fn try_read<R>(body: impl FnOnce(&ReadGuard) -> R) -> Option<R> {
    manager()?;
    Some(read(body))
}

/// A pointer to a `T` that every core reads without locks and writers
/// replace; the old value is dropped after a grace period.
pub struct RcuCell<T: Send + Sync + 'static> {
    current: AtomicPtr<T>,
}

impl<T: Send + Sync + 'static> RcuCell<T> {
    /// A cell holding `value`.
    pub fn new(value: T) -> Self {
        RcuCell {
            current: AtomicPtr::new(Box::into_raw(Box::new(value))),
        }
    }

    /// The current value, valid for the read-side section.
    pub fn load<'g>(&'g self, _guard: &'g ReadGuard) -> &'g T {
        let current = self.current.load(Ordering::Acquire);
        // `current` came from `Box::into_raw`; it is freed only after a
        // grace period (which cannot end during this section) or by `Drop`,
        // which needs `&mut self` and so cannot run while `self` is borrowed.
        // SAFETY: so it is alive for `'g`.
        unsafe { &*current }
    }

    /// Installs `value`; the previous value is dropped on this core after a
    /// grace period. Writers must agree on one discipline among themselves
    /// (a lock or one owning core); readers need none.
    pub fn replace(&self, value: T) -> Result<(), EventError> {
        manager().ok_or(EventError::NotOnCore)?;
        let old = self
            .current
            .swap(Box::into_raw(Box::new(value)), Ordering::AcqRel);
        call_rcu(move || {
            // SAFETY: `old` came from `Box::into_raw`, was unlinked by the
            // swap above, and a grace period has passed, so no reader can
            // still hold a reference to it.
            drop(unsafe { Box::from_raw(old) });
        })
    }
}

impl<T: Send + Sync + 'static> Drop for RcuCell<T> {
    fn drop(&mut self) {
        let current = *self.current.get_mut();
        // SAFETY: we own the cell exclusively (`&mut self`), so no reader
        // borrows the current value; it came from `Box::into_raw`.
        drop(unsafe { Box::from_raw(current) });
    }
}
