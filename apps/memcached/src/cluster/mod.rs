//! memcached as one cache across nodes (`docs/distributed-memcached.md`):
//! who owns a key, the shard map every node keeps, and the protocol a
//! node forwards requests for other nodes' keys with.
//!
//! Pure logic: ownership (`hrw.rs`), the shard map (`shard_map.rs`)
//! and the forwarding controls (`forward.rs`). On a node: `serve.rs`
//! answers a forwarded request from the store, `sweep.rs` drops the keys
//! a new map gave away, `current.rs` holds the map in force and adopts
//! the next, `membership.rs` registers the node and writes new maps in
//! the `GlobalIdMap`, and `shard_ebb.rs` is the Ebb the Messenger hands
//! forwarded requests to. The connection's forwarding path and the node
//! role are built on top.

pub mod binary_forward;
pub mod binary_route;
pub mod current;
pub mod deferred;
pub mod flush;
pub mod forward;
pub mod forwarder;
pub mod hrw;
pub mod membership;
pub mod meta_forward;
pub mod node;
pub mod route;
pub mod serve;
pub mod shard_ebb;
pub mod shard_map;
pub mod sweep;
pub mod text_forward;

pub use forward::{
    get_batches, Command, Create, Entry, ForwardError, ForwardReply, ForwardRequest, StoreMode,
    MAX_CONTROL_LEN, MAX_GET_KEYS,
};
pub use hrw::{owner, score};
pub use shard_map::{
    Member, ShardMap, ShardMapError, ADOPTED_PREFIX, MEMBERS_PREFIX, SHARD_MAP_KEY,
};
