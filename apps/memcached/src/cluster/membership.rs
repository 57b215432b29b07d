//! Membership: each node registers under [`MEMBERS_PREFIX`] with its
//! lease, and whichever node sees the registrations differ from the shard
//! map writes the next map (`docs/distributed-memcached.md`,
//! "Membership").
//!
//! Invariant: the stored map's epoch grows by exactly one per change of
//! the member set, however many nodes reconcile at once, because the new
//! map is written by compare-and-swap against the bytes it was computed
//! from; a node that loses the race reads the winner's map and finds
//! nothing left to do. A stored map or registration that does not decode
//! is reported, never overwritten: this code never destroys what it
//! cannot read.
//!
//! Everything goes through `ebb_core::GlobalIdMap`, so the same code runs
//! against the in-process map, etcd, or (native nodes) the hosted node's
//! map over the Messenger.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use ebb_core::{GlobalIdMap, Lease, MapError, NodeId, Swap};

use super::shard_map::{
    Member, ShardMap, ShardMapError, ADOPTED_PREFIX, MEMBERS_PREFIX, SHARD_MAP_KEY,
};

/// How many compare-and-swap races [`reconcile`] loses before it gives
/// up: each lost race means another node wrote a newer map, so losing
/// this many in a row means the member set keeps changing under it.
pub const MAX_ATTEMPTS: usize = 8;

/// Why membership could not be read or written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MembershipError {
    /// The map failed (unreachable, invalid key, expired lease, …).
    Map(MapError),
    /// A registration under [`MEMBERS_PREFIX`] that is not `N` →
    /// decimal shard Ebb id.
    BadRegistration {
        /// Its key.
        key: String,
    },
    /// The stored shard map does not decode (left as it is).
    BadShardMap(ShardMapError),
    /// The registrations do not make a map (node 0 registered).
    BadMembers(ShardMapError),
    /// Lost [`MAX_ATTEMPTS`] compare-and-swap races in a row.
    Contended,
}

impl From<MapError> for MembershipError {
    fn from(error: MapError) -> Self {
        MembershipError::Map(error)
    }
}

impl fmt::Display for MembershipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MembershipError::Map(error) => write!(f, "memcached membership: {error}"),
            MembershipError::BadRegistration { key } => write!(
                f,
                "memcached membership: the registration {key} is not a node's shard Ebb id"
            ),
            MembershipError::BadShardMap(error) => write!(
                f,
                "memcached membership: the stored {SHARD_MAP_KEY} is unreadable and left as it is: {error}"
            ),
            MembershipError::BadMembers(error) => {
                write!(f, "memcached membership: the registrations: {error}")
            }
            MembershipError::Contended => write!(
                f,
                "memcached membership: lost {MAX_ATTEMPTS} races to write {SHARD_MAP_KEY} in a row"
            ),
        }
    }
}

/// Where `node` registers.
#[must_use]
pub fn member_key(node: NodeId) -> String {
    format!("{MEMBERS_PREFIX}{}", node.0)
}

/// Registers `member` under `lease` (its entry goes when the lease ends:
/// the node is lost).
///
/// # Errors
///
/// The map's.
pub async fn register(
    map: &dyn GlobalIdMap,
    member: Member,
    lease: Lease,
) -> Result<(), MembershipError> {
    let value = format!("{}", member.shard_ebb).into_bytes();
    map.set(&member_key(member.node), value, Some(lease))
        .await?;
    Ok(())
}

/// The registered members, by node.
///
/// # Errors
///
/// The map's, or a registration that does not parse.
pub async fn registered(map: &dyn GlobalIdMap) -> Result<Vec<Member>, MembershipError> {
    map.list(MEMBERS_PREFIX)
        .await?
        .into_iter()
        .map(|(key, value)| parse_registration(&key, &value))
        .collect()
}

/// `memcached/members/N` → decimal shard Ebb id, both canonical decimal.
fn parse_registration(key: &str, value: &[u8]) -> Result<Member, MembershipError> {
    let bad = || MembershipError::BadRegistration {
        key: String::from(key),
    };
    let node = key
        .strip_prefix(MEMBERS_PREFIX)
        .and_then(canonical_u32)
        .ok_or_else(bad)?;
    let shard_ebb = core::str::from_utf8(value)
        .ok()
        .and_then(canonical_u32)
        .ok_or_else(bad)?;
    Ok(Member {
        node: NodeId(node),
        shard_ebb,
    })
}

/// A u32 in decimal without sign or leading zeros (so one value has one
/// spelling, and one node one key).
fn canonical_u32(text: &str) -> Option<u32> {
    canonical_u64(text).and_then(|value| u32::try_from(value).ok())
}

/// A u64 in decimal without sign or leading zeros.
fn canonical_u64(text: &str) -> Option<u64> {
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    if !digits_only || leading_zero {
        return None;
    }
    text.parse().ok()
}

/// Where `node` publishes the least epoch it may still serve under.
#[must_use]
pub fn adopted_key(node: NodeId) -> String {
    format!("{ADOPTED_PREFIX}{}", node.0)
}

/// Publishes that `node` serves under no epoch older than `epoch`, under
/// `lease` (gone with the node's registration).
///
/// # Errors
///
/// The map's.
pub async fn publish_adopted(
    map: &dyn GlobalIdMap,
    node: NodeId,
    epoch: u64,
    lease: Lease,
) -> Result<(), MembershipError> {
    map.set(
        &adopted_key(node),
        format!("{epoch}").into_bytes(),
        Some(lease),
    )
    .await?;
    Ok(())
}

/// The epoch every registered node has published (`adopted/N`) it
/// adopted, or a later one: the least of theirs, a registered node that
/// published nothing readable counting as 0 (it may still serve under
/// any epoch); `u64::MAX` when none is registered. Also what `me`
/// published, if anything.
///
/// # Errors
///
/// The map's, or a registration that does not parse.
pub async fn settled_epoch(
    map: &dyn GlobalIdMap,
    me: NodeId,
) -> Result<(u64, Option<u64>), MembershipError> {
    // The promises first, then the registrations: a node registered
    // only after the promises were read counts as 0, and one registered
    // only after the registrations were read promises no less than the
    // map stored then, which is at least every promise read before.
    let adopted: Vec<(NodeId, u64)> = map
        .list(ADOPTED_PREFIX)
        .await?
        .into_iter()
        .filter_map(|(key, value)| {
            let node = key.strip_prefix(ADOPTED_PREFIX).and_then(canonical_u32)?;
            let epoch = core::str::from_utf8(&value).ok().and_then(canonical_u64)?;
            Some((NodeId(node), epoch))
        })
        .collect();
    let members = registered(map).await?;
    let of = |node: NodeId| {
        adopted
            .iter()
            .find(|(n, _)| *n == node)
            .map(|&(_, epoch)| epoch)
    };
    let settled = members
        .iter()
        .map(|member| of(member.node).unwrap_or(0))
        .min()
        .unwrap_or(u64::MAX);
    Ok((settled, of(me)))
}

/// The shard map as stored (`None`: none yet), and its bytes for the
/// compare-and-swap.
async fn stored_map(map: &dyn GlobalIdMap) -> Result<(Option<Vec<u8>>, ShardMap), MembershipError> {
    let bytes = map.get(SHARD_MAP_KEY).await?;
    let current = match &bytes {
        None => ShardMap::empty(),
        Some(bytes) => ShardMap::decode(bytes).map_err(MembershipError::BadShardMap)?,
    };
    Ok((bytes, current))
}

/// The shard map in force, written first if the registrations differ
/// from the stored map's members (the next epoch; the first map is epoch
/// 1).
///
/// # Errors
///
/// The map's; an unreadable stored map or registration; too many lost
/// races.
pub async fn reconcile(map: &dyn GlobalIdMap) -> Result<ShardMap, MembershipError> {
    for _ in 0..MAX_ATTEMPTS {
        let members = registered(map).await?;
        let (bytes, current) = stored_map(map).await?;
        let Some(next) = current
            .successor(members)
            .map_err(MembershipError::BadMembers)?
        else {
            return Ok(current);
        };
        match map
            .compare_and_swap(SHARD_MAP_KEY, bytes, next.encode())
            .await?
        {
            Swap::Done => return Ok(next),
            // Another node wrote first: read again.
            Swap::Conflict(_) => {}
        }
    }
    Err(MembershipError::Contended)
}

/// The stored shard map, without writing anything (`None`: none yet).
///
/// # Errors
///
/// The map's, or a stored map that does not decode.
pub async fn current(map: &dyn GlobalIdMap) -> Result<Option<ShardMap>, MembershipError> {
    let (bytes, current) = stored_map(map).await?;
    Ok(bytes.map(|_| current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_are_canonical_decimal() {
        let key = member_key(NodeId(3));
        assert_eq!(key, "memcached/members/3");
        assert_eq!(
            parse_registration(&key, b"32832"),
            Ok(Member {
                node: NodeId(3),
                shard_ebb: 32_832
            })
        );
        for (key, value) in [
            ("memcached/members/03", &b"1"[..]),
            ("memcached/members/x", b"1"),
            ("memcached/members/", b"1"),
            ("memcached/members/3", b"+1"),
            ("memcached/members/3", b""),
            ("memcached/members/3", b"4294967296"),
            ("other/3", b"1"),
        ] {
            assert_eq!(
                parse_registration(key, value),
                Err(MembershipError::BadRegistration {
                    key: String::from(key)
                }),
                "{key} {value:?}"
            );
        }
    }
}
