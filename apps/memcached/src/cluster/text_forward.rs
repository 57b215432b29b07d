//! Carrying out a forwarded text request (`route.rs`) and writing its
//! reply as memcached's text protocol does (`docs/distributed-memcached.md`,
//! "The forwarding protocol").
//!
//! A multiget is split by owner: this node's keys are read from its
//! store, the others are asked of their owners, one call per owner (or
//! more, within the control limit), and the reply lists the values in
//! the client's order of keys. A call that fails, or an owner that
//! refuses (another epoch, not the owner), makes its keys misses: a miss
//! is always a correct answer from a cache. A write that gets no answer
//! from its owner (none within `forwarder::FORWARD_TIME_LIMIT`, among
//! other failures) is a `SERVER_ERROR` naming the owner; a write that
//! timed out may still reach the owner later, so its outcome is unknown
//! (`docs/distributed-memcached.md`, "A time limit"). Either way the
//! connection goes on with its next request.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use ebb_core::NodeId;
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::MessengerRef;

use super::current::CurrentMap;
use super::flush::{flush_everywhere, text_reply};
use super::forward::{get_batches, Command, Entry, ForwardReply, ForwardRequest, MAX_GET_KEYS};
use super::forwarder::forward;
use super::meta_forward::execute_meta;
use super::route::{Forwarded, TextOp, OUT_OF_MEMORY, TOO_LARGE};
use super::shard_map::{Member, ShardMap};
use crate::protocol::common::push_u64;
use crate::store::expiry;
use crate::Server;

/// What a node's connections forward with.
pub struct ClusterLink {
    /// The node's Messenger.
    pub messenger: MessengerRef,
    /// The map in force.
    pub current: &'static CurrentMap,
}

/// The reply to a write when no node owns its key (no map yet).
const NO_OWNER: &[u8] = b"SERVER_ERROR the key has no owner node yet\r\n";
/// The reply to a write the owner refused because the maps disagree, or
/// this node's own key it does not serve until the others adopted the
/// map that gave it the key (the handover fence, `current.rs`).
const MAP_CHANGING: &[u8] = b"SERVER_ERROR shard map changing, try again\r\n";
/// The reply to a write of this node's own key while its lease may have
/// lapsed (the self-fence, `current.rs`).
const LEASE_LAPSED: &[u8] =
    b"SERVER_ERROR this node's membership lapsed, its keys are not served, try again\r\n";

/// One found value, for the reply.
struct Found {
    flags: u32,
    cas: u64,
    value: IoChain,
}

/// Carries out `request` for a client of `server`, through `link`; the
/// bytes to send it (empty under noreply).
pub async fn execute(link: &ClusterLink, server: &Server, request: Forwarded) -> IoChain {
    let map = link.current.read(ShardMap::clone);
    let me = link.current.me();
    let reply = match request.op {
        TextOp::Get {
            with_cas,
            touch,
            keys,
        } => get(link, server, &map, me, with_cas, touch, &keys).await,
        TextOp::Meta {
            key, line, block, ..
        } => execute_meta(link, server, &map, &key, &line, block).await,
        TextOp::Flush { delay } => {
            let outcome = flush_everywhere(link, server, delay).await;
            IoChain::from(IoBuf::from_vec(text_reply(outcome)))
        }
        op => IoChain::from(IoBuf::from_vec(single(link, server, &map, op).await)),
    };
    if request.noreply {
        IoChain::new()
    } else {
        reply
    }
}

/// A single-key command: its reply line.
async fn single(link: &ClusterLink, server: &Server, map: &ShardMap, op: TextOp) -> Vec<u8> {
    let (key, command, payload) = match &op {
        TextOp::Store {
            mode,
            flags,
            exptime,
            cas,
            key,
            value,
        } => (
            key,
            Command::Store {
                mode: *mode,
                flags: *flags,
                exptime: *exptime,
                cas: *cas,
                key,
            },
            IoChain::from(value.clone()),
        ),
        TextOp::Delete { key } => (key, Command::Delete { cas: 0, key }, IoChain::new()),
        TextOp::Arith { incr, delta, key } => (
            key,
            Command::Arith {
                incr: *incr,
                delta: *delta,
                cas: 0,
                create: None,
                key,
            },
            IoChain::new(),
        ),
        TextOp::Touch { exptime, key } => (
            key,
            Command::Touch {
                exptime: *exptime,
                key,
            },
            IoChain::new(),
        ),
        TextOp::RefusedSet { key, .. } => (key, Command::Delete { cas: 0, key }, IoChain::new()),
        // Refused here, leaving the old item: nothing to ask the owner.
        TextOp::Refused { reply, .. } => return reply.to_vec(),
        TextOp::Get { .. } | TextOp::Flush { .. } | TextOp::Meta { .. } => {
            return NO_OWNER.to_vec()
        }
    };
    // A refused set's reply once the old item is gone.
    let refused_set = match &op {
        TextOp::RefusedSet { reply, .. } => Some(*reply),
        _ => None,
    };
    let Some(owner) = map.owner(key) else {
        return NO_OWNER.to_vec();
    };
    if owner.node == link.current.me() {
        // Routed here because this node is fenced from its own key. A
        // set refused for its size still drops the old item, as on a
        // single memcached: deleting only ever makes a miss.
        if let Some(reply) = refused_set {
            server.store.delete(key, None, server.unix_now());
            return reply.to_vec();
        }
        let fence = if link.current.view(|view| view.lease_live()) {
            MAP_CHANGING
        } else {
            LEASE_LAPSED
        };
        return fence.to_vec();
    }
    let request = ForwardRequest {
        epoch: map.epoch(),
        command,
    };
    let line: &[u8] = match forward(link.messenger, owner, &request, payload).await {
        // The old item is gone at the owner: the refusal's reply.
        Ok((ForwardReply::Deleted | ForwardReply::NotFound, _)) if refused_set.is_some() => {
            refused_set.unwrap_or(TOO_LARGE)
        }
        Ok((ForwardReply::Number { value, .. }, _)) => {
            let mut line = Vec::with_capacity(22);
            push_u64(&mut line, value);
            line.extend_from_slice(b"\r\n");
            return line;
        }
        Ok((ForwardReply::Stored(_), _)) => b"STORED\r\n",
        Ok((ForwardReply::NotStored, _)) => b"NOT_STORED\r\n",
        Ok((ForwardReply::Exists, _)) => b"EXISTS\r\n",
        Ok((ForwardReply::NotFound, _)) => b"NOT_FOUND\r\n",
        Ok((ForwardReply::Deleted, _)) => b"DELETED\r\n",
        Ok((ForwardReply::Touched, _)) => b"TOUCHED\r\n",
        Ok((ForwardReply::TooLarge, _)) => TOO_LARGE,
        Ok((ForwardReply::OutOfMemory, _)) => OUT_OF_MEMORY,
        Ok((ForwardReply::NonNumeric, _)) => {
            b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
        }
        Ok((ForwardReply::WrongEpoch(_) | ForwardReply::NotOwner(_), _)) => MAP_CHANGING,
        Ok((
            ForwardReply::Values(_)
            | ForwardReply::Flushed
            | ForwardReply::Meta
            | ForwardReply::BadRequest,
            _,
        ))
        | Err(_) => {
            return owner_silent(owner);
        }
    };
    line.to_vec()
}

/// The reply to a write whose owner gave no usable answer: it names the
/// owner, so an operator knows which node to look at.
fn owner_silent(owner: Member) -> Vec<u8> {
    let mut line = b"SERVER_ERROR the key's owner, node ".to_vec();
    push_u64(&mut line, u64::from(owner.node.0));
    line.extend_from_slice(b", did not answer\r\n");
    line
}

/// A multiget: local keys from the store, the others from their owners,
/// the reply in the client's order.
#[allow(clippy::too_many_arguments)]
async fn get(
    link: &ClusterLink,
    server: &Server,
    map: &ShardMap,
    me: NodeId,
    with_cas: bool,
    touch: Option<i64>,
    keys: &[Vec<u8>],
) -> IoChain {
    let mut found: Vec<Option<Found>> = keys.iter().map(|_| None).collect();
    let mut remote: BTreeMap<Member, Vec<usize>> = BTreeMap::new();
    let now = server.unix_now();
    for (index, key) in keys.iter().enumerate() {
        match map.owner(key) {
            // A key this node is fenced from is a miss.
            Some(owner) if owner.node == me && !link.current.serves(key) => {}
            Some(owner) if owner.node == me => {
                let item = match touch {
                    Some(exptime) => server.store.touch(key, expiry(exptime, now), now),
                    None => server.store.get(key, now),
                };
                found[index] = item.map(|item| Found {
                    flags: item.flags,
                    cas: server.store.shown_cas(item.cas),
                    value: IoChain::from(item.value),
                });
            }
            Some(owner) => remote.entry(owner).or_default().push(index),
            // No map yet: nobody owns it, a miss.
            None => {}
        }
    }
    for (owner, indices) in remote {
        let mut rest: &[usize] = &indices;
        while !rest.is_empty() {
            // One call's keys at most: a 4 MiB line may name two million
            // keys, and encoding all that remain on every pass would be
            // quadratic in them.
            let window = &rest[..rest.len().min(MAX_GET_KEYS)];
            let owner_keys: Vec<&[u8]> = window.iter().map(|&i| keys[i].as_slice()).collect();
            let Ok(batches) = get_batches(map.epoch(), with_cas, touch, &owner_keys) else {
                break;
            };
            let Some(batch) = batches.into_iter().next() else {
                break;
            };
            let asked = batch.keys().len();
            let Ok((ForwardReply::Values(entries), values)) =
                forward(link.messenger, owner, &batch, IoChain::new()).await
            else {
                // The batch's keys and the rest are misses.
                break;
            };
            // The owner answers the first keys whose values fit one
            // reply (`serve::get_values`), at least one: the others are
            // asked again.
            let Some(answered) = answered(asked, entries.len()) else {
                break;
            };
            fill(&mut found, &rest[..answered], entries, values);
            rest = &rest[answered..];
        }
    }
    let mut out = IoChain::new();
    for (key, found) in keys.iter().zip(found) {
        let Some(found) = found else { continue };
        let mut header = Vec::with_capacity(key.len() + 48);
        header.extend_from_slice(b"VALUE ");
        header.extend_from_slice(key);
        header.push(b' ');
        push_u64(&mut header, u64::from(found.flags));
        header.push(b' ');
        push_u64(&mut header, found.value.len() as u64);
        if with_cas {
            header.push(b' ');
            push_u64(&mut header, found.cas);
        }
        header.extend_from_slice(b"\r\n");
        out.push_back(IoBuf::from_vec(header));
        let mut value = found.value;
        out.append(&mut value);
        out.push_back(IoBuf::from_static(b"\r\n"));
    }
    out.push_back(IoBuf::from_static(b"END\r\n"));
    out
}

/// How many of the `asked` keys a `Get` reply of `entries` entries
/// answered: a first part, never none, never more than asked.
fn answered(asked: usize, entries: usize) -> Option<usize> {
    (1..=asked).contains(&entries).then_some(entries)
}

/// Puts a `Get` reply's `entries`, their values in `values` in order,
/// into `found` at `slots`.
fn fill(
    found: &mut [Option<Found>],
    slots: &[usize],
    entries: Vec<Option<Entry>>,
    mut values: IoChain,
) {
    for (&slot, entry) in slots.iter().zip(entries) {
        let Some(entry) = entry else { continue };
        let Ok(value) = values.split_to(entry.len as usize) else {
            break;
        };
        found[slot] = Some(Found {
            flags: entry.flags,
            cas: entry.cas,
            value,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_answering_a_first_part_of_the_keys_leaves_the_rest_to_ask() {
        assert_eq!(answered(5, 5), Some(5));
        assert_eq!(answered(5, 2), Some(2));
        // None answered, or more than asked: not a reply to this call.
        assert_eq!(answered(5, 0), None);
        assert_eq!(answered(5, 6), None);
    }
}
