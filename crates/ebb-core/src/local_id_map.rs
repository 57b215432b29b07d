//! Per-node store from Ebb id to the Ebb's shared root data.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use core::any::{type_name, Any};

use spin::RwLock;

use crate::{EbbError, EbbId};

type Root = &'static (dyn Any + Send + Sync);

/// Id → root data, readable and writable from every core at once. It is
/// consulted by fault handlers (the slow path), so a reader-writer spin lock
/// over a B-tree is enough. Roots live as long as the node.
pub struct LocalIdMap {
    roots: RwLock<BTreeMap<EbbId, (Root, &'static str)>>,
}

impl LocalIdMap {
    pub(crate) fn new() -> Self {
        LocalIdMap {
            roots: RwLock::new(BTreeMap::new()),
        }
    }

    /// Stores `root` under `id` and returns it; fails if `id` has a root.
    pub fn insert<R: Any + Send + Sync>(&self, id: EbbId, root: R) -> Result<&'static R, EbbError> {
        let mut roots = self.roots.write();
        if roots.contains_key(&id) {
            return Err(EbbError::AlreadyRegistered(id));
        }
        let root: &'static R = Box::leak(Box::new(root));
        roots.insert(id, (root, type_name::<R>()));
        Ok(root)
    }

    /// The root stored under `id`, if it has type `R`.
    pub fn get<R: Any + Send + Sync>(&self, id: EbbId) -> Result<&'static R, EbbError> {
        let roots = self.roots.read();
        let (root, name) = roots.get(&id).ok_or(EbbError::Unregistered(id))?;
        let root: Root = *root;
        root.downcast_ref::<R>().ok_or(EbbError::TypeMismatch {
            id,
            bound: name,
            requested: type_name::<R>(),
        })
    }

    /// Whether `id` has root data.
    pub fn contains(&self, id: EbbId) -> bool {
        self.roots.read().contains_key(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_typed_and_unique() {
        let map = LocalIdMap::new();
        let id = EbbId::new(300).unwrap();
        assert_eq!(map.get::<u32>(id), Err(EbbError::Unregistered(id)));
        assert_eq!(*map.insert(id, 5u32).unwrap(), 5);
        assert_eq!(map.insert(id, 6u32), Err(EbbError::AlreadyRegistered(id)));
        assert_eq!(*map.get::<u32>(id).unwrap(), 5);
        assert!(matches!(
            map.get::<u64>(id),
            Err(EbbError::TypeMismatch { .. })
        ));
        assert!(map.contains(id));
    }
}
