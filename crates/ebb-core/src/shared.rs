//! Shared Ebbs: one representative, the root itself, for every core.

use core::any::Any;
use core::marker::PhantomData;

use crate::{current_node, Ebb, EbbError, EbbRef, FaultContext, Node};

/// The Ebb type of a shared Ebb whose root (and only representative) is an
/// `R`. `R` is used from every core at once, so it must be `Sync`.
///
/// ```ignore
/// let stats: EbbRef<Shared<Stats>> = Shared::create(Stats::default())?;
/// stats.get()?.hits.fetch_add(1, Relaxed);
/// ```
pub struct Shared<R>(PhantomData<fn() -> R>);

impl<R: Any + Send + Sync> Shared<R> {
    /// Creates a shared Ebb on the calling core's node with a fresh local id.
    pub fn create(root: R) -> Result<EbbRef<Self>, EbbError> {
        Self::create_on(current_node().ok_or(EbbError::NotOnCore)?, root)
    }

    /// Creates a shared Ebb on `node` with a fresh local id.
    pub fn create_on(node: &'static Node, root: R) -> Result<EbbRef<Self>, EbbError> {
        let id = node.allocator().allocate_local()?;
        let ebb = EbbRef::bind(id)?;
        node.local_ids().insert(id, root)?;
        Ok(ebb)
    }
}

impl<R: Any + Send + Sync> Ebb for Shared<R> {
    type Rep = R;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static R, EbbError> {
        ctx.node.local_ids().get::<R>(ctx.id)
    }
}
