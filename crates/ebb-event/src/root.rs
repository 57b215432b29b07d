//! Node-wide state of the event layer.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use ebb_core::{CoreId, Node};

use crate::mailbox::{Mailbox, Message};
use crate::rcu::RcuShared;
use crate::{EventError, Platform, EVENT_MANAGER};

/// The root of the [`crate::EventManager`] Ebb: what every core of a node
/// shares (inboxes, the stop flag, RCU epochs) and the platform.
pub struct EventRoot {
    node: &'static Node,
    platform: &'static dyn Platform,
    mailboxes: Box<[Mailbox]>,
    stopping: AtomicBool,
    exit_code: AtomicI32,
    pub(crate) rcu: RcuShared,
}

/// Sets up the event layer of `node` on `platform`; call once per node,
/// before any core runs [`crate::run_core`].
pub fn start_node(
    node: &'static Node,
    platform: &'static dyn Platform,
) -> Result<&'static EventRoot, EventError> {
    let cores = node.cores();
    let root = EventRoot {
        node,
        platform,
        mailboxes: (0..cores)
            .map(|_| Mailbox::new())
            .collect::<Vec<_>>()
            .into_boxed_slice(),
        stopping: AtomicBool::new(false),
        exit_code: AtomicI32::new(0),
        rcu: RcuShared::new(cores),
    };
    Ok(node.local_ids().insert(EVENT_MANAGER.id(), root)?)
}

impl EventRoot {
    /// The node.
    pub fn node(&self) -> &'static Node {
        self.node
    }

    /// The platform.
    pub fn platform(&self) -> &'static dyn Platform {
        self.platform
    }

    /// How many cores the node has.
    pub fn cores(&self) -> usize {
        self.mailboxes.len()
    }

    pub(crate) fn check_core(&self, core: CoreId) -> Result<(), EventError> {
        if core.0 < self.cores() {
            Ok(())
        } else {
            Err(EventError::NoSuchCore {
                core,
                cores: self.cores(),
            })
        }
    }

    pub(crate) fn mailbox(&self, core: CoreId) -> &Mailbox {
        &self.mailboxes[core.0]
    }

    /// Sends `message` to `core` (which must exist) and wakes it if needed.
    pub(crate) fn send(&self, core: CoreId, message: Message) {
        if self.mailboxes[core.0].push(message) {
            self.platform.notify(core);
        }
    }

    /// Asks every core to leave its loop; the node's exit code becomes
    /// `code`. Fails if the node is already stopping. Usable from any
    /// thread (a signal watcher, a test).
    pub fn shutdown(&self, code: i32) -> Result<(), EventError> {
        if self.stopping.swap(true, Ordering::SeqCst) {
            return Err(EventError::AlreadyStopping);
        }
        self.exit_code.store(code, Ordering::SeqCst);
        for core in 0..self.cores() {
            self.platform.notify(CoreId(core));
        }
        Ok(())
    }

    /// Whether [`EventRoot::shutdown`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// The exit code given to [`EventRoot::shutdown`] (0 until then).
    pub fn exit_code(&self) -> i32 {
        self.exit_code.load(Ordering::SeqCst)
    }
}
