//! Identifiers: Ebbs, cores and nodes.

use core::fmt;

use crate::EbbError;

/// How many Ebb ids the per-core table covers. Ids are 32 bits on the wire
/// (so the format can grow), but this implementation hands out ids below this
/// bound only, so that [`crate::EbbRef::get`] needs no bound check: one load,
/// one test, one branch. 2^16 slots of 8 bytes = 512 KiB of per-core table,
/// touched (and so backed by memory) only where ids are used.
pub const MAX_EBB_IDS: u32 = 1 << 16;

/// Ids below this are reserved for the framework's own Ebbs (event manager,
/// allocators, network stack, ...), each a named constant in its crate.
pub const FIRST_LOCAL_ID: u32 = 256;

/// Ids from here up to [`MAX_EBB_IDS`] are global ids, handed out to nodes in
/// disjoint ranges by a [`crate::GlobalIdMap`].
pub const FIRST_GLOBAL_ID: u32 = MAX_EBB_IDS / 2;

/// A system-wide Ebb identifier.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EbbId(u32);

impl EbbId {
    /// Checks that `raw` lies in the id space the per-core table covers.
    pub const fn new(raw: u32) -> Result<Self, EbbError> {
        if raw == 0 || raw >= MAX_EBB_IDS {
            Err(EbbError::IdOutOfRange(raw))
        } else {
            Ok(EbbId(raw))
        }
    }

    /// For the framework's reserved ids, checked at compile time when used in
    /// a `const`: panics if `raw` is 0 or not below [`FIRST_LOCAL_ID`].
    pub const fn reserved(raw: u32) -> Self {
        assert!(
            raw != 0 && raw < FIRST_LOCAL_ID,
            "reserved Ebb ids are 1..256"
        );
        EbbId(raw)
    }

    /// The raw 32-bit value.
    pub const fn raw(self) -> u32 {
        self.0
    }

    /// Index into the per-core table; always `< MAX_EBB_IDS`.
    #[inline(always)]
    pub(crate) const fn slot(self) -> usize {
        self.0 as usize
    }

    /// Whether this id is from the global range.
    pub const fn is_global(self) -> bool {
        self.0 >= FIRST_GLOBAL_ID
    }
}

impl fmt::Debug for EbbId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EbbId({})", self.0)
    }
}

impl fmt::Display for EbbId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A core: an event loop on one CPU (native) or one pinned thread (hosted).
/// Cores of a node are numbered from 0.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct CoreId(pub usize);

impl fmt::Display for CoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A node: one address space (a native instance or a hosted process).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct NodeId(pub u32);

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_outside_the_table_are_rejected() {
        assert_eq!(EbbId::new(0), Err(EbbError::IdOutOfRange(0)));
        assert_eq!(
            EbbId::new(MAX_EBB_IDS),
            Err(EbbError::IdOutOfRange(MAX_EBB_IDS))
        );
        assert_eq!(EbbId::new(7).map(EbbId::raw), Ok(7));
        assert!(EbbId::new(FIRST_GLOBAL_ID).unwrap().is_global());
    }
}
