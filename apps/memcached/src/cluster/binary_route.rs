//! Which binary requests a node of several forwards
//! (`docs/distributed-memcached.md`, "The binary and meta protocols,
//! flush_all"); `binary_forward.rs` carries them out.
//!
//! Forwarded: a well-formed get, getk, touch, gat, gatk (and quiet
//! variants), set, add, replace, append, prepend (and quiet), delete (and
//! quiet), incr, decr (and quiet) for a key the map in force does not
//! give to this node, and every flush (`flush.rs`). Everything else is
//! handled locally exactly as on a single node: other commands, this
//! node's keys, malformed requests (whose errors touch no store), and
//! values over `-I` (refused locally, as text does).

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoChain};

use super::current::View;
use super::forward::{Create, StoreMode};
use crate::protocol::binary::header::{RequestHeader, HEADER_LEN};
use crate::protocol::binary::opcodes::*;
use crate::protocol::binary::{KEY_MAX_LENGTH, NO_CREATE, REQUEST_MAGIC};
use crate::store::Refused;
use crate::Store;

/// Where the first binary request of a connection's input goes.
#[derive(Debug)]
pub enum BinaryRoute {
    /// Handle it here, as a single node would.
    Local,
    /// A store for another node's key whose value is still arriving:
    /// reserved from `-m` as a text one is (`route::Arriving`).
    Incomplete(BinaryArriving),
    /// Forward it.
    Forward(BinaryForwarded),
}

/// A binary store for another node's key whose value is still arriving.
#[derive(Debug)]
pub struct BinaryArriving {
    /// The value's length: what to reserve.
    pub block: usize,
    /// What to do instead when it cannot be reserved: the head taken,
    /// the value thrown away as it arrives, and ENOMEM.
    pub refused: BinaryForwarded,
}

/// A binary request to forward, taken out of the input.
#[derive(Debug)]
pub struct BinaryForwarded {
    /// Input bytes it took.
    pub consumed: usize,
    /// The request's opcode as sent (its reply echoes it).
    pub opcode: u8,
    /// The request's opaque.
    pub opaque: [u8; 4],
    /// A quiet variant.
    pub quiet: bool,
    /// The command.
    pub op: BinaryOp,
}

/// A forwarded binary command, owning its key and value.
#[derive(Debug)]
pub enum BinaryOp {
    /// get, getk, touch, gat, gatk.
    Get {
        /// touch, gat, gatk: the new expiry time.
        touch: Option<i64>,
        /// getk, gatk: the reply carries the key.
        with_key: bool,
        /// Not touch: the reply carries the value.
        with_value: bool,
        /// The key.
        key: Vec<u8>,
    },
    /// set, add, replace, append, prepend.
    Store {
        /// The command as sent, unquieted (for NOT_STORED's status).
        cmd: u8,
        /// Which store.
        mode: StoreMode,
        /// The client's flags.
        flags: u32,
        /// Its expiry time.
        exptime: i64,
        /// Its CAS value (as the node shows CAS values: 0 with `-C`).
        cas: u64,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: IoBuf,
    },
    /// delete.
    Delete {
        /// The item's CAS value to match, 0: any.
        cas: u64,
        /// The key.
        key: Vec<u8>,
    },
    /// incr, decr.
    Arith {
        /// incr.
        incr: bool,
        /// By how much.
        delta: u64,
        /// The item's CAS value to match, 0: any.
        cas: u64,
        /// Create a missing item.
        create: Option<Create>,
        /// The key.
        key: Vec<u8>,
    },
    /// flush: every node's store.
    Flush {
        /// The delay (0: now).
        delay: i64,
    },
    /// A set (or setq) refused for its size or for memory: memcached
    /// drops the old item of a refused set (`process_bin_update`), so the
    /// owner is asked to delete the key, then the client gets E2BIG or
    /// ENOMEM; the value is discarded as it arrives.
    RefusedSet {
        /// The key.
        key: Vec<u8>,
        /// Value bytes to discard after the request's head.
        discard: usize,
        /// Why.
        refused: Refused,
    },
    /// add, replace, append, prepend refused for memory: ENOMEM, the old
    /// item left, nothing forwarded.
    Refused {
        /// Value bytes to discard after the request's head.
        discard: usize,
    },
}

impl BinaryOp {
    /// Input bytes to discard after the request's head (a refused set's
    /// value).
    #[must_use]
    pub fn discard(&self) -> usize {
        match self {
            BinaryOp::RefusedSet { discard, .. } | BinaryOp::Refused { discard } => *discard,
            _ => 0,
        }
    }

    /// The bytes of its value this node holds until the owner answered:
    /// reserved from `-m` while it is on its way.
    #[must_use]
    pub fn value_len(&self) -> usize {
        match self {
            BinaryOp::Store { value, .. } => value.len(),
            _ => 0,
        }
    }
}

impl BinaryForwarded {
    /// The same request refused because its value cannot be reserved: a
    /// set still drops the owner's old item, as memcached's does when it
    /// cannot allocate the item; the other stores leave it. `discard`:
    /// the value's bytes not yet taken from the input.
    #[must_use]
    pub fn out_of_memory(self, discard: usize) -> BinaryForwarded {
        let op = match self.op {
            BinaryOp::Store { cmd: SET, key, .. } => BinaryOp::RefusedSet {
                key,
                discard,
                refused: Refused::NoMemory,
            },
            _ => BinaryOp::Refused { discard },
        };
        BinaryForwarded { op, ..self }
    }
}

/// Whether this node serves `key` from its store now (a key it owns but
/// is fenced from goes the forwarding path, which refuses it: see
/// `route.rs`).
fn mine(view: &View<'_>, key: &[u8]) -> bool {
    view.serves(key)
}

fn be_u32(bytes: &[u8]) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(&bytes[..4]);
    u32::from_be_bytes(word)
}

fn be_u64(bytes: &[u8]) -> u64 {
    (u64::from(be_u32(bytes)) << 32) | u64::from(be_u32(&bytes[4..]))
}

/// Where the first request of `input` goes, for the node `view`
/// describes (`store` shows CAS values as the local path does;
/// `item_size_max`: `-I`).
#[must_use]
pub fn route_binary(
    input: &IoChain,
    view: &View<'_>,
    store: &Store,
    item_size_max: usize,
) -> BinaryRoute {
    let mut cursor = input.cursor();
    let Ok(header) = cursor.read_header::<RequestHeader>() else {
        return BinaryRoute::Local;
    };
    let (extlen, keylen) = (usize::from(header.extlen), usize::from(header.keylen));
    let body = usize::try_from(header.bodylen).unwrap_or(usize::MAX);
    let head = HEADER_LEN + extlen + keylen;
    if header.magic != REQUEST_MAGIC
        || input.len() < head
        || keylen + extlen > body
        || keylen > KEY_MAX_LENGTH
    {
        return BinaryRoute::Local;
    }
    let mut extras = [0u8; 255];
    let mut key = [0u8; KEY_MAX_LENGTH];
    if cursor.read_into(&mut extras[..extlen]).is_err()
        || cursor.read_into(&mut key[..keylen]).is_err()
    {
        return BinaryRoute::Local;
    }
    let (extras, key) = (&extras[..extlen], &key[..keylen]);
    let (cmd, quiet) = unquiet(header.opcode);
    let forward = |consumed: usize, op: BinaryOp| {
        BinaryRoute::Forward(BinaryForwarded {
            consumed,
            opcode: header.opcode,
            opaque: header.opaque,
            quiet,
            op,
        })
    };
    // The guards are `protocol/binary.rs`'s `dispatch`: what they refuse
    // is answered locally, without touching the store.
    if cmd == FLUSH && keylen == 0 && body == extlen && (extlen == 0 || extlen == 4) {
        let delay = if extlen == 4 { be_u32(extras) } else { 0 };
        return forward(
            head,
            BinaryOp::Flush {
                delay: i64::from(delay),
            },
        );
    }
    if keylen == 0 || mine(view, key) {
        return BinaryRoute::Local;
    }
    let value_len = match cmd {
        SET | ADD | REPLACE if extlen == 8 && body >= keylen + 8 => body - keylen - 8,
        APPEND | PREPEND if extlen == 0 => body - keylen,
        GET | GETK if extlen == 0 && body == keylen => {
            let op = BinaryOp::Get {
                touch: None,
                with_key: cmd == GETK,
                with_value: true,
                key: key.to_vec(),
            };
            return forward(head, op);
        }
        TOUCH | GAT | GATK if extlen == 4 => {
            let op = BinaryOp::Get {
                touch: Some(i64::from(be_u32(extras))),
                with_key: cmd == GATK,
                with_value: cmd != TOUCH,
                key: key.to_vec(),
            };
            return forward(head, op);
        }
        DELETE if extlen == 0 && body == keylen => {
            let op = BinaryOp::Delete {
                cas: header.cas,
                key: key.to_vec(),
            };
            return forward(head, op);
        }
        INCREMENT | DECREMENT if extlen == 20 && body == keylen + extlen => {
            let exptime = be_u32(&extras[16..]);
            let op = BinaryOp::Arith {
                incr: cmd == INCREMENT,
                delta: be_u64(extras),
                cas: header.cas,
                create: (exptime != NO_CREATE).then(|| Create {
                    initial: be_u64(&extras[8..]),
                    exptime: i64::from(exptime),
                }),
                key: key.to_vec(),
            };
            return forward(head, op);
        }
        _ => return BinaryRoute::Local,
    };
    if value_len > item_size_max {
        if cmd != SET {
            // add, replace, append, prepend: refused without touching the
            // store, locally as on one node.
            return BinaryRoute::Local;
        }
        // memcached keeps its discard count in an `int`: past i32::MAX it
        // discards nothing (`protocol/binary.rs`, `swallow_amount`).
        let discard = if i32::try_from(value_len).is_ok() {
            value_len
        } else {
            0
        };
        let op = BinaryOp::RefusedSet {
            key: key.to_vec(),
            discard,
            refused: Refused::TooLarge,
        };
        return forward(head, op);
    }
    if input.len() < head + value_len {
        let taken = BinaryForwarded {
            consumed: head,
            opcode: header.opcode,
            opaque: header.opaque,
            quiet,
            // Its value is not read yet.
            op: BinaryOp::Store {
                cmd,
                mode: StoreMode::Set,
                flags: 0,
                exptime: 0,
                cas: 0,
                key: key.to_vec(),
                value: IoBuf::from_static(b""),
            },
        };
        return BinaryRoute::Incomplete(BinaryArriving {
            block: value_len,
            refused: taken.out_of_memory(value_len),
        });
    }
    let Ok(value) = cursor
        .read_chain(value_len)
        .and_then(|value| value.try_to_iobuf())
    else {
        // No memory for the copy: the local handler says so.
        return BinaryRoute::Local;
    };
    let (flags, exptime) = if extlen == 8 {
        (be_u32(extras), i64::from(be_u32(&extras[4..])))
    } else {
        (0, 0)
    };
    // As `protocol/binary.rs`'s `set_mode`: a CAS value makes set, add
    // and replace a cas.
    let cas = store.shown_cas(header.cas);
    let mode = match cmd {
        APPEND => StoreMode::Append,
        PREPEND => StoreMode::Prepend,
        _ if cas != 0 => StoreMode::Cas,
        ADD => StoreMode::Add,
        REPLACE => StoreMode::Replace,
        _ => StoreMode::Set,
    };
    let op = BinaryOp::Store {
        cmd,
        mode,
        flags,
        exptime,
        cas,
        key: key.to_vec(),
        value,
    };
    forward(head + value_len, op)
}

#[cfg(test)]
mod tests {
    use alloc::vec;

    use super::*;
    use ebb_core::NodeId;

    use crate::cluster::shard_map::{Member, ShardMap};

    const SIZE_MAX: usize = 1024;

    fn map() -> ShardMap {
        let member = |node| Member {
            node: NodeId(node),
            shard_ebb: 32_768 + node,
        };
        ShardMap::new(1, vec![member(1), member(2)]).unwrap()
    }

    /// A key node `node` owns under [`map`].
    fn key_of(node: u32) -> Vec<u8> {
        let map = map();
        (0..)
            .map(|i| alloc::format!("k{i}").into_bytes())
            .find(|key| map.owner(key).unwrap().node == NodeId(node))
            .unwrap()
    }

    fn request(opcode: u8, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = vec![REQUEST_MAGIC, opcode];
        out.extend_from_slice(&u16::try_from(key.len()).unwrap().to_be_bytes());
        out.push(u8::try_from(extras.len()).unwrap());
        out.extend_from_slice(&[0, 0, 0]);
        let body = extras.len() + key.len() + value.len();
        out.extend_from_slice(&u32::try_from(body).unwrap().to_be_bytes());
        out.extend_from_slice(&[1, 2, 3, 4]);
        out.extend_from_slice(&cas.to_be_bytes());
        out.extend_from_slice(extras);
        out.extend_from_slice(key);
        out.extend_from_slice(value);
        out
    }

    /// Routes `bytes` on node 1 under [`map`].
    fn route(bytes: &[u8]) -> BinaryRoute {
        let store = Store::new(1 << 20, SIZE_MAX);
        let map = map();
        route_binary(
            &IoChain::from(IoBuf::from_vec(bytes.to_vec())),
            &View::agreed(&map, NodeId(1)),
            &store,
            SIZE_MAX,
        )
    }

    fn forwarded(bytes: &[u8]) -> BinaryForwarded {
        match route(bytes) {
            BinaryRoute::Forward(forwarded) => forwarded,
            other => panic!("not forwarded: {other:?}"),
        }
    }

    #[test]
    fn gets_of_another_nodes_key_are_forwarded_with_what_their_reply_needs() {
        let far = key_of(2);
        let getkq = forwarded(&request(GETKQ, 0, &[], &far, b""));
        assert_eq!(getkq.consumed, HEADER_LEN + far.len());
        assert_eq!(
            (getkq.opcode, getkq.opaque, getkq.quiet),
            (GETKQ, [1, 2, 3, 4], true)
        );
        assert!(matches!(
            getkq.op,
            BinaryOp::Get { touch: None, with_key: true, with_value: true, ref key } if *key == far
        ));
        let touch = forwarded(&request(TOUCH, 0, &[0, 0, 0, 9], &far, b""));
        assert!(matches!(
            touch.op,
            BinaryOp::Get {
                touch: Some(9),
                with_key: false,
                with_value: false,
                ..
            }
        ));
        // This node's own key, and a malformed get: handled here.
        assert!(matches!(
            route(&request(GET, 0, &[], &key_of(1), b"")),
            BinaryRoute::Local
        ));
        assert!(matches!(
            route(&request(GET, 0, &[0; 4], &far, b"")),
            BinaryRoute::Local
        ));
    }

    #[test]
    fn a_store_waits_for_its_value_and_a_cas_makes_it_a_cas() {
        let far = key_of(2);
        let extras = [0, 0, 0, 7, 0, 0, 0, 60];
        let whole = request(SETQ, 0, &extras, &far, b"value");
        assert!(matches!(
            route(&whole[..whole.len() - 1]),
            BinaryRoute::Incomplete(_)
        ));
        let set = forwarded(&whole);
        assert_eq!(set.consumed, whole.len());
        let BinaryOp::Store {
            cmd,
            mode,
            flags,
            exptime,
            cas,
            ref value,
            ..
        } = set.op
        else {
            panic!("not a store: {:?}", set.op);
        };
        assert_eq!(
            (cmd, mode, flags, exptime, cas),
            (SET, StoreMode::Set, 7, 60, 0)
        );
        assert_eq!(value.as_slice(), b"value");
        let cas_set = forwarded(&request(ADD, 5, &extras, &far, b"v"));
        assert!(matches!(
            cas_set.op,
            BinaryOp::Store {
                mode: StoreMode::Cas,
                cas: 5,
                ..
            }
        ));
        // Over -I: a set becomes a delete at the owner (its value
        // discarded here), other stores are refused here, as the local
        // path refuses them.
        let large = vec![b'x'; SIZE_MAX + 1];
        let refused = forwarded(&request(SET, 0, &extras, &far, &large));
        assert_eq!(refused.consumed, 24 + extras.len() + far.len());
        assert!(
            matches!(&refused.op, BinaryOp::RefusedSet { key, discard, refused: Refused::TooLarge } if *key == far && *discard == SIZE_MAX + 1),
            "{:?}",
            refused.op
        );
        assert!(matches!(
            route(&request(APPEND, 0, &[], &far, &large)),
            BinaryRoute::Local
        ));
    }

    #[test]
    fn arithmetic_deletes_and_flushes_are_forwarded() {
        let far = key_of(2);
        let mut extras = [0u8; 20];
        extras[7] = 3;
        extras[15] = 10;
        let incr = forwarded(&request(INCREMENT, 0, &extras, &far, b""));
        assert!(matches!(
            incr.op,
            BinaryOp::Arith {
                incr: true,
                delta: 3,
                create: Some(Create {
                    initial: 10,
                    exptime: 0
                }),
                ..
            }
        ));
        extras[16..].copy_from_slice(&NO_CREATE.to_be_bytes());
        let decr = forwarded(&request(DECREMENTQ, 8, &extras, &far, b""));
        assert!(decr.quiet);
        assert!(matches!(
            decr.op,
            BinaryOp::Arith {
                incr: false,
                cas: 8,
                create: None,
                ..
            }
        ));
        let delete = forwarded(&request(DELETE, 4, &[], &far, b""));
        assert!(matches!(delete.op, BinaryOp::Delete { cas: 4, .. }));
        let flush = forwarded(&request(FLUSHQ, 0, &[0, 0, 0, 30], b"", b""));
        assert!(flush.quiet);
        assert!(matches!(flush.op, BinaryOp::Flush { delay: 30 }));
        // A flush of bad lengths is the local path's "Invalid arguments".
        assert!(matches!(
            route(&request(FLUSH, 0, &[0; 3], b"", b"")),
            BinaryRoute::Local
        ));
    }
}
