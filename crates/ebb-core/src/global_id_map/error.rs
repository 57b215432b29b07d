//! Why a [`super::GlobalIdMap`] operation failed.

use alloc::string::String;
use core::fmt;

use super::Lease;

/// Why a map operation failed. Each variant's message is a sentence for
/// the user; callers match on the variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapError {
    /// The store could not be reached (etcd down, the hosted node lost)
    /// before the operation was sent, or the operation only reads: nothing
    /// was written. Retrying later may succeed.
    Unreachable {
        /// Where the store was looked for (`etcd at 127.0.0.1:2379`,
        /// `the hosted node 0`).
        endpoint: String,
        /// What went wrong, as the transport said it.
        reason: String,
    },
    /// The key (or prefix) is not one the map accepts.
    InvalidKey {
        /// The key, cut to 64 characters.
        key: String,
        /// What is wrong with it.
        why: String,
    },
    /// The global id space has fewer ids left than were asked for.
    IdsExhausted {
        /// How many were asked for.
        wanted: u32,
        /// How many are left.
        left: u32,
    },
    /// The lease expired (or was revoked, or never existed): its entries
    /// are gone.
    LeaseExpired(Lease),
    /// A stored value that the map itself keeps (the id counter) does not
    /// decode: somebody else wrote it. Nothing was changed.
    Corrupt {
        /// The key.
        key: String,
        /// What is wrong with the value.
        why: String,
    },
    /// The store refused the operation (a remote map's error reply, a
    /// request too large).
    Refused(String),
    /// The watch ended: the store compacted past it or shut down; watch
    /// again and list to catch up.
    WatchEnded(String),
    /// An operation that writes was sent, but its answer never came (no
    /// reply in time, the connection or the store's node lost meanwhile):
    /// it may or may not have been applied. Read the value (or compare
    /// and swap) before doing it again.
    OutcomeUnknown {
        /// Where the store was (as for [`MapError::Unreachable`]).
        endpoint: String,
        /// What went wrong, as the transport said it.
        reason: String,
    },
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MapError::Unreachable { endpoint, reason } => write!(
                f,
                "the global id map ({endpoint}) is unreachable: {reason}; nothing was written"
            ),
            MapError::InvalidKey { key, why } => write!(f, "invalid map key {key:?}: {why}"),
            MapError::IdsExhausted { wanted, left } => {
                write!(f, "{wanted} global Ebb ids asked for, only {left} are left")
            }
            MapError::LeaseExpired(lease) => write!(
                f,
                "lease {:#x} expired or was revoked: its entries are gone",
                lease.0
            ),
            MapError::Corrupt { key, why } => {
                write!(f, "the map's own entry {key:?} is corrupt: {why}")
            }
            MapError::Refused(why) => write!(f, "the global id map refused: {why}"),
            MapError::WatchEnded(why) => write!(f, "the watch ended: {why}"),
            MapError::OutcomeUnknown { endpoint, reason } => write!(
                f,
                "the global id map ({endpoint}) did not answer: {reason}; the operation may or \
                 may not have been applied"
            ),
        }
    }
}

impl core::error::Error for MapError {}
