//! Property tests of the sharding logic (`src/cluster/`,
//! `docs/distributed-memcached.md`): who owns a key does not depend on the
//! members' order; adding a member moves keys only to it, removing one
//! moves only its keys; keys spread evenly; the shard map and the
//! forwarding protocol's controls round-trip, and garbage never panics
//! and never decodes to something that encodes differently.

// The fuzz target's `run` is replayed by `forward_fuzz_corpus.rs`.
#[allow(dead_code)]
mod forward_support;

use ebb_core::NodeId;
use memcached::cluster::{
    get_batches, Command, Create, Entry, ForwardReply, ForwardRequest, Member, ShardMap, StoreMode,
    MAX_CONTROL_LEN, MAX_GET_KEYS,
};
use proptest::collection::{btree_set, vec};
use proptest::prelude::*;

fn member(node: u32) -> Member {
    Member {
        node: NodeId(node),
        shard_ebb: 32_768 + node,
    }
}

/// 1 to 12 distinct nodes (never 0, the frontend).
fn nodes() -> impl Strategy<Value = Vec<u32>> {
    btree_set(1..64u32, 1..12).prop_map(|set| set.into_iter().collect())
}

fn keys() -> impl Strategy<Value = Vec<Vec<u8>>> {
    vec(vec(any::<u8>(), 1..=250), 1..200)
}

fn map(epoch: u64, nodes: &[u32]) -> ShardMap {
    ShardMap::new(epoch, nodes.iter().copied().map(member).collect()).unwrap()
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 1..=250)
}

fn command() -> impl Strategy<Value = (u64, u8, u32, i64, u64, bool, Vec<Vec<u8>>)> {
    (
        any::<u64>(),
        0u8..11,
        any::<u32>(),
        any::<i64>(),
        any::<u64>(),
        any::<bool>(),
        vec(key(), 1..12),
    )
}

fn request(
    (epoch, op, flags, exptime, number, yes, keys): &(u64, u8, u32, i64, u64, bool, Vec<Vec<u8>>),
) -> ForwardRequest<'_> {
    let key = keys[0].as_slice();
    let mode = [
        StoreMode::Set,
        StoreMode::Add,
        StoreMode::Replace,
        StoreMode::Append,
        StoreMode::Prepend,
        StoreMode::Cas,
    ][usize::from(*op % 6)];
    let command = match op {
        0 => Command::Get {
            cas: *yes,
            touch: (flags % 2 == 0).then_some(*exptime),
            keys: keys.iter().map(Vec::as_slice).collect(),
        },
        1 | 2 => Command::Store {
            mode,
            flags: *flags,
            exptime: *exptime,
            cas: *number,
            key,
        },
        3 => Command::Delete { cas: *number, key },
        4 | 5 => Command::Arith {
            incr: *yes,
            delta: *number,
            cas: u64::from(*flags),
            create: yes.then_some(Create {
                initial: *number,
                exptime: *exptime,
            }),
            key,
        },
        6..=8 => Command::Touch {
            exptime: *exptime,
            key,
        },
        9 => Command::Flush { delay: *exptime },
        _ => Command::Meta {
            line: b"mg some-key v f k\r\n",
        },
    };
    ForwardRequest {
        epoch: *epoch,
        command,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn ownership_does_not_depend_on_member_order(
        nodes in nodes(),
        keys in keys(),
        rotation in 0usize..12,
    ) {
        let forward = map(1, &nodes);
        let mut shuffled = nodes.clone();
        shuffled.reverse();
        let len = shuffled.len();
        shuffled.rotate_left(rotation % len);
        let other = map(9, &shuffled);
        for key in &keys {
            prop_assert_eq!(forward.owner(key), other.owner(key));
            let owner = memcached::cluster::owner(key, shuffled.iter().map(|&n| NodeId(n)));
            prop_assert_eq!(forward.owner(key).map(|m| m.node), owner);
        }
    }

    #[test]
    fn adding_a_member_moves_keys_only_to_it(
        nodes in nodes(),
        new_node in 64..128u32,
        keys in keys(),
    ) {
        let before = map(1, &nodes);
        let mut grown = nodes.clone();
        grown.push(new_node);
        let after = before.successor(grown.iter().copied().map(member).collect()).unwrap().unwrap();
        prop_assert_eq!(after.epoch(), 2);
        for key in &keys {
            let (old, new) = (before.owner(key).unwrap(), after.owner(key).unwrap());
            prop_assert!(old == new || new.node == NodeId(new_node), "{old:?} -> {new:?}");
        }
    }

    #[test]
    fn removing_a_member_moves_only_its_keys(
        nodes in nodes().prop_filter("two or more", |n| n.len() >= 2),
        which in any::<prop::sample::Index>(),
        keys in keys(),
    ) {
        let before = map(1, &nodes);
        let gone = nodes[which.index(nodes.len())];
        let rest: Vec<u32> = nodes.iter().copied().filter(|&n| n != gone).collect();
        let after = map(2, &rest);
        for key in &keys {
            let (old, new) = (before.owner(key).unwrap(), after.owner(key).unwrap());
            if old.node != NodeId(gone) {
                prop_assert_eq!(old, new);
            } else {
                prop_assert_ne!(new.node, NodeId(gone));
            }
        }
    }

    #[test]
    fn shard_maps_round_trip(nodes in nodes(), epoch in any::<u64>()) {
        let map = map(epoch, &nodes);
        prop_assert_eq!(ShardMap::decode(&map.encode()), Ok(map));
    }

    #[test]
    fn garbage_shard_maps_never_panic_and_decode_canonically(bytes in vec(any::<u8>(), 0..64)) {
        let _ = forward_support::check_shard_map(&bytes);
    }

    #[test]
    fn garbage_with_a_valid_header_decodes_canonically_or_is_refused(
        count in 0u16..6,
        body in vec(any::<u8>(), 0..56),
    ) {
        let mut bytes = b"EKVS\x01".to_vec();
        bytes.extend_from_slice(&7u64.to_le_bytes());
        bytes.extend_from_slice(&count.to_le_bytes());
        bytes.extend_from_slice(&body);
        let _ = forward_support::check_shard_map(&bytes);
    }

    #[test]
    fn requests_round_trip(fields in command(), payload in 0usize..100) {
        let request = request(&fields);
        let control = request.encode().unwrap();
        prop_assert!(control.len() <= MAX_CONTROL_LEN);
        let payload = if matches!(request.command, Command::Store { .. } | Command::Meta { .. }) { payload } else { 0 };
        prop_assert_eq!(ForwardRequest::decode(&control, payload), Ok(request));
    }

    #[test]
    fn replies_round_trip(
        status in 0u8..16,
        number in any::<u64>(),
        entries in vec(prop::option::of((any::<u32>(), any::<u64>(), 0u32..5000)), 1..=MAX_GET_KEYS),
    ) {
        let entries: Vec<Option<Entry>> = entries
            .into_iter()
            .map(|e| e.map(|(flags, cas, len)| Entry { flags, cas, len }))
            .collect();
        let reply = match status {
            0 => ForwardReply::Stored(number),
            1 => ForwardReply::NotStored,
            2 => ForwardReply::Exists,
            3 => ForwardReply::NotFound,
            4 => ForwardReply::Deleted,
            5 => ForwardReply::Touched,
            6 => ForwardReply::Number { value: number, cas: !number },
            7 => ForwardReply::Values(entries),
            8 => ForwardReply::WrongEpoch(number),
            9 => ForwardReply::NotOwner(number),
            10 => ForwardReply::TooLarge,
            11 => ForwardReply::OutOfMemory,
            12 => ForwardReply::NonNumeric,
            13 => ForwardReply::BadRequest,
            14 => ForwardReply::Flushed,
            _ => ForwardReply::Meta,
        };
        let payload = match &reply {
            ForwardReply::Values(entries) => entries.iter().flatten().map(|e| e.len as usize).sum(),
            ForwardReply::Meta => usize::from(status),
            _ => 0,
        };
        let control = reply.encode().unwrap();
        prop_assert!(control.len() <= MAX_CONTROL_LEN);
        prop_assert_eq!(ForwardReply::decode(&control, payload), Ok(reply));
    }

    #[test]
    fn garbage_controls_never_panic_and_decode_canonically(
        bytes in vec(any::<u8>(), 0..300),
        payload in 0usize..4,
    ) {
        let _ = forward_support::check_controls(&bytes, payload);
    }

    #[test]
    fn mutated_requests_never_panic_and_decode_canonically(
        fields in command(),
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<bool>(),
    ) {
        let mut control = request(&fields).encode().unwrap();
        let i = at.index(control.len());
        if cut { control.truncate(i) } else { control[i] = byte }
        let _ = forward_support::check_controls(&control, 0);
    }

    #[test]
    fn multigets_are_split_in_order_within_the_limits(keys in vec(key(), 1..600)) {
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let batches = get_batches(3, false, Some(10), &refs).unwrap();
        let mut seen = Vec::new();
        for batch in &batches {
            let control = batch.encode().unwrap();
            prop_assert!(control.len() <= MAX_CONTROL_LEN);
            prop_assert!(batch.keys().len() <= MAX_GET_KEYS);
            seen.extend_from_slice(batch.keys());
        }
        prop_assert_eq!(seen, refs);
    }
}

/// Keys spread evenly: over 30,000 keys each of N members owns its share
/// within 10% (HRW is even by construction; this catches a weak hash).
#[test]
fn keys_spread_evenly() {
    for n in [2u32, 3, 5, 8] {
        let members: Vec<u32> = (1..=n).collect();
        let map = map(1, &members);
        let mut owned = vec![0usize; n as usize + 1];
        for i in 0..30_000u32 {
            let key = format!("key:{i}");
            owned[map.owner(key.as_bytes()).unwrap().node.0 as usize] += 1;
        }
        let share = 30_000 / n as usize;
        for (node, &count) in owned.iter().enumerate().skip(1) {
            assert!(
                count.abs_diff(share) * 10 <= share,
                "{n} members: node {node} owns {count}, a share is {share}"
            );
        }
    }
}
