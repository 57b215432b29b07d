//! Which text requests a node forwards (`docs/distributed-memcached.md`,
//! "The forwarding protocol"): a well-formed get, gets, gat, gats, set,
//! add, replace, append, prepend, cas, delete, incr, decr or touch that
//! names a key this node does not serve now: another node's, or one of
//! its own that a fence holds back (`current.rs`; the forwarding path
//! answers it as a miss or refuses the write).
//!
//! Everything else is handled here as on a single node: other commands,
//! requests for this node's own keys, and malformed ones (the local
//! handler answers their error without touching the store, exactly as
//! memcached would), and values over `-I` (refused and swallowed
//! locally), except a `set`'s: a single memcached refusing it drops the
//! old item (`refuse` in protocol/text/storage.rs), so the owner is sent
//! a delete ([`TextOp::RefusedSet`]). A store whose value has not all
//! arrived waits for it. The meta commands mg, ms, md and ma naming
//! another node's key go to its owner as they are (`meta_forward.rs`),
//! except that an `ms` whose value is over `-I` goes without its data
//! block, which is thrown away as it arrives: the owner's handler
//! refuses it as a single memcached does, dropping the old item; `me` is
//! refused ([`META_REFUSED`]).

use alloc::vec::Vec;

use ebb_iobuf::{IoBuf, IoChain};

use super::current::View;
use super::forward::StoreMode;
use super::meta_forward::meta_key;
use crate::protocol::common::{key_ok, parse_i32, parse_u32, parse_u64};
use crate::protocol::text::line::{data_block, Block, Request};
use crate::protocol::text::tokens::{all_tokens, tokenize};

/// The reply to a set refused for its size, as a single memcached's.
pub const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";

/// What to do with the first request of a connection's input.
#[derive(Debug)]
pub enum Route {
    /// Handle it here, as a single node would.
    Local,
    /// A store for another node's key whose value is still arriving.
    Incomplete(Arriving),
    /// Forward it.
    Forward(Forwarded),
    /// Refuse it: take `consumed` bytes and answer `line`.
    Refuse {
        /// Input bytes it took (line and data block).
        consumed: usize,
        /// The reply.
        line: &'static [u8],
    },
}

/// A store for another node's key whose value is still arriving: the
/// connection holds its data block until it is all there and then until
/// the owner answered, and reserves it from `-m` meanwhile, as a local
/// store's value is (`Store::reserve`, `docs/distributed-memcached.md`,
/// "Values on their way").
#[derive(Debug)]
pub struct Arriving {
    /// The data block's length (value and CRLF): what to reserve.
    pub block: usize,
    /// What to do instead when it cannot be reserved: the line taken,
    /// the block thrown away as it arrives, and memcached's
    /// `SERVER_ERROR out of memory storing object`.
    pub refused: Forwarded,
}

/// The reply to a store refused because the values on their way fill
/// `-m`, as memcached's when `item_alloc` fails.
pub const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";

/// The reply to `me` (memcached's debug dump of an item) on a node of
/// several: it is not forwarded, and answering it from the node's own
/// store could show a key the node no longer owns before the sweep drops
/// it.
pub const META_REFUSED: &[u8] = b"SERVER_ERROR me is not served by a node of several\r\n";

/// A request to forward, taken out of the input.
#[derive(Debug)]
pub struct Forwarded {
    /// Input bytes it took (line and data block).
    pub consumed: usize,
    /// memcached's `noreply`: the client gets no reply.
    pub noreply: bool,
    /// The command.
    pub op: TextOp,
}

/// A forwarded text command, owning its keys and value (a copy out of
/// the receive buffers, which a connection never keeps across events).
#[derive(Debug)]
pub enum TextOp {
    /// get, gets, gat, gats.
    Get {
        /// gets, gats: CAS values shown.
        with_cas: bool,
        /// gat, gats: the new expiry time.
        touch: Option<i64>,
        /// In the client's order.
        keys: Vec<Vec<u8>>,
    },
    /// set, add, replace, append, prepend, cas.
    Store {
        /// Which.
        mode: StoreMode,
        /// The client's flags.
        flags: u32,
        /// Its expiry time, as given.
        exptime: i64,
        /// Its CAS value (cas only).
        cas: u64,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: IoBuf,
    },
    /// delete.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// incr, decr.
    Arith {
        /// incr.
        incr: bool,
        /// By how much.
        delta: u64,
        /// The key.
        key: Vec<u8>,
    },
    /// touch.
    Touch {
        /// The new expiry time.
        exptime: i64,
        /// The key.
        key: Vec<u8>,
    },
    /// flush_all: every node's store (`flush.rs`).
    Flush {
        /// The delay as given (0: now).
        delay: i64,
    },
    /// mg, ms, md, ma: run by the owner as sent (`meta_forward.rs`).
    Meta {
        /// The key it acts on.
        key: Vec<u8>,
        /// The command line, with its newline.
        line: Vec<u8>,
        /// ms's data block with its CRLF; empty otherwise, and for an
        /// ms whose value is over `-I`.
        block: IoChain,
        /// The data block of an ms over `-I`, thrown away as it arrives
        /// (0 otherwise).
        discard: usize,
    },
    /// A set (or ms) refused for its value's size (over `-I`, not
    /// read) or for memory (the values on their way fill `-m`): the
    /// owner deletes the key, as a single memcached drops the old item,
    /// and the client gets memcached's error for the refusal.
    RefusedSet {
        /// The key.
        key: Vec<u8>,
        /// The value's bytes and its CRLF, thrown away as they arrive.
        discard: usize,
        /// The reply once the old item is gone.
        reply: &'static [u8],
    },
    /// A store refused here that leaves the old item (add, replace,
    /// append, prepend, cas out of memory): `reply`, nothing forwarded.
    Refused {
        /// The value's bytes and its CRLF, thrown away as they arrive.
        discard: usize,
        /// The reply.
        reply: &'static [u8],
    },
}

impl TextOp {
    /// Input bytes after the request to throw away as they arrive (a
    /// refused set's data block).
    #[must_use]
    pub fn discard(&self) -> usize {
        match self {
            TextOp::RefusedSet { discard, .. }
            | TextOp::Refused { discard, .. }
            | TextOp::Meta { discard, .. } => *discard,
            _ => 0,
        }
    }

    /// The bytes of its value this node holds until the owner answered
    /// (a store's value, an ms's data block): reserved from `-m` while
    /// it is on its way.
    #[must_use]
    pub fn value_len(&self) -> usize {
        match self {
            TextOp::Store { value, .. } => value.len(),
            TextOp::Meta { block, .. } => block.len(),
            _ => 0,
        }
    }
}

impl Forwarded {
    /// The same request refused because its value cannot be reserved
    /// (see [`Arriving`]): a set or ms still drops the owner's old item,
    /// as memcached's do when `item_alloc` fails; the other stores leave
    /// it. `discard`: the value's bytes not yet taken from the input.
    #[must_use]
    pub fn out_of_memory(self, discard: usize) -> Forwarded {
        let op = match self.op {
            TextOp::Store {
                mode: StoreMode::Set,
                key,
                ..
            }
            | TextOp::Meta { key, .. } => TextOp::RefusedSet {
                key,
                discard,
                reply: OUT_OF_MEMORY,
            },
            _ => TextOp::Refused {
                discard,
                reply: OUT_OF_MEMORY,
            },
        };
        Forwarded { op, ..self }
    }
}

/// Whether this node serves `key` from its store now (a key it owns but
/// is fenced from goes the forwarding path, which answers it as a miss
/// or refuses the write: `text_forward.rs`).
fn mine(view: &View<'_>, key: &[u8]) -> bool {
    view.serves(key)
}

/// Where the first request of `input` goes, for the node `view`
/// describes (`item_size_max`: `-I`).
#[must_use]
pub fn route_text(input: &IoChain, view: &View<'_>, item_size_max: usize) -> Route {
    let Some(request) = Request::parse(input) else {
        return Route::Local;
    };
    let tokens = tokenize(&request.line);
    let list = tokens.list();
    let forward = |op: TextOp, consumed: usize| {
        Route::Forward(Forwarded {
            consumed,
            noreply: tokens.noreply(),
            op,
        })
    };
    let Some(&command) = list.first() else {
        return Route::Local;
    };
    let key = tokens.get(1);
    match command {
        b"get" | b"gets" | b"gat" | b"gats" => {
            let touch = command.starts_with(b"gat");
            let first_key = if touch { 2 } else { 1 };
            let exptime = if touch {
                match parse_i32(key) {
                    Some(exptime) => Some(i64::from(exptime)),
                    None => return Route::Local,
                }
            } else {
                None
            };
            let more = tokens.rest.into_iter().flat_map(all_tokens);
            let keys: Vec<&[u8]> = list.iter().skip(first_key).copied().chain(more).collect();
            let well_formed = !keys.is_empty() && keys.iter().all(|key| key_ok(key));
            if !well_formed || keys.iter().all(|key| mine(view, key)) {
                return Route::Local;
            }
            let op = TextOp::Get {
                with_cas: command.ends_with(b"s"),
                touch: exptime,
                keys: keys.iter().map(|key| key.to_vec()).collect(),
            };
            Route::Forward(Forwarded {
                consumed: request.line_end,
                // A get has no noreply.
                noreply: false,
                op,
            })
        }
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            let mode = match command {
                b"set" => StoreMode::Set,
                b"add" => StoreMode::Add,
                b"replace" => StoreMode::Replace,
                b"append" => StoreMode::Append,
                b"prepend" => StoreMode::Prepend,
                _ => StoreMode::Cas,
            };
            let is_cas = mode == StoreMode::Cas;
            let arguments = if is_cas { 6 } else { 5 };
            if !(arguments..=arguments + 1).contains(&list.len()) || !key_ok(key) || mine(view, key)
            {
                return Route::Local;
            }
            let cas = if is_cas {
                parse_u64(tokens.get(5))
            } else {
                Some(0)
            };
            let numbers = (
                parse_u32(tokens.get(2)),
                parse_i32(tokens.get(3)),
                parse_i32(tokens.get(4)).and_then(|len| usize::try_from(len).ok()),
                cas,
            );
            let (Some(flags), Some(exptime), Some(len), Some(cas)) = numbers else {
                return Route::Local;
            };
            if len > item_size_max {
                // A length memcached calls bad format is the local
                // handler's to answer.
                let bad_format = len > usize::try_from(i32::MAX - 2).unwrap_or(0);
                if mode != StoreMode::Set || bad_format {
                    return Route::Local;
                }
                let op = TextOp::RefusedSet {
                    key: key.to_vec(),
                    discard: len + 2,
                    reply: TOO_LARGE,
                };
                return forward(op, request.line_end);
            }
            let value = match data_block(input, request.line_end, len + 2) {
                Block::Incomplete => {
                    return arriving(
                        TextOp::Store {
                            mode,
                            flags,
                            exptime: i64::from(exptime),
                            cas,
                            key: key.to_vec(),
                            value: IoBuf::from_static(b""),
                        },
                        request.line_end,
                        tokens.noreply(),
                        len + 2,
                    )
                }
                Block::Bad => return Route::Local,
                Block::Good(value) => value,
            };
            let Ok(value) = value.try_to_iobuf() else {
                // No memory for the copy: the local handler says so.
                return Route::Local;
            };
            let op = TextOp::Store {
                mode,
                flags,
                exptime: i64::from(exptime),
                cas,
                key: key.to_vec(),
                value,
            };
            forward(op, request.line_end + len + 2)
        }
        b"delete" if (2..=4).contains(&list.len()) && key_ok(key) && !mine(view, key) => {
            // memcached accepts `delete <key> 0` and `noreply` only.
            let extra = &list[2..];
            let accepted = match extra {
                [] => true,
                [one] => *one == b"0" || *one == b"noreply",
                [zero, noreply] => *zero == b"0" && *noreply == b"noreply",
                _ => false,
            };
            if !accepted {
                return Route::Local;
            }
            forward(TextOp::Delete { key: key.to_vec() }, request.line_end)
        }
        b"incr" | b"decr" if (3..=4).contains(&list.len()) && key_ok(key) && !mine(view, key) => {
            let Some(delta) = parse_u64(tokens.get(2)) else {
                return Route::Local;
            };
            let op = TextOp::Arith {
                incr: command == b"incr",
                delta,
                key: key.to_vec(),
            };
            forward(op, request.line_end)
        }
        b"touch" if (3..=4).contains(&list.len()) && key_ok(key) && !mine(view, key) => {
            let Some(exptime) = parse_i32(tokens.get(2)) else {
                return Route::Local;
            };
            let op = TextOp::Touch {
                exptime: i64::from(exptime),
                key: key.to_vec(),
            };
            forward(op, request.line_end)
        }
        b"flush_all" if (1..=3).contains(&list.len()) => {
            // As the local handler reads it: `flush_all [delay] [noreply]`
            // (a bad delay is its CLIENT_ERROR, answered locally).
            let delay = if list.len() == if tokens.noreply() { 2 } else { 1 } {
                0
            } else {
                match parse_i32(key) {
                    Some(delay) => i64::from(delay),
                    None => return Route::Local,
                }
            };
            forward(TextOp::Flush { delay }, request.line_end)
        }
        [b'm', b'g' | b's' | b'd' | b'a'] => {
            let Some(key) = meta_key(&request.line) else {
                // Its handler answers an error, touching no store.
                return Route::Local;
            };
            if mine(view, &key) {
                return Route::Local;
            }
            let mut block = IoChain::new();
            let mut discard = 0;
            if command == b"ms" {
                let Some(len) = parse_i32(tokens.get(2)).and_then(|len| usize::try_from(len).ok())
                else {
                    return Route::Local;
                };
                // A length memcached calls bad format is the local
                // handler's to answer.
                if len > usize::try_from(i32::MAX - 2).unwrap_or(0) {
                    return Route::Local;
                }
                if len > item_size_max {
                    // The owner refuses it from the line alone and drops
                    // the old item, as a single memcached's mset does
                    // (protocol/meta/set.rs): the value is not carried.
                    discard = len + 2;
                } else {
                    match ms_block(input, request.line_end, len + 2) {
                        Ok(copied) => block = copied,
                        Err(None) => {
                            let op = TextOp::Meta {
                                key,
                                line: Vec::new(),
                                block,
                                discard: 0,
                            };
                            // The owner's reply says what q leaves out,
                            // and q never hides an error.
                            return arriving(op, request.line_end, false, len + 2);
                        }
                        Err(Some(route)) => return route,
                    }
                }
            }
            let Ok(line) = input
                .cursor()
                .read_chain(request.line_end)
                .map(|line| line.to_vec())
            else {
                return Route::Local;
            };
            Route::Forward(Forwarded {
                consumed: request.line_end + block.len(),
                // The owner's reply says what q leaves out.
                noreply: false,
                op: TextOp::Meta {
                    key,
                    line,
                    block,
                    discard,
                },
            })
        }
        [b'm', b'e'] => Route::Refuse {
            consumed: request.line_end,
            line: META_REFUSED,
        },
        _ => Route::Local,
    }
}

/// The route of a store for another node's key whose data block of
/// `block` bytes after the line (`line_end` bytes) is still arriving:
/// `op` (its value not read yet) is what it refuses if the block cannot
/// be reserved ([`Arriving`]).
fn arriving(op: TextOp, line_end: usize, noreply: bool, block: usize) -> Route {
    let taken = Forwarded {
        consumed: line_end,
        noreply,
        op,
    };
    Route::Incomplete(Arriving {
        block,
        refused: taken.out_of_memory(block),
    })
}

/// The data block of `block_len` bytes after an ms line ending at
/// `line_end`, copied out of the receive buffers; `Err(None)` when it has
/// not all arrived, or the route when it cannot be forwarded at all (not
/// ending in CRLF, or no memory for the copy: the local handler answers
/// those).
fn ms_block(input: &IoChain, line_end: usize, block_len: usize) -> Result<IoChain, Option<Route>> {
    match data_block(input, line_end, block_len) {
        Block::Incomplete => return Err(None),
        Block::Bad => return Err(Some(Route::Local)),
        Block::Good(_) => {}
    }
    let mut cursor = input.cursor();
    cursor
        .skip(line_end)
        .and_then(|()| cursor.read_chain(block_len))
        .and_then(|chain| chain.try_to_iobuf())
        .map(IoChain::from)
        .map_err(|_| Some(Route::Local))
}
