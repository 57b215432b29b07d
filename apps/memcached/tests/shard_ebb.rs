//! The shard Ebb's answers (`src/cluster/shard_ebb.rs`) and the adoption
//! of shard maps (`src/cluster/current.rs`) on a one-core event loop,
//! without a connection: a forwarded request is answered by the map in
//! force; a newer map is published, a grace period passes, and the keys
//! it gives away are swept; an older or equal map changes nothing; a map
//! that skips epochs drops every key.

mod shard_support;

use ebb_core::NodeId;
use ebb_event::Instant;
use ebb_iobuf::IoChain;
use ebb_messenger::{Message, MessageNumber, Request, ServiceError};
use memcached::cluster::current::{Adopted, CurrentMap};
use memcached::cluster::shard_ebb::{answer, ShardRoot};
use memcached::cluster::{Command, Entry, ForwardReply, StoreMode};
use memcached::{Server, Settings};
use shard_support::{call, map, on_a_core};

/// Node `node`'s map in force, registered when no map was stored yet,
/// with a lease that never lapses (the fences are tested below).
fn member(node: u32) -> &'static CurrentMap {
    let current: &'static CurrentMap = Box::leak(Box::new(CurrentMap::new(NodeId(node))));
    current.lease_kept(Instant(u64::MAX));
    current.registered(0);
    current
}

fn server() -> &'static Server {
    Server::start(Settings::default(), 1_700_000_000).unwrap()
}

fn set(key: &[u8]) -> Command<'_> {
    Command::Store {
        mode: StoreMode::Set,
        flags: 1,
        exptime: 0,
        cas: 0,
        key,
    }
}

#[test]
fn requests_are_answered_by_the_map_in_force_and_a_newer_map_sweeps() {
    on_a_core(|| async {
        let server = server();
        let current = member(1);
        let root = ShardRoot { server, current };
        let keys: Vec<Vec<u8>> = (0..2000).map(|i| format!("key{i}").into_bytes()).collect();
        // No map yet: epoch 0 has no members, so nothing is served.
        assert_eq!(
            call(&root, 0, set(&keys[0]), b"v").0,
            ForwardReply::NotOwner(0)
        );

        let first = map(1, &[1, 2]);
        assert_eq!(
            current.adopt(&server.store, first.clone()).await,
            Ok(Adopted::Swept(0))
        );
        assert_eq!(current.epoch(), 1);
        // Every node adopted it (settled by its adoption task in a node).
        current.settle(1).unwrap();
        let mine: Vec<&Vec<u8>> = keys
            .iter()
            .filter(|key| first.owner(key).unwrap().node == NodeId(1))
            .collect();
        for key in &mine {
            assert!(matches!(
                call(&root, 1, set(key), b"value").0,
                ForwardReply::Stored(_)
            ));
        }
        let get = Command::Get {
            cas: false,
            touch: None,
            keys: vec![mine[0].as_slice()],
        };
        assert_eq!(
            call(&root, 1, get, b""),
            (
                ForwardReply::Values(vec![Some(Entry {
                    flags: 1,
                    cas: 0,
                    len: 5
                })]),
                b"value".to_vec()
            )
        );
        assert_eq!(
            call(&root, 0, set(mine[0]), b"v").0,
            ForwardReply::WrongEpoch(1)
        );

        // Node 3 joins: node 1 keeps what it still owns, drops the rest.
        let joined = map(2, &[1, 2, 3]);
        let taken = mine
            .iter()
            .filter(|key| joined.owner(key).unwrap().node == NodeId(3))
            .count();
        assert!(taken > 0);
        assert_eq!(
            current.adopt(&server.store, joined.clone()).await,
            Ok(Adopted::Swept(taken))
        );
        for key in &mine {
            let still = joined.owner(key).unwrap().node == NodeId(1);
            assert_eq!(server.store.get(key, server.unix_now()).is_some(), still);
        }
        // Not newer: nothing happens.
        assert_eq!(
            current.adopt(&server.store, first).await,
            Ok(Adopted::NotNewer { in_force: 2 })
        );
        assert_eq!(current.read(|map| map.clone()), joined);

        // Epochs 3 and 4 were never seen here: whatever node 1 holds may
        // have been written elsewhere meanwhile, so all of it goes.
        let kept = mine
            .iter()
            .filter(|key| server.store.get(key, server.unix_now()).is_some())
            .count();
        assert!(kept > 0);
        assert_eq!(
            current.adopt(&server.store, map(5, &[1, 2, 3])).await,
            Ok(Adopted::Swept(kept))
        );
        assert!(mine
            .iter()
            .all(|key| server.store.get(key, server.unix_now()).is_none()));

        // Another message number is not the shard Ebb's.
        let request = Request {
            from: NodeId(2),
            peer_addr: None,
            message: MessageNumber(9),
            body: Message::payload(IoChain::new()),
        };
        assert_eq!(
            answer(&root, &request).err(),
            Some(ServiceError::UnknownMessage)
        );
    });
}

/// A forwarded meta command for `line`.
fn meta(line: &[u8]) -> Command<'_> {
    Command::Meta { line }
}

#[test]
fn a_forwarded_meta_request_is_checked_whole_before_it_runs() {
    on_a_core(|| async {
        let server = server();
        let current = member(1);
        let root = ShardRoot { server, current };
        let only = map(1, &[1]);
        current.adopt(&server.store, only).await.unwrap();
        current.settle(1).unwrap();
        let value_of = |key: &[u8]| {
            server
                .store
                .get(key, server.unix_now())
                .map(|item| item.value.to_vec())
        };
        let set_old = |key: &[u8]| {
            let stored = call(&root, 1, set(key), b"old").0;
            assert!(matches!(stored, ForwardReply::Stored(_)), "{stored:?}");
        };
        set_old(b"k");
        // md, mg and ma take no payload: with one they are refused and
        // change nothing (md does not delete, mg T does not touch).
        assert_eq!(
            call(&root, 1, meta(b"md k\r\n"), b"junk").0,
            ForwardReply::BadRequest
        );
        assert_eq!(
            call(&root, 1, meta(b"mg k T30 v\r\n"), b"x").0,
            ForwardReply::BadRequest
        );
        assert_eq!(value_of(b"k").as_deref(), Some(&b"old"[..]));
        // ms with more than its data block (another request after it),
        // or less: refused, the old value stays.
        for payload in [&b"new\r\nmd k\r\n"[..], b"ne", b"new\r"] {
            assert_eq!(
                call(&root, 1, meta(b"ms k 3\r\n"), payload).0,
                ForwardReply::BadRequest
            );
            assert_eq!(value_of(b"k").as_deref(), Some(&b"old"[..]));
        }
        // ms without its data block, which is within -I: refused.
        assert_eq!(
            call(&root, 1, meta(b"ms k 3\r\n"), b"").0,
            ForwardReply::BadRequest
        );
        assert_eq!(value_of(b"k").as_deref(), Some(&b"old"[..]));
        // A block of the right length not ending in CRLF: the handler's
        // own error, as to a client, and nothing stored.
        let (reply, bytes) = call(&root, 1, meta(b"ms k 3\r\n"), b"newxx");
        assert_eq!(reply, ForwardReply::Meta);
        assert_eq!(bytes, b"CLIENT_ERROR bad data chunk\r\n");
        assert_eq!(value_of(b"k").as_deref(), Some(&b"old"[..]));
        // Well-formed: served.
        let (reply, bytes) = call(&root, 1, meta(b"ms k 3\r\n"), b"new\r\n");
        assert_eq!((reply, bytes), (ForwardReply::Meta, b"HD\r\n".to_vec()));
        assert_eq!(value_of(b"k").as_deref(), Some(&b"new"[..]));
        // An ms over -I comes without its block (the forwarder threw it
        // away): refused as a single memcached refuses it, old item gone.
        let over = format!("ms k {} T0\r\n", (1 << 20) + 1);
        let (reply, bytes) = call(&root, 1, meta(over.as_bytes()), b"");
        assert_eq!(reply, ForwardReply::Meta);
        assert_eq!(bytes, b"SERVER_ERROR object too large for cache\r\n");
        assert_eq!(value_of(b"k"), None);
    });
}
