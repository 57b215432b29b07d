//! The owner's side of forwarding: a forwarded request served from this
//! node's store, as the same command from a client connected here would
//! be (`docs/distributed-memcached.md`, "The forwarding protocol" and
//! "Epochs: never a wrong value").
//!
//! Invariant: the store is touched only when the request's epoch is this
//! node's and this node serves every key the request names (its map of
//! that epoch names it the owner, and neither the handover fence nor the
//! self-fence holds the key back, `current.rs`); otherwise the answer is
//! `WrongEpoch` or `NotOwner` and nothing changes. This check and the
//! store operation run in one event, which the map's adoption waits out
//! before it sweeps (`sweep.rs`).

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::Limits;

use super::current::View;
use super::forward::{Command, Create, Entry, ForwardReply, ForwardRequest, StoreMode};
use crate::protocol::common::push_u64;
use crate::store::{expiry, ArithError, DeleteResult, NewItem, Refused, SetMode, SetResult};
use crate::Store;

/// Serves the forwarded request of `control` and `payload` from `store`,
/// as the node `view` describes, at Unix time `now`: the reply and
/// its payload (a `Get`'s found values, shared with the store, not
/// copied).
pub fn serve(
    store: &Store,
    view: &View<'_>,
    now: u32,
    control: &[u8],
    payload: &IoChain,
) -> (ForwardReply, IoChain) {
    let mut values = IoChain::new();
    let Ok(request) = ForwardRequest::decode(control, payload.len()) else {
        return (ForwardReply::BadRequest, values);
    };
    if let Command::Flush { delay } = request.command {
        // At any epoch: a flush only removes values (`forward.rs`).
        flush_store(store, delay, now);
        return (ForwardReply::Flushed, values);
    }
    let map = view.map();
    if request.epoch != map.epoch() {
        return (ForwardReply::WrongEpoch(map.epoch()), values);
    }
    let owned = request.keys().iter().all(|key| view.serves(key));
    if !owned {
        return (ForwardReply::NotOwner(map.epoch()), values);
    }
    let reply = match request.command {
        Command::Get { cas, touch, keys } => {
            let asked = GetAsked { cas, touch };
            let entries = get_values(store, now, asked, &keys, MAX_REPLY_PAYLOAD, &mut values);
            ForwardReply::Values(entries)
        }
        // Served above, at any epoch.
        Command::Flush { .. } => ForwardReply::Flushed,
        // Needs the whole server, not only its store: `meta_forward.rs`
        // serves it (`shard_ebb.rs` hands it there).
        Command::Meta { .. } => ForwardReply::BadRequest,
        Command::Store {
            mode,
            flags,
            exptime,
            cas,
            key,
        } => store_value(store, now, payload, mode, flags, exptime, cas, key),
        Command::Delete { cas, key } => match store.delete(key, (cas != 0).then_some(cas), now) {
            DeleteResult::Deleted => ForwardReply::Deleted,
            DeleteResult::NotFound => ForwardReply::NotFound,
            DeleteResult::Exists => ForwardReply::Exists,
        },
        Command::Arith {
            incr,
            delta,
            cas,
            create,
            key,
        } => arith(store, now, incr, delta, cas, create, key),
        Command::Touch { exptime, key } => match store.touch(key, expiry(exptime, now), now) {
            Some(_) => ForwardReply::Touched,
            None => ForwardReply::NotFound,
        },
    };
    (reply, values)
}

/// The most value bytes a `Get` reply carries: the Messenger's payload
/// limit (`ebb_messenger::Limits::DEFAULT`, 64 MiB), which every node
/// accepts. A multiget whose values would pass it is answered in parts
/// ([`get_values`]).
pub const MAX_REPLY_PAYLOAD: usize = Limits::DEFAULT.max_payload_len as usize;

/// What a forwarded `Get` asks of each key.
#[derive(Clone, Copy, Debug)]
pub struct GetAsked {
    /// Show CAS values.
    pub cas: bool,
    /// gat, gats: the new expiry time.
    pub touch: Option<i64>,
}

/// The entries of a `Get` reply for `keys`, their values appended to
/// `values`, which stay within `payload_limit` bytes: the answer covers
/// the keys in order up to the first whose value would pass it, and the
/// forwarder asks for the rest in another call (`text_forward.rs`). At
/// least the first key is answered, so every call makes progress: a first
/// value larger than the limit alone (only with `-I` over it) is a miss.
pub fn get_values(
    store: &Store,
    now: u32,
    asked: GetAsked,
    keys: &[&[u8]],
    payload_limit: usize,
    values: &mut IoChain,
) -> Vec<Option<Entry>> {
    let mut entries = Vec::with_capacity(keys.len());
    for key in keys {
        let item = match asked.touch {
            Some(exptime) => store.touch(key, expiry(exptime, now), now),
            None => store.get(key, now),
        };
        let Some(item) = item else {
            entries.push(None);
            continue;
        };
        if values.len() + item.value.len() > payload_limit {
            if entries.is_empty() {
                entries.push(None);
            }
            break;
        }
        entries.push(Some(Entry {
            flags: item.flags,
            cas: if asked.cas {
                store.shown_cas(item.cas)
            } else {
                0
            },
            // A value is at most -I (at most 1 GiB), so it fits.
            len: u32::try_from(item.value.len()).unwrap_or(u32::MAX),
        }));
        values.push_back(item.value);
    }
    entries
}

/// A forwarded store: admitted by the size rule first, then the value
/// copied out of the Messenger's receive buffers (as a connection copies
/// a client's), then decided by `Store::set`.
#[allow(clippy::too_many_arguments)]
fn store_value(
    store: &Store,
    now: u32,
    payload: &IoChain,
    mode: StoreMode,
    flags: u32,
    exptime: i64,
    cas: u64,
    key: &[u8],
) -> ForwardReply {
    // As a single memcached refuses (`refuse` in
    // protocol/text/storage.rs): a refused set drops the old item, so
    // that a client never reads the value it meant to replace.
    let refuse = |refused| {
        if mode == StoreMode::Set {
            store.delete(key, None, now);
        }
        match refused {
            Refused::TooLarge => ForwardReply::TooLarge,
            Refused::NoMemory => ForwardReply::OutOfMemory,
        }
    };
    if let Err(refused) = store.admit(key.len(), flags, payload.len()) {
        return refuse(refused);
    }
    let value = match payload.try_to_iobuf() {
        Ok(value) => value,
        Err(_) => {
            store.evict_for_allocation(now);
            match payload.try_to_iobuf() {
                Ok(value) => value,
                Err(_) => return refuse(Refused::NoMemory),
            }
        }
    };
    let mode = match mode {
        StoreMode::Set => SetMode::Set,
        StoreMode::Add => SetMode::Add,
        StoreMode::Replace => SetMode::Replace,
        StoreMode::Append => SetMode::Append,
        StoreMode::Prepend => SetMode::Prepend,
        StoreMode::Cas => SetMode::Cas,
    };
    let new = NewItem {
        flags,
        expires: expiry(exptime, now),
        value,
        cas,
        allow_stale: false,
    };
    match store.set(mode, key, new, now) {
        SetResult::Stored(cas) => ForwardReply::Stored(store.shown_cas(cas)),
        SetResult::NotStored => ForwardReply::NotStored,
        SetResult::Exists => ForwardReply::Exists,
        SetResult::NotFound => ForwardReply::NotFound,
        SetResult::TooLarge => ForwardReply::TooLarge,
        SetResult::OutOfMemory => ForwardReply::OutOfMemory,
    }
}

/// `flush_all [delay]` on `store`, as the text protocol's `flush_all`
/// does it (`protocol/text/commands.rs`): a delay of 0 or less flushes
/// now.
pub fn flush_store(store: &Store, delay: i64, now: u32) {
    let at = (delay > 0).then(|| expiry(delay, now));
    store.flush_all(at, now);
}

/// A forwarded incr/decr, creating a missing item as the binary protocol
/// does (`protocol/binary.rs`, `arithmetic`: an `add` of the initial
/// value) when asked to.
#[allow(clippy::too_many_arguments)]
fn arith(
    store: &Store,
    now: u32,
    incr: bool,
    delta: u64,
    cas: u64,
    create: Option<Create>,
    key: &[u8],
) -> ForwardReply {
    match store.add_delta(key, incr, delta, cas, now) {
        Ok(result) => ForwardReply::Number {
            value: result.value,
            cas: store.shown_cas(result.cas),
        },
        Err(ArithError::NotFound) => {
            let Some(Create { initial, exptime }) = create else {
                return ForwardReply::NotFound;
            };
            let mut digits = Vec::with_capacity(20);
            push_u64(&mut digits, initial);
            let new = NewItem {
                flags: 0,
                expires: expiry(exptime, now),
                value: IoBuf::from_vec(digits),
                cas: 0,
                allow_stale: false,
            };
            match store.set(SetMode::Add, key, new, now) {
                SetResult::Stored(cas) => ForwardReply::Number {
                    value: initial,
                    cas: store.shown_cas(cas),
                },
                SetResult::TooLarge | SetResult::OutOfMemory => ForwardReply::OutOfMemory,
                _ => ForwardReply::NotStored,
            }
        }
        Err(ArithError::NonNumeric) => ForwardReply::NonNumeric,
        Err(ArithError::Exists) => ForwardReply::Exists,
    }
}
