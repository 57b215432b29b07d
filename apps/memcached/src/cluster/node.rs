//! memcached's node role (`docs/distributed-memcached.md`): given a boot
//! contract and the application's `GlobalIdMap`, the node creates its
//! Messenger, makes the first id of its global range its shard Ebb,
//! listens for the Messenger on every core, announces itself to the
//! frontend, registers as a member under a lease it keeps alive, and
//! keeps its map in force: every change under `memcached/` makes it
//! reconcile the members with the shard map, adopt the map in force,
//! publish how far it got (`memcached/adopted/N`) and settle the
//! handover fence from everyone's; a node whose lease may have lapsed
//! serves none of its keys (`current.rs`). From the moment it joins,
//! the server's text connections forward requests for other nodes'
//! keys (`route.rs`, `text_forward.rs`).
//!
//! Where the map comes from is the caller's: [`join`] (memcached started
//! with a boot contract, `app.rs`) uses the hosted node's map over the
//! Messenger (`ebb_messenger::map::RemoteGlobalIdMap`); tests may pass
//! an in-process map.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use core::sync::atomic::{AtomicI64, Ordering};
use core::time::Duration;

use ebb_app::{exit, NodeContract};
use ebb_core::{EbbId, EbbRef, GlobalIdMap, Lease, MapError, NodeId};
use ebb_messenger::map::{install_global_map, RemoteGlobalIdMap};
use ebb_messenger::{
    acceptor, announce, create_messenger, AnnounceError, MessengerError, MessengerRef,
    MessengerSettings, NodeEntry,
};

use super::current::CurrentMap;
use super::membership::{
    self, publish_adopted, reconcile, register, settled_epoch, MembershipError,
};
use super::shard_ebb::ShardEbb;
use super::shard_map::Member;
use super::text_forward::ClusterLink;
use crate::Server;

/// How often, and how long apart, the node tries to reach the frontend.
const ANNOUNCE_TRIES: u32 = 120;
const ANNOUNCE_PAUSE: Duration = Duration::from_secs(1);

/// A member's lease: it ends this long after the node stopped keeping it
/// alive, and the node's keys become misses.
pub const LEASE_TTL: Duration = Duration::from_secs(10);

/// How long before its lease could end, counted from when the last
/// successful keep-alive was sent, a node stops serving its keys: room
/// for the map's and this node's clocks to disagree on how long the time
/// to live is.
pub const SELF_FENCE_MARGIN: Duration = Duration::from_secs(2);

/// How often the lease is kept alive: three times per time to live, so
/// one late renewal does not lose it.
const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(3_333);

/// How long the node waits before watching again after its watch ended.
const REWATCH_PAUSE: Duration = Duration::from_secs(1);

/// The prefix the node watches: the members and the shard map.
const WATCHED: &str = "memcached/";

/// A node that joined.
#[derive(Clone, Copy)]
pub struct Joined {
    /// Its Messenger.
    pub messenger: MessengerRef,
    /// Its shard Ebb.
    pub shard: EbbRef<ShardEbb>,
    /// The map in force.
    pub current: &'static CurrentMap,
    /// Its registration's lease.
    pub lease: Lease,
    /// Where its Messenger listens.
    pub listening: SocketAddr,
}

/// Joins the cache as `contract` says, serving `server`'s store, with
/// the hosted node's map over the Messenger (a task on core 0); whether
/// it joined (a node that cannot join stops with exit code 1).
pub async fn join(contract: NodeContract, server: &'static Server) -> bool {
    let hosted_map = |messenger| {
        let map: Arc<dyn GlobalIdMap> = Arc::new(RemoteGlobalIdMap::new(messenger));
        // Several nodes in one process (tests) keep the first one's.
        let _ = install_global_map(Arc::clone(&map));
        map
    };
    match try_join(contract, server, hosted_map).await {
        Ok(_) => true,
        Err(error) => {
            ebb_app::error!("{error}");
            exit::stop(exit::FAILURE);
            false
        }
    }
}

/// Joins the cache as `contract` says, serving `server`'s store, with
/// the application's map, which `map` makes from the node's Messenger (a
/// task on core 0); the node then keeps its lease alive and its map in
/// force from tasks of its own.
///
/// # Errors
///
/// A sentence saying which step failed.
pub async fn try_join(
    contract: NodeContract,
    server: &'static Server,
    map: impl FnOnce(MessengerRef) -> Arc<dyn GlobalIdMap>,
) -> Result<Joined, String> {
    let node = NodeId(contract.node);
    let messenger = create_messenger(MessengerSettings::new(node))
        .map_err(|error| format!("cannot create the Messenger: {error}"))?;
    let map = map(messenger);
    let shard_id = EbbId::new(contract.ebb_ids_start)
        .map_err(|error| format!("ebb_ids={}: {error}", contract.ebb_ids_start))?;
    let current: &'static CurrentMap =
        alloc::boxed::Box::leak(alloc::boxed::Box::new(CurrentMap::new(node)));
    let shard = ShardEbb::register(shard_id, messenger, server, current)
        .map_err(|error| format!("cannot make Ebb {shard_id} the shard Ebb: {error}"))?;
    // CAS values name the node that handed them out, so a client's value
    // from a key's old owner never matches at its new one.
    server.store.number_cas_for_node(contract.node);
    // From now on the server's connections forward other nodes' keys.
    server
        .cluster
        .call_once(|| ClusterLink { messenger, current });
    let listen = SocketAddr::new(ebb_app::net::default_listen_ip(), contract.messenger_port);
    let listening = ebb_app::net::listen(listen, acceptor(messenger))
        .await
        .map_err(|error| format!("cannot listen for the Messenger on {listen}: {error}"))?
        .addr;
    announce_until_heard(messenger, node, contract.frontend, listening.port()).await?;
    let member = Member {
        node,
        shard_ebb: shard_id.raw(),
    };
    let lease = enrol(&*map, member, current)
        .await
        .map_err(|error| format!("node {node}: {error}"))?;
    stay_member(map, server, member, current, lease);
    ebb_app::info!(
        "node {node}: shard Ebb {shard_id}, Messenger on port {}, a member",
        listening.port()
    );
    Ok(Joined {
        messenger,
        shard,
        current,
        lease,
        listening,
    })
}

/// Makes `member` a member of the cache afresh: a lease, its promise
/// (`memcached/adopted/N`) and its registration under it; the lease.
///
/// A node joining afresh owns keys only in maps written after it
/// registers, all newer than the one stored before: it may promise that
/// epoch before it registers, so the others never wait for it.
///
/// # Errors
///
/// A sentence saying which step failed.
pub async fn enrol(
    map: &dyn GlobalIdMap,
    member: Member,
    current: &CurrentMap,
) -> Result<Lease, String> {
    let sent = ebb_event::now();
    let lease = map
        .grant_lease(LEASE_TTL)
        .await
        .map_err(|error| format!("no lease: {error}"))?;
    current.lease_kept(sent + SURELY_ALIVE);
    let stored = membership::current(map)
        .await
        .map_err(|error| format!("{error}"))?
        .map_or(0, |map| map.epoch());
    current.registered(stored);
    publish_adopted(map, member.node, stored, lease)
        .await
        .map_err(|error| format!("{error}"))?;
    register(map, member, lease)
        .await
        .map_err(|error| format!("{error}"))?;
    Ok(lease)
}

/// Starts the tasks that keep `member`, enrolled under `lease`, a member
/// while the node runs: [`keep_alive`] and [`follow`]; where they keep
/// the lease in force (a new one after it expired).
pub fn stay_member(
    map: Arc<dyn GlobalIdMap>,
    server: &'static Server,
    member: Member,
    current: &'static CurrentMap,
    lease: Lease,
) -> Arc<AtomicI64> {
    let held = Arc::new(AtomicI64::new(lease.0));
    ebb_event::spawn_task(keep_alive(
        Arc::clone(&map),
        member,
        current,
        Arc::clone(&held),
    ));
    ebb_event::spawn_task(follow(map, server, current, Arc::clone(&held)));
    held
}

/// Announces the node to the frontend, retrying while it is not up.
async fn announce_until_heard(
    messenger: MessengerRef,
    node: NodeId,
    frontend: SocketAddrV4,
    port: u16,
) -> Result<(), String> {
    // 0.0.0.0: the frontend records the address it sees us at.
    let me = NodeEntry {
        node,
        addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port),
        cores: u16::try_from(ebb_event::core_count()).unwrap_or(u16::MAX),
    };
    let mut tries = 0;
    loop {
        tries += 1;
        let rep = messenger
            .get()
            .map_err(|error| format!("cannot reach the Messenger: {error}"))?;
        match announce(rep, SocketAddr::V4(frontend), me).await {
            Ok(_) => return Ok(()),
            // Not up yet, or the connection dropped before the reply (the
            // frontend accepts the same announcement again).
            Err(AnnounceError::Messenger(
                MessengerError::Unreachable { .. } | MessengerError::ConnectionLost,
            )) if tries < ANNOUNCE_TRIES => ebb_event::sleep(ANNOUNCE_PAUSE).await,
            Err(error) => return Err(format!("node {node}: {error}")),
        }
    }
}

/// How long a lease is surely alive after a keep-alive sent then
/// succeeded.
const SURELY_ALIVE: Duration = LEASE_TTL.saturating_sub(SELF_FENCE_MARGIN);

/// Keeps the registration's lease (`held`) alive while the node runs.
/// Each success keeps the node serving until [`SURELY_ALIVE`] after the
/// keep-alive was sent; without one it self-fences then. A lease found
/// expired (the node was cut off for longer than its time to live: the
/// others dropped it from the map) is replaced by a new one and the node
/// registers again; its store is dropped on the way, by the map changes
/// it then adopts (`current.rs`), and it serves nothing until its map is
/// at least the one stored after it registered.
async fn keep_alive(
    map: Arc<dyn GlobalIdMap>,
    member: Member,
    current: &'static CurrentMap,
    held: Arc<AtomicI64>,
) {
    let mut unpublished = false;
    loop {
        ebb_event::sleep(KEEP_ALIVE_EVERY).await;
        let sent = ebb_event::now();
        let lease = Lease(held.load(Ordering::Acquire));
        match map.keep_alive(lease).await {
            Ok(()) => current.lease_kept(sent + SURELY_ALIVE),
            Err(MapError::LeaseExpired(_)) => {
                current.lease_lapsed();
                ebb_app::warn!("node {}: its lease expired; registering again", member.node);
                match register_again(&*map, member, current).await {
                    Ok(new) => {
                        held.store(new.0, Ordering::Release);
                        unpublished = true;
                    }
                    Err(error) => ebb_app::warn!("node {}: {error}", member.node),
                }
            }
            // Unreachable for now: the next renewal tries again.
            Err(error) => ebb_app::warn!("node {}: keeping its lease: {error}", member.node),
        }
        if unpublished {
            // Until published, the others count this node as serving any
            // epoch and hold back the keys they gained.
            let lease = Lease(held.load(Ordering::Acquire));
            if let Some(promise) = current.promise() {
                match publish_adopted(&*map, member.node, promise, lease).await {
                    Ok(()) => unpublished = false,
                    Err(error) => ebb_app::warn!("node {}: {error}", member.node),
                }
            }
        }
    }
}

/// Registers `member` again under a new lease after its lease expired:
/// the node serves nothing from now until its map is at least the one
/// stored once it is registered (the others may have moved on without
/// it meanwhile); the new lease.
async fn register_again(
    map: &dyn GlobalIdMap,
    member: Member,
    current: &CurrentMap,
) -> Result<Lease, String> {
    current.registering();
    let sent = ebb_event::now();
    let lease = map
        .grant_lease(LEASE_TTL)
        .await
        .map_err(|error| format!("no lease: {error}"))?;
    register(map, member, lease)
        .await
        .map_err(|error| format!("{error}"))?;
    // Read after registering: any map written without this node is
    // older than what this read sees, or sees it registered.
    let stored = membership::current(map)
        .await
        .map_err(|error| format!("{error}"))?
        .map_or(0, |map| map.epoch());
    current.registered(stored);
    current.lease_kept(sent + SURELY_ALIVE);
    Ok(lease)
}

/// Keeps the node's map in force: at start and on every change under
/// `memcached/`, reconciles, adopts what is in force, publishes how far
/// it got, and settles the handover fence. A step that fails makes it
/// watch again after a pause, so it is retried.
async fn follow(
    map: Arc<dyn GlobalIdMap>,
    server: &'static Server,
    current: &'static CurrentMap,
    held: Arc<AtomicI64>,
) {
    loop {
        let mut watch = match map.watch(WATCHED).await {
            Ok(watch) => watch,
            Err(error) => {
                ebb_app::warn!("node {}: watching {WATCHED}: {error}", current.me());
                ebb_event::sleep(REWATCH_PAUSE).await;
                continue;
            }
        };
        loop {
            // Watch first, then read: a change made in between is both
            // read now and reported by the watch, never missed.
            match reconcile(&*map).await {
                Ok(in_force) => {
                    if let Err(error) = current.adopt(&server.store, in_force).await {
                        ebb_app::warn!("node {}: adopting the shard map: {error}", current.me());
                    }
                }
                Err(error) => ebb_app::warn!("node {}: {error}", current.me()),
            }
            let lease = Lease(held.load(Ordering::Acquire));
            if let Err(error) = publish_and_settle(&*map, current, lease).await {
                ebb_app::warn!("node {}: {error}", current.me());
                break;
            }
            if let Err(error) = watch.changed().await {
                ebb_app::warn!("node {}: watch of {WATCHED} ended: {error}", current.me());
                break;
            }
        }
        ebb_event::sleep(REWATCH_PAUSE).await;
    }
}

/// Publishes this node's promise (`memcached/adopted/N`) if the stored
/// one differs, and settles the handover fence from the registered
/// nodes' promises. Its own write comes back through the watch.
async fn publish_and_settle(
    map: &dyn GlobalIdMap,
    current: &CurrentMap,
    lease: Lease,
) -> Result<(), String> {
    let me = current.me();
    let (settled, published) = settled_epoch(map, me)
        .await
        .map_err(|error: MembershipError| format!("{error}"))?;
    current
        .settle(settled)
        .map_err(|error| format!("settling the shard map: {error}"))?;
    if let Some(promise) = current.promise() {
        if published != Some(promise) {
            publish_adopted(map, me, promise, lease)
                .await
                .map_err(|error| format!("{error}"))?;
        }
    }
    Ok(())
}
