//! Which core and node the calling thread is.

use core::marker::PhantomData;

use crate::table::{self, Context};
use crate::{CoreId, EbbError, Node};

/// Makes the calling thread core `core` of `node` until the guard drops.
/// Platforms call this once per core before running its event loop.
///
/// Fails if the thread is already a core, or if `core` is not a core of
/// `node`.
pub fn enter_core(core: CoreId, node: &'static Node) -> Result<CoreGuard, EbbError> {
    if core.0 >= node.cores() {
        return Err(EbbError::NoSuchCore {
            core,
            cores: node.cores(),
        });
    }
    let current = table::context();
    if !current.node.is_null() {
        return Err(EbbError::AlreadyCore(CoreId(current.core)));
    }
    table::set_context(Context {
        core: core.0,
        node: node as *const Node,
    });
    Ok(CoreGuard {
        _not_send: PhantomData,
    })
}

/// While alive, the thread that created it is a core. Dropping it forgets
/// every cached representative of this thread (they stay allocated: a
/// representative lives as long as its node) and makes the thread a plain
/// thread again.
#[must_use = "the thread stops being a core when the guard drops"]
pub struct CoreGuard {
    _not_send: PhantomData<*const ()>,
}

impl Drop for CoreGuard {
    fn drop(&mut self) {
        table::clear();
        table::set_context(Context::NONE);
    }
}

/// The calling thread's core, if it is one.
pub fn current_core() -> Option<CoreId> {
    let context = table::context();
    (!context.node.is_null()).then_some(CoreId(context.core))
}

/// The node of the calling core, if it is one.
pub fn current_node() -> Option<&'static Node> {
    let context = table::context();
    // SAFETY: `enter_core` only stores pointers made from `&'static Node`.
    unsafe { context.node.as_ref() }
}
