//! memcached as one cache across nodes (`docs/distributed-memcached.md`):
//! who owns a key, the shard map every node keeps, and the protocol a
//! node forwards requests for other nodes' keys with.
//!
//! No platform and no Messenger here: ownership (`hrw.rs`), the shard
//! map (`shard_map.rs`) and the forwarding controls (`forward.rs`) are
//! pure logic; `serve.rs` answers a forwarded request from the store and
//! `sweep.rs` drops the keys a new map gave away. The node role that
//! carries them over the Messenger is built on top.

pub mod forward;
pub mod hrw;
pub mod membership;
pub mod serve;
pub mod shard_map;
pub mod sweep;

pub use forward::{
    get_batches, Command, Entry, ForwardError, ForwardReply, ForwardRequest, StoreMode,
    MAX_CONTROL_LEN, MAX_GET_KEYS,
};
pub use hrw::{owner, score};
pub use shard_map::{Member, ShardMap, ShardMapError, MEMBERS_PREFIX, SHARD_MAP_KEY};
