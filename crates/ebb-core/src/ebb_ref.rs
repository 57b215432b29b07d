//! `EbbRef<T>`: the handle through which every Ebb is used.

use core::fmt;
use core::marker::PhantomData;

use crate::table::{self, Context};
use crate::{registry, CoreId, EbbError, EbbId, Node};

/// An Ebb type: names the representative type and says how a core that has
/// none gets one.
pub trait Ebb: 'static {
    /// The per-core representative, used through `&self`.
    type Rep: 'static;

    /// Runs on a core whose table has no representative for `ctx.id`:
    /// builds (or finds) one. The result is cached in the core's table, so
    /// this runs at most once per core per Ebb, unless it fails.
    ///
    /// The representative must stay valid for as long as its node lives
    /// (typically it is leaked, or kept in the Ebb's root).
    fn fault(ctx: &FaultContext<'_>) -> Result<&'static Self::Rep, EbbError>;
}

/// What a fault handler knows: which Ebb, on which core of which node.
pub struct FaultContext<'a> {
    /// The Ebb that missed.
    pub id: EbbId,
    /// The core that missed.
    pub core: CoreId,
    /// That core's node.
    pub node: &'a Node,
}

/// A `Copy` handle of one 32-bit id; [`EbbRef::get`] resolves the calling
/// core's representative.
pub struct EbbRef<T: Ebb> {
    id: EbbId,
    // `fn() -> T`: the handle owns no `T`, and is `Send`/`Sync`/`Copy` for
    // every `T`.
    _ebb: PhantomData<fn() -> T>,
}

impl<T: Ebb> EbbRef<T> {
    /// A handle for `id`, binding `id` to the Ebb type `T` in this address
    /// space. Fails if `id` is already bound to another type.
    pub fn bind(id: EbbId) -> Result<Self, EbbError> {
        registry::bind::<T>(id)?;
        Ok(EbbRef {
            id,
            _ebb: PhantomData,
        })
    }

    /// A handle for a reserved id without binding it now, for `const`
    /// handles of the framework's own Ebbs. Binding happens on the first
    /// miss or install, which fails with [`EbbError::TypeMismatch`] if the id
    /// was bound to another type.
    ///
    /// # Safety
    ///
    /// `id` must never be used with another Ebb type in this address space
    /// (use a reserved id that belongs to `T`'s crate): a table entry filled
    /// through another type would be read here as `T::Rep`.
    pub const unsafe fn reserved(id: EbbId) -> Self {
        EbbRef {
            id,
            _ebb: PhantomData,
        }
    }

    /// The id.
    pub const fn id(self) -> EbbId {
        self.id
    }

    /// This core's representative. The fast path is one load from the
    /// per-core table and one branch on null; a miss runs `T::fault`.
    #[inline(always)]
    pub fn get(self) -> Result<&'static T::Rep, EbbError> {
        let rep = table::load(self.id.slot());
        if !rep.is_null() {
            // Entries for this id are only filled by `miss`/`install`, which
            // check the id's type binding (`T`: made by `bind`, or `reserved`,
            // whose contract forbids other types) before storing.
            // SAFETY: so `rep` is a `&'static T::Rep` stored for this id.
            Ok(unsafe { &*rep.cast::<T::Rep>() })
        } else {
            self.miss()
        }
    }

    /// Like [`EbbRef::get`] for Ebbs whose fault handler cannot fail once
    /// the node is up; panics with the error's message otherwise.
    #[inline(always)]
    #[track_caller]
    pub fn rep(self) -> &'static T::Rep {
        match self.get() {
            Ok(rep) => rep,
            Err(error) => fail(self.id, &error),
        }
    }

    #[cold]
    #[inline(never)]
    fn miss(self) -> Result<&'static T::Rep, EbbError> {
        let context = table::context();
        // SAFETY: contexts only hold pointers made from `&'static Node`.
        let node = unsafe { context.node.as_ref() }.ok_or(EbbError::NotOnCore)?;
        registry::bind::<T>(self.id)?;
        let fault = FaultContext {
            id: self.id,
            core: CoreId(context.core),
            node,
        };
        let rep = T::fault(&fault)?;
        table::store(self.id.slot(), (rep as *const T::Rep).cast());
        Ok(rep)
    }

    /// Installs `rep` as this core's representative without a fault, for
    /// platforms that build representatives up front (the event manager).
    /// Fails off a core, or if this core already has one.
    pub fn install(self, rep: &'static T::Rep) -> Result<(), EbbError> {
        let context: Context = table::context();
        if context.node.is_null() {
            return Err(EbbError::NotOnCore);
        }
        registry::bind::<T>(self.id)?;
        if !table::load(self.id.slot()).is_null() {
            return Err(EbbError::AlreadyInstalled(self.id));
        }
        table::store(self.id.slot(), (rep as *const T::Rep).cast());
        Ok(())
    }
}

#[cold]
#[track_caller]
fn fail(id: EbbId, error: &EbbError) -> ! {
    panic!("EbbRef({id}).rep(): {error}")
}

impl<T: Ebb> Clone for EbbRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: Ebb> Copy for EbbRef<T> {}

impl<T: Ebb> PartialEq for EbbRef<T> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl<T: Ebb> Eq for EbbRef<T> {}

impl<T: Ebb> fmt::Debug for EbbRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EbbRef<{}>({})", core::any::type_name::<T>(), self.id)
    }
}
