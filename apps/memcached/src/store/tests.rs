//! Properties of the store's outcomes: the size rule at its boundary,
//! append/prepend as concatenation, CAS semantics, and every store
//! command against a plain map as the model.

extern crate std;

use alloc::vec;
use alloc::vec::Vec;
use std::collections::HashMap;

use ebb_iobuf::IoBuf;
use proptest::prelude::*;

use super::{item_size, NewItem, SetMode, SetResult, Store, CAS_NODE_BITS, ITEM_OVERHEAD};

const NOW: u32 = 1_700_000_000;

fn new(flags: u32, value: &[u8], cas: u64) -> NewItem {
    NewItem {
        flags,
        expires: 0,
        value: IoBuf::copy_from_slice(value),
        cas,
        allow_stale: false,
    }
}

fn value_of(store: &Store, key: &[u8]) -> Option<Vec<u8>> {
    store.get(key, NOW).map(|item| item.value.to_vec())
}

fn stored(result: SetResult) -> u64 {
    match result {
        SetResult::Stored(cas) => cas,
        other => panic!("not stored: {other:?}"),
    }
}

#[test]
fn the_size_rule_is_memcacheds_item_ntotal() {
    // memcached 1.6.18 with -I 1k: a one-byte key with flags 0 takes at
    // most 964 bytes of data; flags take 4 more bytes, CAS 8.
    assert_eq!(item_size(1, 0, 964, true), 1024);
    assert_eq!(item_size(1, 1, 960, true), 1024);
    assert_eq!(item_size(1, 0, 972, false), 1024);
    assert_eq!(item_size(3, 0, 3, true), 65);
    let store = Store::new(64 << 20, 1024);
    assert_eq!(store.admit(1, 0, 964), Ok(()));
    assert_eq!(store.admit(1, 0, 965), Err(super::Refused::TooLarge));
    let small = Store::new(1000, 4096);
    assert_eq!(small.admit(1, 0, 1000), Err(super::Refused::NoMemory));
}

proptest! {
    #[test]
    fn the_size_rule_holds_at_the_boundary(
        key_len in 1usize..=250,
        flags in prop_oneof![Just(0u32), any::<u32>()],
        cas_enabled in any::<bool>(),
        item_size_max in 400usize..4096,
    ) {
        let mut store = Store::new(64 << 20, item_size_max);
        store.cas_enabled = cas_enabled;
        let key = vec![b'k'; key_len];
        let fits = item_size_max.checked_sub(item_size(key_len, flags, 0, cas_enabled));
        prop_assume!(fits.is_some());
        let fits = fits.unwrap_or(0);
        prop_assert_eq!(item_size(key_len, flags, fits, cas_enabled), item_size_max);
        stored(store.set(SetMode::Set, &key, new(flags, &vec![b'v'; fits], 0), NOW));
        prop_assert_eq!(value_of(&store, &key).map(|v| v.len()), Some(fits));
        prop_assert_eq!(
            store.set(SetMode::Set, &key, new(flags, &vec![b'v'; fits + 1], 0), NOW),
            SetResult::TooLarge
        );
        prop_assert_eq!(value_of(&store, &key), None, "a refused set drops the old item");
        // An append whose joined value crosses the boundary is not stored.
        stored(store.set(SetMode::Set, &key, new(flags, &vec![b'v'; fits - 1], 0), NOW));
        stored(store.set(SetMode::Append, &key, new(0, b"w", 0), NOW));
        prop_assert_eq!(
            store.set(SetMode::Append, &key, new(0, b"x", 0), NOW),
            SetResult::NotStored
        );
        prop_assert_eq!(value_of(&store, &key).map(|v| v.len()), Some(fits));
    }

    #[test]
    fn append_and_prepend_concatenate(
        first in proptest::collection::vec(any::<u8>(), 0..64),
        pieces in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..16)),
            0..8,
        ),
        flags in any::<u32>(),
    ) {
        let store = Store::new(64 << 20, 1 << 20);
        stored(store.set(SetMode::Set, b"k", new(flags, &first, 0), NOW));
        let mut expected = first;
        for (append, piece) in pieces {
            let (mode, flags_given) = if append {
                (SetMode::Append, 7)
            } else {
                (SetMode::Prepend, 9)
            };
            stored(store.set(mode, b"k", new(flags_given, &piece, 0), NOW));
            if append {
                expected.extend_from_slice(&piece);
            } else {
                expected.splice(0..0, piece);
            }
        }
        let item = store.get(b"k", NOW).unwrap();
        prop_assert_eq!(item.value.to_vec(), expected);
        prop_assert_eq!(item.flags, flags, "append and prepend keep the old flags");
    }

    #[test]
    fn cas_stores_only_with_the_current_value(
        cas_enabled in any::<bool>(),
        wrong in 1u64..1000,
    ) {
        let mut store = Store::new(64 << 20, 1 << 20);
        store.cas_enabled = cas_enabled;
        prop_assert_eq!(
            store.set(SetMode::Cas, b"k", new(0, b"a", 1), NOW),
            SetResult::NotFound
        );
        let first = stored(store.set(SetMode::Set, b"k", new(0, b"a", 0), NOW));
        let shown = store.shown_cas(first);
        prop_assert_eq!(
            store.set(SetMode::Cas, b"k", new(0, b"b", 0), NOW),
            SetResult::Exists,
            "CAS value 0 never matches"
        );
        prop_assert_eq!(
            store.set(SetMode::Cas, b"k", new(0, b"b", first + wrong), NOW),
            SetResult::Exists
        );
        let with_current = store.set(SetMode::Cas, b"k", new(0, b"c", shown), NOW);
        if cas_enabled {
            let second = stored(with_current);
            prop_assert!(second > first);
            prop_assert_eq!(value_of(&store, b"k"), Some(b"c".to_vec()));
            prop_assert_eq!(
                store.set(SetMode::Cas, b"k", new(0, b"d", first), NOW),
                SetResult::Exists,
                "a stale CAS value"
            );
            prop_assert_eq!(
                store.set(SetMode::Append, b"k", new(0, b"d", first), NOW),
                SetResult::Exists
            );
        } else {
            // memcached with -C: every CAS value is 0, so `cas` never
            // matches and append ignores the client's value.
            prop_assert_eq!(with_current, SetResult::Exists);
            stored(store.set(SetMode::Append, b"k", new(0, b"d", first + wrong), NOW));
        }
    }

    /// Every store command against a map: the same outcome, the same value.
    #[test]
    fn store_commands_follow_the_model(
        ops in proptest::collection::vec(
            (0u8..7, 0usize..3, proptest::collection::vec(any::<u8>(), 0..8), 0u8..3),
            1..60,
        ),
    ) {
        let store = Store::new(64 << 20, 1 << 20);
        let mut model: HashMap<usize, (Vec<u8>, u64)> = HashMap::new();
        for (op, key, data, cas_choice) in ops {
            let key_bytes = [b'a' + u8::try_from(key).unwrap_or(0)];
            let current = model.get(&key).cloned();
            if op == 6 {
                let deleted = store.delete(&key_bytes, None, NOW) == super::DeleteResult::Deleted;
                prop_assert_eq!(deleted, model.remove(&key).is_some());
                continue;
            }
            let mode = [
                SetMode::Set,
                SetMode::Add,
                SetMode::Replace,
                SetMode::Append,
                SetMode::Prepend,
                SetMode::Cas,
            ][usize::from(op)];
            let current_cas = current.as_ref().map_or(1, |(_, cas)| *cas);
            let cas = [0, current_cas, current_cas + 1000][usize::from(cas_choice)];
            let result = store.set(mode, &key_bytes, new(0, &data, cas), NOW);
            let expected = match (mode, &current) {
                (SetMode::Set, _) | (SetMode::Add, None) | (SetMode::Replace, Some(_)) => {
                    Some(data.clone())
                }
                (SetMode::Cas, Some(_)) if cas == current_cas => Some(data.clone()),
                (SetMode::Append | SetMode::Prepend, Some((old, old_cas)))
                    if cas == 0 || cas == *old_cas =>
                {
                    let mut joined = old.clone();
                    if mode == SetMode::Append {
                        joined.extend_from_slice(&data);
                    } else {
                        joined.splice(0..0, data.iter().copied());
                    }
                    Some(joined)
                }
                _ => None,
            };
            let want = match (mode, &current, &expected) {
                (_, _, Some(_)) => "stored",
                (SetMode::Cas, None, _) => "not found",
                (SetMode::Cas | SetMode::Append | SetMode::Prepend, Some(_), _) => "exists",
                _ => "not stored",
            };
            let got = match result {
                SetResult::Stored(_) => "stored",
                SetResult::NotFound => "not found",
                SetResult::Exists => "exists",
                SetResult::NotStored => "not stored",
                other => panic!("{other:?}"),
            };
            prop_assert_eq!(got, want, "{:?} {:?} cas {}", mode, current, cas);
            if let (SetResult::Stored(new_cas), Some(value)) = (result, expected) {
                model.insert(key, (value, new_cas));
            }
            prop_assert_eq!(value_of(&store, &key_bytes), model.get(&key).map(|(v, _)| v.clone()));
        }
        prop_assert_eq!(
            store.stats().bytes,
            model
                .values()
                .map(|(value, _)| (ITEM_OVERHEAD + 2 + 8 + value.len() + 2) as u64)
                .sum::<u64>(),
            "bytes adds up the size rule's measure"
        );
    }
}

#[test]
fn the_win_token_goes_to_one_fetch_and_invalidation_hands_it_out_again() {
    let store = Store::new(1 << 20, 1024);
    let cas = stored(store.set(SetMode::Set, b"k", new(0, b"v", 0), NOW));
    let claim = || store.fetch(b"k", NOW, true, |_, marks| marks.claim_token());
    assert_eq!(claim(), Some(true));
    assert_eq!(claim(), Some(false));
    let invalidated = store.update(b"k", NOW, |current| {
        let mut item = current.cloned().unwrap();
        item.stale = true;
        super::Update::Modify(item, ())
    });
    let fetched = store.fetch(b"k", NOW, true, |item, marks| {
        (item.stale, marks.fetched(), marks.token_sent())
    });
    assert_eq!(fetched, Some((true, true, false)));
    assert!(invalidated.1.is_some_and(|new_cas| new_cas > cas));
}

#[test]
fn a_stale_set_with_an_older_cas_keeps_the_item_stale_and_its_expiry() {
    let store = Store::new(1 << 20, 1024);
    let first = NewItem {
        expires: NOW + 100,
        ..new(0, b"old", 0)
    };
    let old_cas = stored(store.set(SetMode::Set, b"k", first, NOW));
    store.update(b"k", NOW, |current| {
        let mut item = current.cloned().unwrap();
        item.stale = true;
        super::Update::Modify(item, ())
    });
    let without_stale = new(0, b"mid", old_cas);
    assert_eq!(
        store.set(SetMode::Cas, b"k", without_stale, NOW),
        SetResult::Exists
    );
    let stale = NewItem {
        allow_stale: true,
        ..new(0, b"mid", old_cas)
    };
    stored(store.set(SetMode::Cas, b"k", stale, NOW));
    let item = store.get(b"k", NOW).unwrap();
    assert_eq!((item.stale, item.expires), (true, NOW + 100));
    assert_eq!(item.value.to_vec(), b"mid".to_vec());
}

#[test]
fn cache_memlimit_changes_the_limit_the_size_rule_applies() {
    let store = Store::new(1 << 20, 1 << 20);
    assert_eq!(store.admit(1, 0, 100_000), Ok(()));
    store.set_memory_limit(64 << 10);
    assert_eq!(store.memory_limit(), 64 << 10);
    assert_eq!(store.admit(1, 0, 100_000), Err(super::Refused::NoMemory));
}

#[test]
fn a_node_of_several_numbers_cas_values_with_its_id_and_flush_all_still_works() {
    let store = Store::new(1 << 20, 1 << 10);
    let before = stored(store.set(SetMode::Set, b"a", new(0, b"1", 0), NOW));
    assert_eq!(before, 1, "a single memcached numbers from 1");
    store.number_cas_for_node(3);
    let first = stored(store.set(SetMode::Set, b"b", new(0, b"2", 0), NOW));
    assert_eq!(first, (3 << (64 - CAS_NODE_BITS)) | 1);
    // Never back: asked again, numbering goes on.
    store.number_cas_for_node(3);
    let second = stored(store.set(SetMode::Set, b"c", new(0, b"3", 0), NOW));
    assert_eq!(second, first + 1);
    // flush_all invalidates what was stored before it, across the switch.
    store.flush_all(None, NOW);
    for key in [&b"a"[..], b"b", b"c"] {
        assert_eq!(value_of(&store, key), None);
    }
    let after = stored(store.set(SetMode::Set, b"d", new(0, b"4", 0), NOW));
    assert_eq!(value_of(&store, b"d"), Some(b"4".to_vec()));
    assert_eq!(after >> (64 - CAS_NODE_BITS), 3);
}
