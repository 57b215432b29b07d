//! What the tests of a node's shard share: running a test body on a
//! one-core event loop of its own (a `ManualClock` node: the store's walk
//! and RCU need a core), shard maps of given nodes, and forwarded
//! requests to a shard Ebb's representative.

// Each test binary uses part of it.
#![allow(dead_code)]

use std::future::Future;

use ebb_core::NodeId;
use ebb_event::manual_clock::ManualClock;
use ebb_event::{shutdown, spawn_task};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Message, Request};
use memcached::cluster::shard_ebb::{answer, ShardRoot, FORWARD};
use memcached::cluster::{Command, ForwardReply, ForwardRequest, Member, ShardMap};

/// Runs `body` as a task on a one-core event loop of its own.
pub fn on_a_core<F, Fut>(body: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    on_a_clocked_core(|_| body());
}

/// Runs `body` as a task on a one-core event loop of its own, given the
/// loop's clock (it moves when the core has nothing to do but wait, or
/// when told to).
pub fn on_a_clocked_core<F, Fut>(body: F)
where
    F: FnOnce(&'static ManualClock) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    std::thread::spawn(move || {
        let clock: &'static ManualClock = Box::leak(Box::new(ManualClock::new()));
        let code = clock
            .run(move || {
                spawn_task(async move {
                    body(clock).await;
                    shutdown(0).expect("first shutdown");
                });
            })
            .expect("the core runs");
        assert_eq!(code, 0);
    })
    .join()
    .expect("the test body passed");
}

/// The map of `nodes` at `epoch` (node k's shard Ebb is 32,768 + k).
pub fn map(epoch: u64, nodes: &[u32]) -> ShardMap {
    let members = nodes
        .iter()
        .map(|&node| Member {
            node: NodeId(node),
            shard_ebb: 32_768 + node,
        })
        .collect();
    ShardMap::new(epoch, members).unwrap()
}

/// What the shard Ebb of `root`'s node answers to `command` stamped
/// `epoch` with `payload`, forwarded by node 2: the reply and its
/// payload.
pub fn call(
    root: &ShardRoot,
    epoch: u64,
    command: Command<'_>,
    payload: &[u8],
) -> (ForwardReply, Vec<u8>) {
    let control = ForwardRequest { epoch, command }.encode().unwrap();
    let request = Request {
        from: NodeId(2),
        peer_addr: None,
        message: FORWARD,
        body: Message {
            control: IoChain::from(IoBuf::from_vec(control)),
            payload: IoChain::from(IoBuf::copy_from_slice(payload)),
        },
    };
    let reply = answer(root, &request).expect("answered");
    let payload = reply.payload.to_vec();
    let reply = ForwardReply::decode(&reply.control.to_vec(), payload.len()).unwrap();
    (reply, payload)
}
