//! Multicore Ebbs: one representative per core, created lazily on the cores
//! that use the Ebb, and a root shared by all of them that links them.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use crate::{current_node, CoreId, Ebb, EbbError, EbbRef, FaultContext, Node};

/// A type whose values are the per-core representatives of a multicore Ebb.
pub trait MulticoreEbb: Sized + 'static {
    /// Data shared by all representatives (read from every core).
    type Root: Send + Sync + 'static;

    /// Builds the representative for `core`; runs once per core, on that
    /// core, the first time the core resolves the Ebb.
    fn create_rep(root: &'static MulticoreRoot<Self>, core: CoreId) -> Result<Self, EbbError>;
}

/// The root of a multicore Ebb: the user's shared data and a link to every
/// representative created so far.
pub struct MulticoreRoot<E: MulticoreEbb> {
    shared: E::Root,
    reps: Box<[AtomicPtr<E>]>,
}

impl<E: MulticoreEbb> MulticoreRoot<E> {
    /// The shared data.
    pub fn shared(&self) -> &E::Root {
        &self.shared
    }

    /// The cores that have a representative, in order.
    pub fn cores_with_reps(&self) -> impl Iterator<Item = CoreId> + '_ {
        self.reps
            .iter()
            .enumerate()
            .filter(|(_, rep)| !rep.load(Ordering::Acquire).is_null())
            .map(|(core, _)| CoreId(core))
    }

    /// The representative of `core`, if it has one. Only for thread-safe
    /// representatives: others are touched only by their own core, so reach
    /// them by sending that core an event.
    pub fn rep_on(&self, core: CoreId) -> Option<&'static E>
    where
        E: Sync,
    {
        let rep = self.reps.get(core.0)?.load(Ordering::Acquire);
        // SAFETY: non-null entries come from `Box::leak` in `fault` and are
        // never freed; `E: Sync` makes sharing them across cores sound.
        unsafe { rep.as_ref() }
    }
}

/// The Ebb type of a multicore Ebb whose representatives are `E`s.
pub struct Multicore<E>(PhantomData<fn() -> E>);

impl<E: MulticoreEbb> Multicore<E> {
    /// Creates a multicore Ebb on the calling core's node with a fresh id.
    pub fn create(shared: E::Root) -> Result<EbbRef<Self>, EbbError> {
        Self::create_on(current_node().ok_or(EbbError::NotOnCore)?, shared)
    }

    /// Creates a multicore Ebb on `node` with a fresh local id.
    pub fn create_on(node: &'static Node, shared: E::Root) -> Result<EbbRef<Self>, EbbError> {
        let id = node.allocator().allocate_local()?;
        let ebb = EbbRef::bind(id)?;
        let reps = (0..node.cores())
            .map(|_| AtomicPtr::new(ptr::null_mut()))
            .collect::<Vec<_>>()
            .into_boxed_slice();
        node.local_ids()
            .insert(id, MulticoreRoot::<E> { shared, reps })?;
        Ok(ebb)
    }

    /// The root of `ebb` on the calling core's node.
    pub fn root(ebb: EbbRef<Self>) -> Result<&'static MulticoreRoot<E>, EbbError> {
        let node = current_node().ok_or(EbbError::NotOnCore)?;
        node.local_ids().get::<MulticoreRoot<E>>(ebb.id())
    }
}

impl<E: MulticoreEbb> Ebb for Multicore<E> {
    type Rep = E;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static E, EbbError> {
        let root = ctx.node.local_ids().get::<MulticoreRoot<E>>(ctx.id)?;
        let slot = root.reps.get(ctx.core.0).ok_or(EbbError::NoSuchCore {
            core: ctx.core,
            cores: root.reps.len(),
        })?;
        let rep: &'static mut E = Box::leak(Box::new(E::create_rep(root, ctx.core)?));
        slot.store(rep, Ordering::Release);
        Ok(rep)
    }
}
