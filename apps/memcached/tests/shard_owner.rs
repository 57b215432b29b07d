//! The owner's side of forwarding (`src/cluster/serve.rs`) and the sweep
//! after a map change (`src/cluster/sweep.rs`), on a store, without the
//! network: every command does what the same command from a client does;
//! a request stamped with another epoch, or for a key the map gives to
//! another node, changes nothing; a value comes back as the stored
//! buffer itself; after a node joins, the old owners drop exactly the
//! keys it took, and a key that comes back to its old owner after the new
//! node is lost is a miss there, never its value from before.

mod shard_support;

use ebb_core::NodeId;
use ebb_iobuf::{IoBuf, IoChain};
use memcached::cluster::current::View;
use memcached::cluster::serve::{get_values, serve, GetAsked, MAX_REPLY_PAYLOAD};
use memcached::cluster::sweep::drop_unowned;
use memcached::cluster::{Command, Entry, ForwardReply, ForwardRequest, ShardMap, StoreMode};
use memcached::Store;
use shard_support::{map, on_a_core};

const NOW: u32 = 1_700_000_000;

/// A key `map` gives to `node`.
fn key_of(map: &ShardMap, node: u32, nth: usize) -> Vec<u8> {
    (0..)
        .map(|i| format!("key:{i}").into_bytes())
        .filter(|key| map.owner(key).unwrap().node == NodeId(node))
        .nth(nth)
        .unwrap()
}

/// Sends `command` stamped `epoch` with `payload` to node `me` of `map`.
fn call(
    store: &Store,
    map: &ShardMap,
    me: u32,
    epoch: u64,
    command: Command<'_>,
    payload: &[u8],
) -> (ForwardReply, Vec<u8>) {
    let control = ForwardRequest { epoch, command }.encode().unwrap();
    let payload = if payload.is_empty() {
        IoChain::new()
    } else {
        IoChain::from(IoBuf::copy_from_slice(payload))
    };
    let (reply, values) = serve(
        store,
        &View::agreed(map, NodeId(me)),
        NOW,
        &control,
        &payload,
    );
    // What goes back over the Messenger decodes to the same reply.
    let encoded = reply.encode().unwrap();
    assert_eq!(
        ForwardReply::decode(&encoded, values.len()),
        Ok(reply.clone())
    );
    (reply, values.to_vec())
}

fn set<'a>(key: &'a [u8]) -> Command<'a> {
    Command::Store {
        mode: StoreMode::Set,
        flags: 7,
        exptime: 0,
        cas: 0,
        key,
    }
}

fn get(keys: Vec<&[u8]>) -> Command<'_> {
    Command::Get {
        cas: false,
        touch: None,
        keys,
    }
}

#[test]
fn every_command_does_what_a_clients_does() {
    on_a_core(|| async {
        let store = Store::new(1 << 20, 1 << 10);
        let map = map(5, &[1, 2]);
        let (a, b) = (key_of(&map, 1, 0), key_of(&map, 1, 1));
        let call = |command, payload: &[u8]| call(&store, &map, 1, 5, command, payload);
        let (reply, values) = call(set(&a), b"10");
        assert!(
            matches!(reply, ForwardReply::Stored(cas) if cas != 0),
            "{reply:?}"
        );
        assert!(values.is_empty());
        let add = Command::Store {
            mode: StoreMode::Add,
            flags: 0,
            exptime: 0,
            cas: 0,
            key: &a,
        };
        assert_eq!(call(add, b"x").0, ForwardReply::NotStored);
        let append = Command::Store {
            mode: StoreMode::Append,
            flags: 0,
            exptime: 0,
            cas: 0,
            key: &a,
        };
        assert!(matches!(call(append, b"5").0, ForwardReply::Stored(_)));
        let incr = Command::Arith {
            incr: true,
            delta: 5,
            cas: 0,
            create: None,
            key: &a,
        };
        assert!(matches!(
            call(incr, b"").0,
            ForwardReply::Number { value: 110, .. }
        ));
        let (reply, values) = call(get(vec![&b, &a]), b"");
        assert_eq!(
            reply,
            ForwardReply::Values(vec![
                None,
                Some(Entry {
                    flags: 7,
                    cas: 0,
                    len: 3
                })
            ])
        );
        assert_eq!(values, b"110");
        let gets = Command::Get {
            cas: true,
            touch: None,
            keys: vec![&a],
        };
        let ForwardReply::Values(entries) = call(gets, b"").0 else {
            panic!("gets gave no values");
        };
        let cas = entries[0].unwrap().cas;
        assert_ne!(cas, 0);
        let stale_cas = Command::Store {
            mode: StoreMode::Cas,
            flags: 0,
            exptime: 0,
            cas: cas + 100,
            key: &a,
        };
        assert_eq!(call(stale_cas, b"y").0, ForwardReply::Exists);
        let good_cas = Command::Store {
            mode: StoreMode::Cas,
            flags: 0,
            exptime: 0,
            cas,
            key: &a,
        };
        assert!(matches!(call(good_cas, b"word").0, ForwardReply::Stored(_)));
        let decr = Command::Arith {
            incr: false,
            delta: 1,
            cas: 0,
            create: None,
            key: &a,
        };
        assert_eq!(call(decr, b"").0, ForwardReply::NonNumeric);
        let touch = Command::Touch {
            exptime: 100,
            key: &a,
        };
        assert_eq!(call(touch, b"").0, ForwardReply::Touched);
        let touch_b = Command::Touch {
            exptime: 100,
            key: &b,
        };
        assert_eq!(call(touch_b, b"").0, ForwardReply::NotFound);
        assert_eq!(
            call(Command::Delete { cas: 0, key: &a }, b"").0,
            ForwardReply::Deleted
        );
        assert_eq!(
            call(Command::Delete { cas: 0, key: &a }, b"").0,
            ForwardReply::NotFound
        );
        // Over -I (1 KiB here).
        assert_eq!(call(set(&a), &[0; 2048]).0, ForwardReply::TooLarge);
        // Garbage.
        let (reply, _) = serve(
            &store,
            &View::agreed(&map, NodeId(1)),
            NOW,
            b"\x01\x09",
            &IoChain::new(),
        );
        assert_eq!(reply, ForwardReply::BadRequest);
    });
}

#[test]
fn a_found_value_is_the_stored_buffer_not_a_copy() {
    on_a_core(|| async {
        let store = Store::new(1 << 20, 1 << 10);
        let map = map(1, &[1]);
        call(&store, &map, 1, 1, set(b"k"), b"value");
        let stored = store.get(b"k", NOW).unwrap().value;
        let control = ForwardRequest {
            epoch: 1,
            command: get(vec![b"k"]),
        }
        .encode()
        .unwrap();
        let (_, values) = serve(
            &store,
            &View::agreed(&map, NodeId(1)),
            NOW,
            &control,
            &IoChain::new(),
        );
        let sent = values.segments().next().unwrap();
        assert_eq!(sent.as_ref().as_ptr(), stored.as_ref().as_ptr());
    });
}

#[test]
fn another_epoch_or_another_owner_changes_nothing() {
    on_a_core(|| async {
        let store = Store::new(1 << 20, 1 << 10);
        let map = map(5, &[1, 2]);
        let mine = key_of(&map, 1, 0);
        let theirs = key_of(&map, 2, 0);
        assert_eq!(
            call(&store, &map, 1, 4, set(&mine), b"v").0,
            ForwardReply::WrongEpoch(5)
        );
        assert_eq!(
            call(&store, &map, 1, 6, set(&mine), b"v").0,
            ForwardReply::WrongEpoch(5)
        );
        assert_eq!(
            call(&store, &map, 1, 5, set(&theirs), b"v").0,
            ForwardReply::NotOwner(5)
        );
        // A multiget naming one foreign key is refused whole.
        assert_eq!(
            call(&store, &map, 1, 5, get(vec![&mine, &theirs]), b"").0,
            ForwardReply::NotOwner(5)
        );
        assert_eq!(store.get(&mine, NOW), None);
        assert_eq!(store.get(&theirs, NOW), None);
    });
}

/// Node 3 joins nodes 1 and 2: each old owner drops exactly the keys node
/// 3 won. Node 3 is then lost: its keys fall back to their old owners,
/// which answer misses, never the values from before node 3 took them.
#[test]
fn a_join_drops_the_keys_the_new_node_took_and_its_loss_gives_misses() {
    on_a_core(|| async {
        let before = map(1, &[1, 2]);
        let joined = map(2, &[1, 2, 3]);
        let stores = [Store::new(4 << 20, 1 << 10), Store::new(4 << 20, 1 << 10)];
        let keys: Vec<Vec<u8>> = (0..3000).map(|i| format!("k{i}").into_bytes()).collect();
        for key in &keys {
            let owner = before.owner(key).unwrap().node.0;
            let reply = call(
                &stores[owner as usize - 1],
                &before,
                owner,
                1,
                set(key),
                b"old",
            );
            assert!(matches!(reply.0, ForwardReply::Stored(_)));
        }
        let taken = keys
            .iter()
            .filter(|key| joined.owner(key).unwrap().node == NodeId(3))
            .count();
        assert!((700..1300).contains(&taken), "node 3 took {taken} of 3000");
        let mut dropped = 0;
        for node in [1, 2] {
            dropped += drop_unowned(&stores[node as usize - 1], &joined, NodeId(node), 64).await;
        }
        assert_eq!(dropped, taken);
        for key in &keys {
            let owner = before.owner(key).unwrap().node.0;
            let kept = store_has(&stores[owner as usize - 1], key);
            assert_eq!(kept, joined.owner(key).unwrap().node.0 == owner);
        }
        // Node 3 is lost; back to two members at epoch 3.
        let after = map(3, &[1, 2]);
        for key in &keys {
            let owner = after.owner(key).unwrap().node.0;
            let (reply, _) = call(
                &stores[owner as usize - 1],
                &after,
                owner,
                3,
                get(vec![key]),
                b"",
            );
            let expected = if joined.owner(key).unwrap().node == NodeId(3) {
                None
            } else {
                Some(Entry {
                    flags: 7,
                    cas: 0,
                    len: 3,
                })
            };
            assert_eq!(reply, ForwardReply::Values(vec![expected]));
        }
    });
}

fn store_has(store: &Store, key: &[u8]) -> bool {
    store.get(key, NOW).is_some()
}

/// A key flushed by a delayed `flush_all` that has come is dead, but its
/// entry stays in the table until a lookup finds it. The sweep drops it
/// all the same: a later `flush_all` with a delay replaces the flush time,
/// which would bring the old value back to life on a node that no
/// longer owns the key (review 17b, finding 7).
#[test]
fn the_sweep_drops_dead_entries_that_a_later_delayed_flush_would_revive() {
    on_a_core(|| async {
        let joined = map(2, &[1, 2]);
        let store = Store::new(1 << 20, 1 << 10);
        let given_away = key_of(&joined, 2, 0);
        let kept = key_of(&joined, 1, 0);
        for key in [&given_away, &kept] {
            let (reply, _) = call(&store, &map(1, &[1]), 1, 1, set(key), b"old");
            assert!(matches!(reply, ForwardReply::Stored(_)), "{reply:?}");
        }
        // Flushed from NOW + 1 on: dead then, still in the table.
        store.flush_all(Some(NOW + 1), NOW);
        assert_eq!(store.stats().curr_items, 2);
        assert_eq!(drop_unowned(&store, &joined, NodeId(1), 64).await, 1);
        assert_eq!(store.stats().curr_items, 1);
        // A new delayed flush replaces the one that had come.
        store.flush_all(Some(NOW + 100), NOW + 2);
        assert!(
            store.get(&given_away, NOW + 2).is_none(),
            "the given-away key came back"
        );
        assert!(store.get(&kept, NOW + 2).is_some());
    });
}

/// The sweep lets the core's other events run between batches, so a
/// node with a big table keeps serving its clients while it sweeps
/// (review 17b, finding 6): a task on the same core sees the store half
/// swept.
#[test]
fn the_sweep_lets_other_events_run_between_batches() {
    on_a_core(|| async {
        let joined = map(2, &[1, 2]);
        let store: &'static Store = Box::leak(Box::new(Store::new(1 << 20, 1 << 10)));
        let keys: Vec<Vec<u8>> = (0..2000).map(|i| format!("k{i}").into_bytes()).collect();
        for key in &keys {
            let (reply, _) = call(store, &map(1, &[1]), 1, 1, set(key), b"v");
            assert!(matches!(reply, ForwardReply::Stored(_)), "{reply:?}");
        }
        let foreign = keys
            .iter()
            .filter(|key| joined.owner(key).unwrap().node != NodeId(1))
            .count() as u64;
        let seen: std::rc::Rc<std::cell::RefCell<Vec<u64>>> = Default::default();
        let done = std::rc::Rc::new(std::cell::Cell::new(false));
        let (seen_by_task, done_by_task) = (seen.clone(), done.clone());
        ebb_event::spawn_task(async move {
            while !done_by_task.get() {
                seen_by_task.borrow_mut().push(store.stats().curr_items);
                ebb_event::yield_now().await;
            }
        });
        let batches = store.walk_len() / 64;
        assert!(batches > 4, "{batches} batches");
        let dropped = drop_unowned(store, &joined, NodeId(1), 64).await as u64;
        done.set(true);
        assert_eq!(dropped, foreign);
        let all = keys.len() as u64;
        let halfway = seen
            .borrow()
            .iter()
            .filter(|&&n| n < all && n > all - foreign)
            .count();
        assert!(
            halfway > 0,
            "the task never ran while the sweep did: saw {:?}",
            seen.borrow()
        );
    });
}

#[test]
fn a_multiget_reply_stays_within_the_payload_limit_and_answers_a_first_part() {
    on_a_core(|| async {
        let store = Store::new(1 << 20, 1 << 10);
        let map = map(1, &[1]);
        for key in [&b"a"[..], b"b", b"c"] {
            call(&store, &map, 1, 1, set(key), &[b'v'; 100]);
        }
        let asked = GetAsked {
            cas: false,
            touch: None,
        };
        let get = |keys: &[&[u8]], limit: usize| {
            let mut values = IoChain::new();
            let entries = get_values(&store, NOW, asked, keys, limit, &mut values);
            assert!(values.len() <= limit);
            let found: Vec<bool> = entries.iter().map(Option::is_some).collect();
            (found, values.len())
        };
        let found = Entry {
            flags: 7,
            cas: 0,
            len: 100,
        };
        // 250 bytes: a and b fit, c is left for the next call; a missing
        // key between them costs nothing.
        assert_eq!(
            get(&[b"a", b"missing", b"b", b"c"], 250),
            (vec![true, false, true], 200)
        );
        assert_eq!(get(&[b"c"], 250), (vec![true], 100));
        // Everything fits: every key answered.
        assert_eq!(get(&[b"a", b"b", b"c"], 300), (vec![true; 3], 300));
        // A first value over the limit alone is a miss, so that every
        // call answers at least one key.
        assert_eq!(get(&[b"a", b"b"], 50), (vec![false], 0));
        // The entries are what a whole reply would say of those keys.
        let mut values = IoChain::new();
        let entries = get_values(&store, NOW, asked, &[b"a"], 100, &mut values);
        assert_eq!(entries, vec![Some(found)]);
        // The limit in force is the Messenger's payload limit.
        assert_eq!(MAX_REPLY_PAYLOAD, 64 << 20);
    });
}
