//! Errors of the component model.

use core::fmt;

use crate::{CoreId, EbbId};

/// Why an Ebb operation failed. Each variant's message is a sentence for
/// the user; callers match on the variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EbbError {
    /// The calling thread is not a core of any node, so it has no
    /// representatives (EbbRefs resolve only on a core's event loop).
    NotOnCore,
    /// No Ebb with this id was registered on this node.
    Unregistered(EbbId),
    /// The id is bound to a different type than the one requested.
    TypeMismatch {
        /// The id.
        id: EbbId,
        /// The type the id is bound to.
        bound: &'static str,
        /// The type that was asked for.
        requested: &'static str,
    },
    /// The raw id is 0 or outside the id space the per-core table covers.
    IdOutOfRange(u32),
    /// An id allocator has no ids left.
    IdsExhausted(&'static str),
    /// Root data was registered twice under one id.
    AlreadyRegistered(EbbId),
    /// The thread is already a core (of this or another node).
    AlreadyCore(CoreId),
    /// This core already has a representative for the id.
    AlreadyInstalled(EbbId),
    /// The core number is not a core of this node.
    NoSuchCore {
        /// The core asked for.
        core: CoreId,
        /// How many cores the node has.
        cores: usize,
    },
    /// The Ebb's own fault handler failed.
    Fault {
        /// The id.
        id: EbbId,
        /// What the handler said.
        reason: &'static str,
    },
}

impl fmt::Display for EbbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EbbError::NotOnCore => f.write_str(
                "this thread is not an Ebbflow core: EbbRefs resolve only on a core's event loop",
            ),
            EbbError::Unregistered(id) => {
                write!(f, "Ebb {id} was never registered on this node")
            }
            EbbError::TypeMismatch {
                id,
                bound,
                requested,
            } => write!(
                f,
                "Ebb {id} is bound to type {bound}, not to the requested {requested}"
            ),
            EbbError::IdOutOfRange(raw) => write!(
                f,
                "Ebb id {raw} is outside the id space (1..{})",
                crate::MAX_EBB_IDS
            ),
            EbbError::IdsExhausted(which) => write!(f, "no {which} Ebb ids are left"),
            EbbError::AlreadyRegistered(id) => {
                write!(f, "Ebb {id} already has root data on this node")
            }
            EbbError::AlreadyCore(core) => {
                write!(f, "this thread is already core {core} of a node")
            }
            EbbError::AlreadyInstalled(id) => {
                write!(f, "this core already has a representative for Ebb {id}")
            }
            EbbError::NoSuchCore { core, cores } => write!(
                f,
                "core {core} does not exist: this node has {cores} cores (0..{cores})"
            ),
            EbbError::Fault { id, reason } => {
                write!(f, "the fault handler of Ebb {id} failed: {reason}")
            }
        }
    }
}

impl core::error::Error for EbbError {}
