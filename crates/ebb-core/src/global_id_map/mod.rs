//! The application-wide store shared by all nodes (DESIGN §1, §5).
//!
//! One trait, [`GlobalIdMap`], with three kinds of implementation:
//! * [`InProcessGlobalIdMap`] here, the default for a single node and for
//!   nodes that share one address space (tests);
//! * a map on etcd, for a cluster (hosted only: it needs a gRPC client);
//! * a map that ships each operation over the Messenger to the hosted
//!   node's map (native nodes: there is no etcd client in the guest, as in
//!   EbbRT).
//!
//! Every operation is asynchronous and fallible because the last two cross
//! a network: a caller on a core's event loop awaits the future, and an
//! unreachable store is an error naming where it was looked for
//! ([`MapError::Unreachable`]), never a hang or a silent drop.
//!
//! Keys are `/`-separated paths relative to the application's prefix (the
//! etcd map puts them under `/ebbflow/APP/`); [`check_key`] says which are
//! valid. Well-known keys: [`ebb_key`] for an Ebb's entry, [`NODES`] for
//! node registrations, [`RESERVED`] for the map's own (not writable).

mod error;
mod in_front;
mod in_process;
mod watch;

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::future::Future;
use core::ops::Range;
use core::pin::Pin;
use core::time::Duration;

pub use error::MapError;
pub use in_front::MapInFront;
pub use in_process::{InProcessGlobalIdMap, WATCH_QUEUE_LIMIT};
pub use watch::{Change, NextChange, Watch, WatchStream};

use crate::{EbbId, NodeId};

/// What every [`GlobalIdMap`] operation returns: a future that may be
/// awaited from any core (it is `Send`).
pub type MapFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, MapError>> + Send + 'a>>;

/// A lease: entries written under it are deleted when it expires, that is
/// when nobody kept it alive for its time to live (a node registration's
/// lease is kept alive by the node, or for a native node by its frontend,
/// while the node lives).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lease(pub i64);

/// Whether a compare-and-swap wrote, and if not what it found instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Swap {
    /// The key held the expected value (or was absent, if absence was
    /// expected); the new value is stored.
    Done,
    /// The key held something else: the value found (`None`: absent).
    Conflict(Option<Vec<u8>>),
}

/// Application-wide store from key to bytes, shared by every node of the
/// application, and the authority that hands out ranges of global Ebb ids
/// (so that nodes can then allocate ids without asking anyone).
pub trait GlobalIdMap: Send + Sync {
    /// The value under `key`, if any.
    fn get<'a>(&'a self, key: &'a str) -> MapFuture<'a, Option<Vec<u8>>>;

    /// Stores `value` under `key`, replacing what was there; with a lease,
    /// the entry is deleted when the lease expires.
    fn set<'a>(&'a self, key: &'a str, value: Vec<u8>, lease: Option<Lease>) -> MapFuture<'a, ()>;

    /// Deletes `key`; whether it was there.
    fn delete<'a>(&'a self, key: &'a str) -> MapFuture<'a, bool>;

    /// Stores `new` under `key` only if the key holds `expected` (`None`:
    /// only if it is absent), atomically.
    fn compare_and_swap<'a>(
        &'a self,
        key: &'a str,
        expected: Option<Vec<u8>>,
        new: Vec<u8>,
    ) -> MapFuture<'a, Swap>;

    /// Every entry whose key starts with `prefix`, in key order.
    fn list<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Vec<(String, Vec<u8>)>>;

    /// Reserves `len` consecutive global ids for `node`. Ranges handed out
    /// never overlap, whoever asks and however many ask at once.
    fn reserve_range(&self, node: NodeId, len: u32) -> MapFuture<'_, Range<u32>>;

    /// A new lease living `ttl` unless kept alive.
    fn grant_lease(&self, ttl: Duration) -> MapFuture<'_, Lease>;

    /// Renews `lease` for another time to live.
    ///
    /// Fails with [`MapError::LeaseExpired`] when it expired already (its
    /// entries are gone: the holder must register again).
    fn keep_alive(&self, lease: Lease) -> MapFuture<'_, ()>;

    /// Ends `lease` now, deleting its entries.
    fn revoke(&self, lease: Lease) -> MapFuture<'_, ()>;

    /// The changes to keys starting with `prefix` from now on.
    fn watch<'a>(&'a self, prefix: &'a str) -> MapFuture<'a, Watch>;
}

/// Where the entry of Ebb `id` lives: `ebb/ID`, decimal.
#[must_use]
pub fn ebb_key(id: EbbId) -> String {
    format!("ebb/{}", id.raw())
}

/// The prefix of node registrations; node N registers under `nodes/N`.
pub const NODES: &str = "nodes/";

/// Where node `node` registers itself.
#[must_use]
pub fn node_key(node: NodeId) -> String {
    format!("{NODES}{}", node.0)
}

/// The key under which global id ranges are counted (the next free id,
/// decimal), updated by compare-and-swap. It is under [`RESERVED`]: only
/// [`GlobalIdMap::reserve_range`] moves it.
pub const NEXT_GLOBAL_ID: &str = "ids/next";

/// The prefix of the map's own entries ([`NEXT_GLOBAL_ID`]): anyone may
/// read them, but `set`, `delete` and `compare_and_swap` refuse keys under
/// it ([`check_writable_key`]), so no map user can rewind the id counter
/// and have ranges handed out twice.
pub const RESERVED: &str = "ids/";

/// The longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// Checks that `key` is a valid key (or, with `prefix`, a valid prefix,
/// which may be empty and end with `/`): printable ASCII without spaces,
/// at most [`MAX_KEY_LEN`] bytes, not starting with `/`, without empty,
/// `.` or `..` segments.
///
/// # Errors
///
/// [`MapError::InvalidKey`] saying what is wrong.
pub fn check_key(key: &str, prefix: bool) -> Result<(), MapError> {
    let invalid = |why: &str| MapError::InvalidKey {
        key: key.chars().take(64).collect(),
        why: String::from(why),
    };
    if key.len() > MAX_KEY_LEN {
        return Err(invalid("longer than 512 bytes"));
    }
    if key.is_empty() {
        return if prefix {
            Ok(())
        } else {
            Err(invalid("empty"))
        };
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(invalid("not printable ASCII without spaces"));
    }
    if key.starts_with('/') {
        return Err(invalid(
            "starts with '/': keys are relative to the application",
        ));
    }
    let body = if prefix {
        key.strip_suffix('/').unwrap_or(key)
    } else {
        key
    };
    if body
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(invalid("has an empty, '.' or '..' segment"));
    }
    Ok(())
}

/// [`check_key`] for a key about to be written by `set`, `delete` or
/// `compare_and_swap`: also refuses the map's own keys (under
/// [`RESERVED`]).
///
/// # Errors
///
/// [`MapError::InvalidKey`] saying what is wrong.
pub fn check_writable_key(key: &str) -> Result<(), MapError> {
    check_key(key, false)?;
    if key.starts_with(RESERVED) {
        return Err(MapError::InvalidKey {
            key: key.chars().take(64).collect(),
            why: format!("is the map's own (under {RESERVED:?}): only reserve_range changes it"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        assert_eq!(check_key("ebb/40000", false), Ok(()));
        assert_eq!(check_key("nodes/", true), Ok(()));
        assert_eq!(check_key("", true), Ok(()));
        for (key, why) in [
            ("", "empty"),
            ("/abs", "starts with '/'"),
            ("a//b", "segment"),
            ("a/../b", "segment"),
            ("a/", "segment"),
            ("a b", "printable"),
        ] {
            match check_key(key, false) {
                Err(MapError::InvalidKey { why: said, .. }) => {
                    assert!(said.contains(why), "{key:?}: {said}");
                }
                other => panic!("{key:?} gave {other:?}"),
            }
        }
        let long = "k".repeat(MAX_KEY_LEN + 1);
        assert!(matches!(
            check_key(&long, false),
            Err(MapError::InvalidKey { .. })
        ));
    }

    #[test]
    fn the_maps_own_keys_are_not_writable() {
        for key in [NEXT_GLOBAL_ID, "ids/other"] {
            match check_writable_key(key) {
                Err(MapError::InvalidKey { key: said, why }) => {
                    assert_eq!(said, key);
                    assert!(why.contains("only reserve_range"), "{why}");
                }
                other => panic!("{key:?} gave {other:?}"),
            }
        }
        assert_eq!(check_key(NEXT_GLOBAL_ID, false), Ok(()));
        assert_eq!(check_writable_key("ids"), Ok(()));
        assert_eq!(check_writable_key("idsx/next"), Ok(()));
        assert!(matches!(
            check_writable_key("a b"),
            Err(MapError::InvalidKey { why, .. }) if why.contains("printable")
        ));
    }

    #[test]
    fn well_known_keys() {
        assert_eq!(ebb_key(EbbId::new(40_001).unwrap()), "ebb/40001");
        assert_eq!(node_key(NodeId(3)), "nodes/3");
        assert_eq!(check_key(&node_key(NodeId(3)), false), Ok(()));
    }
}
