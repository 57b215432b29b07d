//! Errors of the event layer.

use core::fmt;

use ebb_core::{CoreId, EbbError};

/// Why an event operation failed; each variant's message is a sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EventError {
    /// The core number is not a core of this node.
    NoSuchCore {
        /// The core asked for.
        core: CoreId,
        /// How many cores the node has.
        cores: usize,
    },
    /// The calling thread is not running an event loop.
    NotOnCore,
    /// `shutdown` was called again while the node is already stopping.
    AlreadyStopping,
    /// `block_on` was called outside a stackful event.
    NotStackful,
    /// `end_stackful` was called in an event that may not end early (one
    /// of `spawn_stackful`, whose handle promises a result).
    NotEndable,
    /// `block_on` was called inside an RCU read-side section, which must
    /// not span a yield.
    InsideRcuRead,
    /// The component model refused.
    Ebb(EbbError),
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::NoSuchCore { core, cores } => write!(
                f,
                "cannot spawn on core {core}: this node has {cores} cores (0..{cores})"
            ),
            EventError::NotOnCore => {
                f.write_str("this thread is not an Ebbflow core running an event loop")
            }
            EventError::AlreadyStopping => {
                f.write_str("the node is already shutting down; shutdown was called twice")
            }
            EventError::NotStackful => f.write_str(
                "block_on works only inside a stackful event (see spawn_stackful); use .await in tasks",
            ),
            EventError::NotEndable => f.write_str(
                "end_stackful ends only events of spawn_stackful_on; this one must return its result",
            ),
            EventError::InsideRcuRead => {
                f.write_str("cannot block inside an RCU read-side section")
            }
            EventError::Ebb(error) => error.fmt(f),
        }
    }
}

impl core::error::Error for EventError {}

impl From<EbbError> for EventError {
    fn from(error: EbbError) -> Self {
        match error {
            EbbError::NotOnCore => EventError::NotOnCore,
            EbbError::NoSuchCore { core, cores } => EventError::NoSuchCore { core, cores },
            other => EventError::Ebb(other),
        }
    }
}
