//! Rendezvous (highest random weight) hashing: the owner of a key is the
//! member with the highest score for it (Thaler and Ravishankar, "Using
//! name-based mappings to increase hit rates", IEEE/ACM ToN 6(1), 1998).
//!
//! Invariant: the owner depends only on the key and the *set* of members,
//! never on their order or on which node computes it, and both hashes
//! are written out here, so every node of a cluster, whatever its build,
//! picks the same owner. Adding a member moves only the keys it now wins,
//! all of them to it; removing one moves only its own keys.

use ebb_core::NodeId;

/// FNV-1a, 64-bit (the FNV specification's offset basis and prime,
/// draft-eastlake-fnv).
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// MurmurHash3's 64-bit finalizer (`fmix64`): every input bit affects
/// every output bit, which FNV alone does not give the high bits.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// The key's hash, computed once per request and combined with each
/// member's by [`score`].
#[must_use]
pub fn key_hash(key: &[u8]) -> u64 {
    fnv1a64(key)
}

/// Member `node`'s score for the key whose [`key_hash`] is `key_hash`.
#[must_use]
pub fn score(key_hash: u64, node: NodeId) -> u64 {
    fmix64(key_hash ^ fmix64(u64::from(node.0)))
}

/// The owner of `key` among `members`: the highest score, ties to the
/// larger node id. `None` when there are no members.
pub fn owner(key: &[u8], members: impl IntoIterator<Item = NodeId>) -> Option<NodeId> {
    let hash = key_hash(key);
    members
        .into_iter()
        .max_by_key(|&node| (score(hash, node), node.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hashes_are_the_published_functions() {
        // FNV-1a 64 test vectors (draft-eastlake-fnv, section 6 / the
        // reference code's test suite).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        // fmix64 maps 0 to 0 and is a bijection (spot check).
        assert_eq!(fmix64(0), 0);
        assert_ne!(fmix64(1), fmix64(2));
    }

    #[test]
    fn no_members_no_owner_and_one_member_owns_everything() {
        assert_eq!(owner(b"k", []), None);
        for key in [&b"a"[..], b"bb", b"some:key:42"] {
            assert_eq!(owner(key, [NodeId(7)]), Some(NodeId(7)));
        }
    }

    #[test]
    fn owners_are_fixed_across_builds() {
        // Pinned so that a change of either hash (which would make nodes
        // of two builds disagree on owners) fails here first.
        let members = [NodeId(1), NodeId(2), NodeId(3)];
        let owners: alloc::vec::Vec<u32> = [
            &b"alpha"[..],
            b"beta",
            b"gamma",
            b"delta",
            b"epsilon",
            b"zeta",
            b"eta",
            b"theta",
        ]
        .iter()
        .map(|key| owner(key, members).unwrap().0)
        .collect();
        assert_eq!(owners, PINNED_OWNERS);
    }

    // Computed once with an independent implementation of both hashes.
    const PINNED_OWNERS: [u32; 8] = [3, 3, 3, 3, 1, 3, 1, 2];
}
