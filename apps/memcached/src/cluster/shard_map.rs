//! The shard map: the members of the cache and an epoch, stored in the
//! application's `GlobalIdMap` under [`SHARD_MAP_KEY`] and watched by
//! every node (`docs/distributed-memcached.md`, "Layout of the shard
//! map").
//!
//! Invariant: a decoded or built map has its members sorted by node id,
//! without duplicates and without node 0 (the frontend), so two maps with
//! the same members compare equal, and owners ([`ShardMap::owner`]) do
//! not depend on the order members joined in.

use alloc::vec::Vec;
use core::fmt;

use ebb_core::NodeId;

use super::hrw;

/// Where the shard map lives in the application's `GlobalIdMap`.
pub const SHARD_MAP_KEY: &str = "memcached/shards";

/// The prefix under which each node registers itself (`memcached/members/N`,
/// under its lease; the value is its shard Ebb id, decimal).
pub const MEMBERS_PREFIX: &str = "memcached/members/";

/// The prefix under which each node publishes the least epoch it may
/// still serve under (`memcached/adopted/N`, under its lease; decimal):
/// the handover fence waits for every registered node's
/// (`docs/distributed-memcached.md`, "Epochs: never a wrong value").
pub const ADOPTED_PREFIX: &str = "memcached/adopted/";

const MAGIC: [u8; 4] = *b"EKVS";
const VERSION: u8 = 1;
const HEADER_LEN: usize = 4 + 1 + 8 + 2;
const MEMBER_LEN: usize = 8;

/// The most members a map holds (its count is a u16; a cache of more
/// nodes than this is not what HRW's per-request cost is made for).
pub const MAX_MEMBERS: usize = 1024;

/// A node of the cache and the Ebb its shard is served by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Member {
    /// The node.
    pub node: NodeId,
    /// Its shard Ebb (the first id of its global range).
    pub shard_ebb: u32,
}

/// The members of the cache at one epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardMap {
    epoch: u64,
    members: Vec<Member>,
}

/// Why a shard map was not built or did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardMapError {
    /// Shorter than its header or than its count says.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes there.
        available: usize,
    },
    /// Bytes after the last member.
    TrailingBytes {
        /// How many.
        extra: usize,
    },
    /// Not a shard map.
    BadMagic,
    /// A version this build does not read.
    Version {
        /// The map's.
        found: u8,
    },
    /// More than [`MAX_MEMBERS`].
    TooManyMembers {
        /// How many.
        count: usize,
    },
    /// Node 0 is the frontend, never a member.
    FrontendAsMember,
    /// Members not in ascending node order, or one node twice.
    Unsorted {
        /// The node out of place.
        node: NodeId,
    },
}

impl fmt::Display for ShardMapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardMapError::Truncated { needed, available } => write!(
                f,
                "shard map truncated: {needed} bytes needed, {available} there"
            ),
            ShardMapError::TrailingBytes { extra } => {
                write!(f, "shard map has {extra} bytes after its last member")
            }
            ShardMapError::BadMagic => f.write_str("not a shard map (bad magic)"),
            ShardMapError::Version { found } => {
                write!(f, "shard map version {found}, this build reads {VERSION}")
            }
            ShardMapError::TooManyMembers { count } => {
                write!(f, "shard map of {count} members, at most {MAX_MEMBERS}")
            }
            ShardMapError::FrontendAsMember => {
                f.write_str("shard map names node 0, the frontend, as a member")
            }
            ShardMapError::Unsorted { node } => write!(
                f,
                "shard map members not in ascending order or repeated at node {node}"
            ),
        }
    }
}

impl ShardMap {
    /// The map of `members` (in any order, each node once) at `epoch`.
    ///
    /// # Errors
    ///
    /// Node 0 among them, a node twice, or too many members.
    pub fn new(epoch: u64, mut members: Vec<Member>) -> Result<ShardMap, ShardMapError> {
        members.sort_unstable();
        check_members(&members)?;
        Ok(ShardMap { epoch, members })
    }

    /// The map before any: epoch 0, no members.
    #[must_use]
    pub fn empty() -> ShardMap {
        ShardMap {
            epoch: 0,
            members: Vec::new(),
        }
    }

    /// The epoch: one more with every change of the member set.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The members, by node id.
    #[must_use]
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The member `node`, if it is one.
    #[must_use]
    pub fn member(&self, node: NodeId) -> Option<Member> {
        self.members
            .binary_search_by_key(&node, |m| m.node)
            .ok()
            .map(|i| self.members[i])
    }

    /// Whether both maps have the same members (epochs aside).
    #[must_use]
    pub fn same_members(&self, other: &ShardMap) -> bool {
        self.members == other.members
    }

    /// The map with `members` instead, at the next epoch, or `None` when
    /// the members are the same (nothing to write).
    ///
    /// # Errors
    ///
    /// As [`ShardMap::new`].
    pub fn successor(&self, members: Vec<Member>) -> Result<Option<ShardMap>, ShardMapError> {
        let next = ShardMap::new(self.epoch.wrapping_add(1), members)?;
        Ok((!self.same_members(&next)).then_some(next))
    }

    /// The member owning `key` (rendezvous hashing, `hrw.rs`); `None`
    /// for an empty map.
    #[must_use]
    pub fn owner(&self, key: &[u8]) -> Option<Member> {
        let hash = hrw::key_hash(key);
        self.members
            .iter()
            .copied()
            .max_by_key(|m| (hrw::score(hash, m.node), m.node.0))
    }

    /// The map's bytes (`docs/distributed-memcached.md`).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + MEMBER_LEN * self.members.len());
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&self.epoch.to_le_bytes());
        // At most MAX_MEMBERS (checked when built), so it fits.
        let count = u16::try_from(self.members.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&count.to_le_bytes());
        for member in &self.members {
            out.extend_from_slice(&member.node.0.to_le_bytes());
            out.extend_from_slice(&member.shard_ebb.to_le_bytes());
        }
        out
    }

    /// Decodes a map, strictly: any deviation from the layout is an error.
    ///
    /// # Errors
    ///
    /// Which deviation.
    pub fn decode(bytes: &[u8]) -> Result<ShardMap, ShardMapError> {
        if bytes.len() < HEADER_LEN {
            return Err(ShardMapError::Truncated {
                needed: HEADER_LEN,
                available: bytes.len(),
            });
        }
        if bytes[0..4] != MAGIC {
            return Err(ShardMapError::BadMagic);
        }
        if bytes[4] != VERSION {
            return Err(ShardMapError::Version { found: bytes[4] });
        }
        let epoch = u64::from_le_bytes(bytes[5..13].try_into().unwrap_or_default());
        let count = usize::from(u16::from_le_bytes([bytes[13], bytes[14]]));
        if count > MAX_MEMBERS {
            return Err(ShardMapError::TooManyMembers { count });
        }
        let needed = HEADER_LEN + count * MEMBER_LEN;
        if bytes.len() < needed {
            return Err(ShardMapError::Truncated {
                needed,
                available: bytes.len(),
            });
        }
        if bytes.len() > needed {
            return Err(ShardMapError::TrailingBytes {
                extra: bytes.len() - needed,
            });
        }
        let members: Vec<Member> = bytes[HEADER_LEN..]
            .chunks_exact(MEMBER_LEN)
            .map(|m| Member {
                node: NodeId(u32::from_le_bytes([m[0], m[1], m[2], m[3]])),
                shard_ebb: u32::from_le_bytes([m[4], m[5], m[6], m[7]]),
            })
            .collect();
        // Decoded members must already be in order: a map that is not is
        // not one this code wrote.
        check_members(&members)?;
        Ok(ShardMap { epoch, members })
    }
}

/// Sorted by node, each node once, no node 0, not too many.
fn check_members(members: &[Member]) -> Result<(), ShardMapError> {
    if members.len() > MAX_MEMBERS {
        return Err(ShardMapError::TooManyMembers {
            count: members.len(),
        });
    }
    if members.iter().any(|m| m.node.0 == 0) {
        return Err(ShardMapError::FrontendAsMember);
    }
    for pair in members.windows(2) {
        if pair[0].node >= pair[1].node {
            return Err(ShardMapError::Unsorted { node: pair[1].node });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn member(node: u32) -> Member {
        Member {
            node: NodeId(node),
            shard_ebb: 32_768 + 64 * node,
        }
    }

    #[test]
    fn a_map_round_trips_and_sorts_its_members() {
        let map = ShardMap::new(7, vec![member(3), member(1), member(2)]).unwrap();
        assert_eq!(map.members(), &[member(1), member(2), member(3)]);
        assert_eq!(ShardMap::decode(&map.encode()), Ok(map.clone()));
        assert_eq!(map.member(NodeId(2)), Some(member(2)));
        assert_eq!(map.member(NodeId(4)), None);
    }

    #[test]
    fn bad_members_are_refused() {
        assert_eq!(
            ShardMap::new(1, vec![member(0), member(1)]),
            Err(ShardMapError::FrontendAsMember)
        );
        assert_eq!(
            ShardMap::new(1, vec![member(2), member(2)]),
            Err(ShardMapError::Unsorted { node: NodeId(2) })
        );
    }

    #[test]
    fn a_successor_has_the_next_epoch_only_when_members_change() {
        let map = ShardMap::new(4, vec![member(1), member(2)]).unwrap();
        assert_eq!(map.successor(vec![member(2), member(1)]), Ok(None));
        let next = map.successor(vec![member(1)]).unwrap().unwrap();
        assert_eq!((next.epoch(), next.members()), (5, &[member(1)][..]));
    }

    #[test]
    fn each_deviation_is_its_own_error() {
        let good = ShardMap::new(9, vec![member(1), member(2)])
            .unwrap()
            .encode();
        let with = |at: usize, byte: u8| {
            let mut bytes = good.clone();
            bytes[at] = byte;
            ShardMap::decode(&bytes)
        };
        assert_eq!(with(0, b'X'), Err(ShardMapError::BadMagic));
        assert_eq!(with(4, 2), Err(ShardMapError::Version { found: 2 }));
        assert_eq!(
            ShardMap::decode(&good[..10]),
            Err(ShardMapError::Truncated {
                needed: HEADER_LEN,
                available: 10
            })
        );
        assert_eq!(
            ShardMap::decode(&good[..good.len() - 1]),
            Err(ShardMapError::Truncated {
                needed: good.len(),
                available: good.len() - 1
            })
        );
        let mut long = good.clone();
        long.push(0);
        assert_eq!(
            ShardMap::decode(&long),
            Err(ShardMapError::TrailingBytes { extra: 1 })
        );
        // Members swapped: node 2 before node 1.
        let mut swapped = good.clone();
        swapped[HEADER_LEN..].rotate_left(MEMBER_LEN);
        assert_eq!(
            ShardMap::decode(&swapped),
            Err(ShardMapError::Unsorted { node: NodeId(1) })
        );
        // Node 0 as the first member.
        assert_eq!(with(HEADER_LEN, 0), Err(ShardMapError::FrontendAsMember));
        let mut many = good[..HEADER_LEN].to_vec();
        many[13..15].copy_from_slice(&1025u16.to_le_bytes());
        assert_eq!(
            ShardMap::decode(&many),
            Err(ShardMapError::TooManyMembers { count: 1025 })
        );
    }

    #[test]
    fn the_owner_is_hrw_over_the_members() {
        let map = ShardMap::new(1, vec![member(1), member(2), member(3)]).unwrap();
        for key in [&b"a"[..], b"b", b"user:17"] {
            let expected = hrw::owner(key, [NodeId(1), NodeId(2), NodeId(3)]).unwrap();
            assert_eq!(map.owner(key).map(|m| m.node), Some(expected));
        }
        assert_eq!(ShardMap::new(1, vec![]).unwrap().owner(b"a"), None);
    }
}
