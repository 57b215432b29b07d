//! Process-wide binding of Ebb ids to representative types.
//!
//! The per-core table stores untyped pointers and the fast path cannot check
//! types, so soundness rests on this: within one address space an id is bound
//! to exactly one Ebb type, forever, and a table entry is only ever filled
//! for the type the id is bound to. Binding happens on the slow paths only
//! (creating an `EbbRef` with [`crate::EbbRef::bind`], a miss, installing).

use alloc::collections::BTreeMap;
use core::any::{type_name, TypeId};

use spin::RwLock;

use crate::{EbbError, EbbId};

static BINDINGS: RwLock<BTreeMap<EbbId, (TypeId, &'static str)>> = RwLock::new(BTreeMap::new());

/// Binds `id` to `T` if it is unbound; fails if it is bound to another type.
pub(crate) fn bind<T: 'static>(id: EbbId) -> Result<(), EbbError> {
    let wanted = TypeId::of::<T>();
    if let Some(&(bound, name)) = BINDINGS.read().get(&id) {
        return check(id, bound, name, wanted, type_name::<T>());
    }
    let mut bindings = BINDINGS.write();
    let &mut (bound, name) = bindings.entry(id).or_insert((wanted, type_name::<T>()));
    check(id, bound, name, wanted, type_name::<T>())
}

fn check(
    id: EbbId,
    bound: TypeId,
    bound_name: &'static str,
    wanted: TypeId,
    wanted_name: &'static str,
) -> Result<(), EbbError> {
    if bound == wanted {
        Ok(())
    } else {
        Err(EbbError::TypeMismatch {
            id,
            bound: bound_name,
            requested: wanted_name,
        })
    }
}
