//! Carrying out a forwarded binary request (`binary_route.rs`) and
//! building its reply as the local path builds it (`protocol/binary.rs`:
//! opaque echoed, CAS values, quiet variants silent on success and on get
//! misses, the key in GETK/GATK replies; `docs/distributed-memcached.md`,
//! "The binary and meta protocols, flush_all").

use alloc::vec;

use ebb_iobuf::IoChain;

use super::binary_route::{BinaryForwarded, BinaryOp};
use super::flush::flush_everywhere;
use super::forward::{Command, ForwardReply, ForwardRequest};
use super::forwarder::forward;
use super::serve::serve;
use super::shard_map::ShardMap;
use super::text_forward::ClusterLink;
use crate::protocol::binary::opcodes::*;
use crate::protocol::binary::{refusal, Responder};
use crate::store::Refused;
use crate::Server;

/// The message of a write whose owner gave no usable answer.
const NO_OWNER: &[u8] = b"the key's owner node did not answer";
/// The message of a write the owner refused because the maps disagree.
const MAP_CHANGING: &[u8] = b"shard map changing, try again";

/// Asks the owner of `key` (this node's store when it is the owner by
/// now) to carry out `command`.
async fn ask(
    link: &ClusterLink,
    server: &Server,
    map: &ShardMap,
    key: &[u8],
    command: Command<'_>,
    payload: IoChain,
) -> Option<(ForwardReply, IoChain)> {
    let owner = map.owner(key)?;
    let request = ForwardRequest {
        epoch: map.epoch(),
        command,
    };
    if owner.node == link.current.me() {
        // Routed here because the node is fenced from its own key, or
        // the map changed since: the owner's checks decide.
        let control = request.encode().ok()?;
        let now = server.unix_now();
        let served = link
            .current
            .view(|view| serve(&server.store, view, now, &control, &payload));
        return Some(served);
    }
    forward(link.messenger, owner, &request, payload).await.ok()
}

/// Sends `command` (a delete) to the owner of `key`, another node.
async fn forward_delete(
    link: &ClusterLink,
    map: &ShardMap,
    key: &[u8],
    command: Command<'_>,
) -> Option<ForwardReply> {
    let owner = map.owner(key)?;
    let request = ForwardRequest {
        epoch: map.epoch(),
        command,
    };
    forward(link.messenger, owner, &request, IoChain::new())
        .await
        .ok()
        .map(|(reply, _)| reply)
}

/// Carries out `request` for a client of `server`, through `link`; the
/// bytes to send it (none for a quiet success or a quiet miss).
pub async fn execute_binary(
    link: &ClusterLink,
    server: &Server,
    request: BinaryForwarded,
) -> IoChain {
    let map = link.current.read(ShardMap::clone);
    let responder = Responder {
        opcode: request.opcode,
        opaque: request.opaque,
    };
    let quiet = request.quiet;
    let mut out = IoChain::new();
    let failed = |out: &mut IoChain, reply: Option<ForwardReply>| match reply {
        Some(ForwardReply::WrongEpoch(_) | ForwardReply::NotOwner(_)) => {
            responder.send(out, STATUS_ETMPFAIL, 0, &[], &[], MAP_CHANGING);
        }
        _ => responder.send(out, STATUS_EINTERNAL, 0, &[], &[], NO_OWNER),
    };
    match request.op {
        BinaryOp::Get {
            touch,
            with_key,
            with_value,
            key,
        } => {
            let command = Command::Get {
                cas: true,
                touch,
                keys: vec![key.as_slice()],
            };
            let found = match ask(link, server, &map, &key, command, IoChain::new()).await {
                Some((ForwardReply::Values(entries), values)) => match entries.as_slice() {
                    [Some(entry)] if values.len() == entry.len as usize => Some((*entry, values)),
                    _ => None,
                },
                // Any failure of a read is a miss, as for text.
                _ => None,
            };
            let shown_key: &[u8] = if with_key { &key } else { &[] };
            match found {
                Some((entry, values)) => {
                    let value = with_value.then_some(values);
                    responder.hit(&mut out, entry.cas, entry.flags, shown_key, value);
                }
                None if quiet => {}
                None if with_key => responder.key_miss(&mut out, &key),
                None => responder.error(&mut out, STATUS_KEY_ENOENT),
            }
        }
        BinaryOp::Store {
            cmd,
            mode,
            flags,
            exptime,
            cas,
            key,
            value,
        } => {
            let command = Command::Store {
                mode,
                flags,
                exptime,
                cas,
                key: &key,
            };
            let payload = IoChain::from(value);
            match ask(link, server, &map, &key, command, payload).await {
                Some((ForwardReply::Stored(new_cas), _)) => {
                    if !quiet {
                        responder.send(&mut out, STATUS_SUCCESS, new_cas, &[], &[], &[]);
                    }
                }
                Some((ForwardReply::Exists, _)) => responder.error(&mut out, STATUS_KEY_EEXISTS),
                Some((ForwardReply::NotFound, _)) => responder.error(&mut out, STATUS_KEY_ENOENT),
                Some((ForwardReply::TooLarge, _)) => {
                    responder.send(&mut out, STATUS_E2BIG, 0, &[], &[], b"Too large.");
                }
                Some((ForwardReply::OutOfMemory, _)) => responder.send(
                    &mut out,
                    STATUS_ENOMEM,
                    0,
                    &[],
                    &[],
                    b"Out of memory allocating item",
                ),
                Some((ForwardReply::NotStored, _)) => responder.error(
                    &mut out,
                    match cmd {
                        ADD => STATUS_KEY_EEXISTS,
                        REPLACE => STATUS_KEY_ENOENT,
                        _ => STATUS_NOT_STORED,
                    },
                ),
                other => failed(&mut out, other.map(|(reply, _)| reply)),
            }
        }
        BinaryOp::Delete { cas, key } => {
            let command = Command::Delete { cas, key: &key };
            match ask(link, server, &map, &key, command, IoChain::new()).await {
                Some((ForwardReply::Deleted, _)) => {
                    if !quiet {
                        responder.send(&mut out, STATUS_SUCCESS, 0, &[], &[], &[]);
                    }
                }
                Some((ForwardReply::Exists, _)) => responder.error(&mut out, STATUS_KEY_EEXISTS),
                Some((ForwardReply::NotFound, _)) => responder.error(&mut out, STATUS_KEY_ENOENT),
                other => failed(&mut out, other.map(|(reply, _)| reply)),
            }
        }
        BinaryOp::Arith {
            incr,
            delta,
            cas,
            create,
            key,
        } => {
            let command = Command::Arith {
                incr,
                delta,
                cas,
                create,
                key: &key,
            };
            match ask(link, server, &map, &key, command, IoChain::new()).await {
                Some((ForwardReply::Number { value, cas }, _)) => {
                    if !quiet {
                        let value = value.to_be_bytes();
                        responder.send(&mut out, STATUS_SUCCESS, cas, &[], &[], &value);
                    }
                }
                Some((ForwardReply::NotFound, _)) => responder.error(&mut out, STATUS_KEY_ENOENT),
                Some((ForwardReply::NonNumeric, _)) => {
                    responder.error(&mut out, STATUS_DELTA_BADVAL);
                }
                Some((ForwardReply::Exists, _)) => responder.error(&mut out, STATUS_KEY_EEXISTS),
                Some((ForwardReply::OutOfMemory, _)) => responder.send(
                    &mut out,
                    STATUS_ENOMEM,
                    0,
                    &[],
                    &[],
                    b"Out of memory allocating new item",
                ),
                Some((ForwardReply::NotStored, _)) => responder.error(&mut out, STATUS_NOT_STORED),
                other => failed(&mut out, other.map(|(reply, _)| reply)),
            }
        }
        BinaryOp::Refused { .. } => refusal(&responder, &mut out, Refused::NoMemory),
        BinaryOp::RefusedSet { key, refused, .. } => {
            let deleted = if map.owner(&key).is_some_and(|o| o.node == link.current.me()) {
                // Routed here because this node is fenced from its own
                // key: deleting only ever makes a miss.
                server.store.delete(&key, None, server.unix_now());
                true
            } else {
                let command = Command::Delete { cas: 0, key: &key };
                match forward_delete(link, &map, &key, command).await {
                    Some(ForwardReply::Deleted | ForwardReply::NotFound) => true,
                    other => {
                        failed(&mut out, other);
                        false
                    }
                }
            };
            if deleted {
                refusal(&responder, &mut out, refused);
            }
        }
        BinaryOp::Flush { delay } => match flush_everywhere(link, server, delay).await {
            Ok(()) => {
                if !quiet {
                    responder.send(&mut out, STATUS_SUCCESS, 0, &[], &[], &[]);
                }
            }
            Err(shortfall) => {
                let message = alloc::format!("{shortfall}");
                responder.send(&mut out, STATUS_EINTERNAL, 0, &[], &[], message.as_bytes());
            }
        },
    }
    out
}
