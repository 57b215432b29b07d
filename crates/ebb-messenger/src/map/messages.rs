//! The map protocol's requests and replies: one message number per
//! [`GlobalIdMap`](ebb_core::GlobalIdMap) operation, the request's fields
//! in the payload, and a reply that is the operation's result or the
//! [`MapError`] the hosted node's map gave (every variant crosses the
//! wire as it is). Layouts: `docs/messenger.md`, "The global id map over
//! the Messenger".

use alloc::string::String;
use alloc::vec::Vec;
use core::ops::Range;
use core::time::Duration;

use ebb_core::{Change, Lease, MapError, NodeId, Swap};

use crate::layout::{LayoutError, Reader, Writer};
use crate::MessageNumber;

/// `get(key)`.
pub const GET: MessageNumber = MessageNumber(1);
/// `set(key, value, lease)`.
pub const SET: MessageNumber = MessageNumber(2);
/// `delete(key)`.
pub const DELETE: MessageNumber = MessageNumber(3);
/// `compare_and_swap(key, expected, new)`.
pub const COMPARE_AND_SWAP: MessageNumber = MessageNumber(4);
/// `list(prefix)`.
pub const LIST: MessageNumber = MessageNumber(5);
/// `reserve_range(node, len)`.
pub const RESERVE_RANGE: MessageNumber = MessageNumber(6);
/// `grant_lease(ttl)`.
pub const GRANT_LEASE: MessageNumber = MessageNumber(7);
/// `keep_alive(lease)`.
pub const KEEP_ALIVE: MessageNumber = MessageNumber(8);
/// `revoke(lease)`.
pub const REVOKE: MessageNumber = MessageNumber(9);
/// `watch(prefix)`: the reply is the watch's number.
pub const WATCH: MessageNumber = MessageNumber(10);
/// The next changes of a watch (a long poll: answered once there is at
/// least one, or empty after the service's poll time).
pub const NEXT_CHANGES: MessageNumber = MessageNumber(11);
/// Ends a watch.
pub const UNWATCH: MessageNumber = MessageNumber(12);

/// One map operation, as a node asks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapRequest {
    /// [`GET`].
    Get {
        /// The key.
        key: String,
    },
    /// [`SET`].
    Set {
        /// The key.
        key: String,
        /// The value.
        value: Vec<u8>,
        /// The lease it is written under, if any.
        lease: Option<Lease>,
    },
    /// [`DELETE`].
    Delete {
        /// The key.
        key: String,
    },
    /// [`COMPARE_AND_SWAP`].
    CompareAndSwap {
        /// The key.
        key: String,
        /// The value it must hold (`None`: absent).
        expected: Option<Vec<u8>>,
        /// The value to store.
        new: Vec<u8>,
    },
    /// [`LIST`].
    List {
        /// The prefix.
        prefix: String,
    },
    /// [`RESERVE_RANGE`].
    ReserveRange {
        /// The node the range is for.
        node: NodeId,
        /// How many ids.
        len: u32,
    },
    /// [`GRANT_LEASE`].
    GrantLease {
        /// Its time to live, in milliseconds.
        ttl_ms: u64,
    },
    /// [`KEEP_ALIVE`].
    KeepAlive(Lease),
    /// [`REVOKE`].
    Revoke(Lease),
    /// [`WATCH`].
    Watch {
        /// The prefix.
        prefix: String,
    },
    /// [`NEXT_CHANGES`].
    NextChanges {
        /// The watch's number, as [`WATCH`]'s reply gave it.
        watch: u64,
        /// How long the service may wait for a first change, in
        /// milliseconds (it waits at most [`super::MAX_POLL_WAIT`]).
        wait_ms: u32,
    },
    /// [`UNWATCH`].
    Unwatch {
        /// The watch's number.
        watch: u64,
    },
}

impl MapRequest {
    /// A lease request for `ttl` (saturated at `u64::MAX` ms).
    #[must_use]
    pub fn grant_lease(ttl: Duration) -> MapRequest {
        MapRequest::GrantLease {
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Its message number.
    #[must_use]
    pub fn number(&self) -> MessageNumber {
        match self {
            MapRequest::Get { .. } => GET,
            MapRequest::Set { .. } => SET,
            MapRequest::Delete { .. } => DELETE,
            MapRequest::CompareAndSwap { .. } => COMPARE_AND_SWAP,
            MapRequest::List { .. } => LIST,
            MapRequest::ReserveRange { .. } => RESERVE_RANGE,
            MapRequest::GrantLease { .. } => GRANT_LEASE,
            MapRequest::KeepAlive(_) => KEEP_ALIVE,
            MapRequest::Revoke(_) => REVOKE,
            MapRequest::Watch { .. } => WATCH,
            MapRequest::NextChanges { .. } => NEXT_CHANGES,
            MapRequest::Unwatch { .. } => UNWATCH,
        }
    }

    /// Its payload.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::default();
        match self {
            MapRequest::Get { key }
            | MapRequest::Delete { key }
            | MapRequest::List { prefix: key }
            | MapRequest::Watch { prefix: key } => {
                out.str(key);
            }
            MapRequest::Set { key, value, lease } => {
                out.str(key).bytes(value);
                match lease {
                    None => out.u8(0),
                    Some(lease) => out.u8(1).i64(lease.0),
                };
            }
            MapRequest::CompareAndSwap { key, expected, new } => {
                out.str(key).option_bytes(expected.as_deref()).bytes(new);
            }
            MapRequest::ReserveRange { node, len } => {
                out.u32(node.0).u32(*len);
            }
            MapRequest::GrantLease { ttl_ms } => {
                out.u64(*ttl_ms);
            }
            MapRequest::KeepAlive(lease) | MapRequest::Revoke(lease) => {
                out.i64(lease.0);
            }
            MapRequest::NextChanges { watch, wait_ms } => {
                out.u64(*watch).u32(*wait_ms);
            }
            MapRequest::Unwatch { watch } => {
                out.u64(*watch);
            }
        }
        out.finish()
    }

    /// Decodes the payload of message `number`.
    ///
    /// # Errors
    ///
    /// [`LayoutError`]: an unknown number, or a payload that is not that
    /// request's layout exactly.
    pub fn decode(number: MessageNumber, payload: &[u8]) -> Result<MapRequest, LayoutError> {
        let mut r = Reader::new(payload);
        let request = match number {
            GET => MapRequest::Get {
                key: r.string("key")?,
            },
            SET => MapRequest::Set {
                key: r.string("key")?,
                value: r.bytes("value")?,
                lease: if r.bool("lease")? {
                    Some(Lease(r.i64("lease")?))
                } else {
                    None
                },
            },
            DELETE => MapRequest::Delete {
                key: r.string("key")?,
            },
            COMPARE_AND_SWAP => MapRequest::CompareAndSwap {
                key: r.string("key")?,
                expected: r.option_bytes("expected")?,
                new: r.bytes("new value")?,
            },
            LIST => MapRequest::List {
                prefix: r.string("prefix")?,
            },
            RESERVE_RANGE => MapRequest::ReserveRange {
                node: NodeId(r.u32("node")?),
                len: r.u32("length")?,
            },
            GRANT_LEASE => MapRequest::GrantLease {
                ttl_ms: r.u64("time to live")?,
            },
            KEEP_ALIVE => MapRequest::KeepAlive(Lease(r.i64("lease")?)),
            REVOKE => MapRequest::Revoke(Lease(r.i64("lease")?)),
            WATCH => MapRequest::Watch {
                prefix: r.string("prefix")?,
            },
            NEXT_CHANGES => MapRequest::NextChanges {
                watch: r.u64("watch")?,
                wait_ms: r.u32("wait")?,
            },
            UNWATCH => MapRequest::Unwatch {
                watch: r.u64("watch")?,
            },
            MessageNumber(other) => return Err(LayoutError::UnknownOperation(other)),
        };
        r.end()?;
        Ok(request)
    }
}

/// What an operation gives when it succeeds; which variant is set by the
/// operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapReply {
    /// `set`, `keep_alive`, `revoke`, `UNWATCH`.
    Done,
    /// `get`.
    Value(Option<Vec<u8>>),
    /// `delete`: whether the key was there.
    Deleted(bool),
    /// `compare_and_swap`.
    Swap(Swap),
    /// `list`.
    Entries(Vec<(String, Vec<u8>)>),
    /// `reserve_range`.
    Range(Range<u32>),
    /// `grant_lease`.
    Lease(Lease),
    /// `watch`: the watch's number.
    Watching(u64),
    /// `NEXT_CHANGES`: the changes since the last poll, in order (none:
    /// the poll time passed; poll again).
    Changes(Vec<Change>),
}

/// A reply's first byte: the operation succeeded.
const OK: u8 = 0;
/// A reply's first byte: a [`MapError`] follows.
const FAILED: u8 = 1;

/// Encodes the reply to an operation: its result, or the map's error.
#[must_use]
pub fn encode_reply(reply: &Result<MapReply, MapError>) -> Vec<u8> {
    let mut out = Writer::default();
    match reply {
        Err(error) => {
            out.u8(FAILED);
            encode_error(&mut out, error);
        }
        Ok(reply) => {
            out.u8(OK);
            encode_value(&mut out, reply);
        }
    }
    out.finish()
}

fn encode_value(out: &mut Writer, reply: &MapReply) {
    match reply {
        MapReply::Done => {}
        MapReply::Value(value) => {
            out.option_bytes(value.as_deref());
        }
        MapReply::Deleted(was) => {
            out.bool(*was);
        }
        MapReply::Swap(Swap::Done) => {
            out.u8(0);
        }
        MapReply::Swap(Swap::Conflict(found)) => {
            out.u8(1).option_bytes(found.as_deref());
        }
        MapReply::Entries(entries) => {
            out.u32(u32::try_from(entries.len()).unwrap_or(u32::MAX));
            for (key, value) in entries {
                out.str(key).bytes(value);
            }
        }
        MapReply::Range(range) => {
            out.u32(range.start).u32(range.end);
        }
        MapReply::Lease(lease) => {
            out.i64(lease.0);
        }
        MapReply::Watching(watch) => {
            out.u64(*watch);
        }
        MapReply::Changes(changes) => {
            out.u32(u32::try_from(changes.len()).unwrap_or(u32::MAX));
            for change in changes {
                out.str(&change.key).option_bytes(change.value.as_deref());
            }
        }
    }
}

/// Decodes the reply to operation `number`.
///
/// # Errors
///
/// [`LayoutError`]: an unknown number, or a payload that is not the
/// layout of that operation's reply exactly.
pub fn decode_reply(
    number: MessageNumber,
    payload: &[u8],
) -> Result<Result<MapReply, MapError>, LayoutError> {
    let mut r = Reader::new(payload);
    let reply = if r.bool("status")? {
        Err(decode_error(&mut r)?)
    } else {
        Ok(decode_value(number, &mut r)?)
    };
    r.end()?;
    Ok(reply)
}

fn decode_value(number: MessageNumber, r: &mut Reader<'_>) -> Result<MapReply, LayoutError> {
    Ok(match number {
        SET | KEEP_ALIVE | REVOKE | UNWATCH => MapReply::Done,
        GET => MapReply::Value(r.option_bytes("value")?),
        DELETE => MapReply::Deleted(r.bool("deleted")?),
        COMPARE_AND_SWAP => MapReply::Swap(if r.bool("swap")? {
            Swap::Conflict(r.option_bytes("value found")?)
        } else {
            Swap::Done
        }),
        LIST => {
            // Each entry is at least two lengths.
            let count = r.count("entries", 8)?;
            let mut entries = Vec::new();
            for _ in 0..count {
                entries.push((r.string("entry key")?, r.bytes("entry value")?));
            }
            MapReply::Entries(entries)
        }
        RESERVE_RANGE => {
            let start = r.u32("range start")?;
            let end = r.u32("range end")?;
            if start >= end {
                return Err(LayoutError::EmptyRange { start, end });
            }
            MapReply::Range(start..end)
        }
        GRANT_LEASE => MapReply::Lease(Lease(r.i64("lease")?)),
        WATCH => MapReply::Watching(r.u64("watch")?),
        NEXT_CHANGES => {
            // Each change is at least a length and a tag.
            let count = r.count("changes", 5)?;
            let mut changes = Vec::new();
            for _ in 0..count {
                changes.push(Change {
                    key: r.string("change key")?,
                    value: r.option_bytes("change value")?,
                });
            }
            MapReply::Changes(changes)
        }
        MessageNumber(other) => return Err(LayoutError::UnknownOperation(other)),
    })
}

/// [`MapError`]'s variants on the wire, in declaration order from 1.
fn encode_error(out: &mut Writer, error: &MapError) {
    match error {
        MapError::Unreachable { endpoint, reason } => {
            out.u8(1).str(endpoint).str(reason);
        }
        MapError::InvalidKey { key, why } => {
            out.u8(2).str(key).str(why);
        }
        MapError::IdsExhausted { wanted, left } => {
            out.u8(3).u32(*wanted).u32(*left);
        }
        MapError::LeaseExpired(lease) => {
            out.u8(4).i64(lease.0);
        }
        MapError::Corrupt { key, why } => {
            out.u8(5).str(key).str(why);
        }
        MapError::Refused(why) => {
            out.u8(6).str(why);
        }
        MapError::WatchEnded(why) => {
            out.u8(7).str(why);
        }
        MapError::OutcomeUnknown { endpoint, reason } => {
            out.u8(8).str(endpoint).str(reason);
        }
    }
}

fn decode_error(r: &mut Reader<'_>) -> Result<MapError, LayoutError> {
    Ok(match r.tag("error", 9)? {
        1 => MapError::Unreachable {
            endpoint: r.string("endpoint")?,
            reason: r.string("reason")?,
        },
        2 => MapError::InvalidKey {
            key: r.string("key")?,
            why: r.string("why")?,
        },
        3 => MapError::IdsExhausted {
            wanted: r.u32("wanted")?,
            left: r.u32("left")?,
        },
        4 => MapError::LeaseExpired(Lease(r.i64("lease")?)),
        5 => MapError::Corrupt {
            key: r.string("key")?,
            why: r.string("why")?,
        },
        6 => MapError::Refused(r.string("why")?),
        7 => MapError::WatchEnded(r.string("why")?),
        8 => MapError::OutcomeUnknown {
            endpoint: r.string("endpoint")?,
            reason: r.string("reason")?,
        },
        tag => {
            return Err(LayoutError::BadTag {
                field: "error",
                tag,
            })
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn a_set_with_a_lease_has_the_documented_layout() {
        let request = MapRequest::Set {
            key: "k".into(),
            value: vec![9],
            lease: Some(Lease(2)),
        };
        assert_eq!(
            request.encode(),
            [1, 0, 0, 0, b'k', 1, 0, 0, 0, 9, 1, 2, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(MapRequest::decode(SET, &request.encode()), Ok(request));
    }

    #[test]
    fn every_error_round_trips_and_an_unknown_one_is_refused() {
        for error in [
            MapError::Unreachable {
                endpoint: "etcd at 127.0.0.1:2379".into(),
                reason: "refused".into(),
            },
            MapError::InvalidKey {
                key: "/k".into(),
                why: "starts with '/'".into(),
            },
            MapError::IdsExhausted {
                wanted: 64,
                left: 3,
            },
            MapError::LeaseExpired(Lease(-4)),
            MapError::Corrupt {
                key: "ids/next".into(),
                why: "not decimal".into(),
            },
            MapError::Refused("no".into()),
            MapError::WatchEnded("compacted".into()),
            MapError::OutcomeUnknown {
                endpoint: "the hosted node 0".into(),
                reason: "no reply within 10000 ms".into(),
            },
        ] {
            let bytes = encode_reply(&Err(error.clone()));
            assert_eq!(decode_reply(GET, &bytes), Ok(Err(error)));
        }
        assert_eq!(
            decode_reply(GET, &[1, 9]),
            Err(LayoutError::BadTag {
                field: "error",
                tag: 9
            })
        );
        assert_eq!(
            decode_reply(GET, &[1, 0]),
            Err(LayoutError::BadTag {
                field: "error",
                tag: 0
            })
        );
    }

    #[test]
    fn replies_are_strict() {
        assert_eq!(
            decode_reply(RESERVE_RANGE, &encode_reply(&Ok(MapReply::Range(5..5)))),
            Err(LayoutError::EmptyRange { start: 5, end: 5 })
        );
        assert_eq!(
            decode_reply(SET, &[0, 0]),
            Err(LayoutError::Trailing { extra: 1 })
        );
        assert_eq!(
            decode_reply(MessageNumber(13), &[0]),
            Err(LayoutError::UnknownOperation(13))
        );
        assert_eq!(
            MapRequest::decode(MessageNumber(0), &[]),
            Err(LayoutError::UnknownOperation(0))
        );
    }
}
