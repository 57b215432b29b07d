//! Which listening socket an accepted connection belongs to. The
//! network's accept callback must be `Send + Sync` (every core may accept
//! for a listener), so it carries a key, not the socket; each core keeps
//! its own listeners by key in a multicore Ebb, so the lookup is a local
//! one.

use alloc::collections::BTreeMap;
use alloc::rc::{Rc, Weak};
use core::cell::{Cell, RefCell};

use ebb_core::{CoreId, EbbError, EbbRef, Multicore, MulticoreEbb, MulticoreRoot};

use super::Socket;

/// One core's listening sockets.
#[derive(Default)]
pub struct CoreListeners {
    by_key: RefCell<BTreeMap<u64, Weak<Socket>>>,
    next_key: Cell<u64>,
}

impl MulticoreEbb for CoreListeners {
    type Root = ();

    fn create_rep(_root: &'static MulticoreRoot<Self>, _core: CoreId) -> Result<Self, EbbError> {
        Ok(CoreListeners::default())
    }
}

static EBB: spin::Once<EbbRef<Multicore<CoreListeners>>> = spin::Once::new();

/// This core's listeners (the Ebb is created on first use).
pub(crate) fn here() -> Result<&'static CoreListeners, EbbError> {
    let ebb = EBB.try_call_once(|| Multicore::create(()))?;
    ebb.get()
}

impl CoreListeners {
    /// Keeps `socket` under a new key.
    pub(crate) fn add(&self, socket: &Rc<Socket>) -> u64 {
        let key = self.next_key.get();
        self.next_key.set(key + 1);
        self.by_key.borrow_mut().insert(key, Rc::downgrade(socket));
        key
    }

    /// The socket listening under `key`, if it still does.
    pub(crate) fn find(&self, key: u64) -> Option<Rc<Socket>> {
        self.by_key.borrow().get(&key)?.upgrade()
    }

    /// Forgets `key` (the socket closed, or its listen failed).
    pub(crate) fn remove(&self, key: u64) {
        self.by_key.borrow_mut().remove(&key);
    }
}
