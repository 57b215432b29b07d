//! Ring's node role (DESIGN §5): started with a boot contract
//! (`ebb_app::node_contract()`), the node creates its Messenger, makes the
//! first id of its global range its [`Worker`], listens for the Messenger
//! on the contract's port on every core and announces itself to the
//! frontend, retrying while the frontend is not reachable yet.

use alloc::format;
use alloc::string::String;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use core::time::Duration;

use ebb_app::{exit, NodeContract};
use ebb_core::{EbbId, EbbRef, NodeId};
use ebb_messenger::{
    acceptor, announce, create_messenger, AnnounceError, MessengerError, MessengerRef,
    MessengerSettings, NodeEntry,
};

use crate::Worker;

/// How often, and how long apart, the node tries to reach the frontend.
const ANNOUNCE_TRIES: u32 = 120;
const ANNOUNCE_PAUSE: Duration = Duration::from_secs(1);

/// A node that joined: its Messenger and where it listens.
#[derive(Clone, Copy)]
pub struct Joined {
    /// The node's Messenger.
    pub messenger: MessengerRef,
    /// Its worker Ebb.
    pub worker: EbbRef<Worker>,
    /// Where its Messenger listens.
    pub listening: SocketAddr,
}

/// Joins the application as `contract` says (a task on core 0); a node
/// that cannot join stops with exit code 1.
pub async fn join(contract: NodeContract) {
    if let Err(error) = try_join(contract).await {
        ebb_app::error!("{error}");
        exit::stop(exit::FAILURE);
    }
}

/// Joins the application as `contract` says.
///
/// # Errors
///
/// A sentence saying which step failed.
pub async fn try_join(contract: NodeContract) -> Result<Joined, String> {
    let node = NodeId(contract.node);
    let messenger = create_messenger(MessengerSettings::new(node))
        .map_err(|error| format!("cannot create the Messenger: {error}"))?;
    let worker_id = EbbId::new(contract.ebb_ids_start)
        .map_err(|error| format!("ebb_ids={}: {error}", contract.ebb_ids_start))?;
    let worker = Worker::register(worker_id, messenger)
        .map_err(|error| format!("cannot make Ebb {worker_id} the worker: {error}"))?;
    let listen = SocketAddr::new(ebb_app::net::default_listen_ip(), contract.messenger_port);
    let listening = ebb_app::net::listen(listen, acceptor(messenger))
        .await
        .map_err(|error| format!("cannot listen for the Messenger on {listen}: {error}"))?
        .addr;
    // 0.0.0.0: the frontend records the address it sees us at.
    let me = NodeEntry {
        node,
        addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, listening.port()),
        cores: u16::try_from(ebb_event::core_count()).unwrap_or(u16::MAX),
    };
    let frontend = SocketAddr::V4(contract.frontend);
    let mut tries = 0;
    loop {
        tries += 1;
        let rep = messenger
            .get()
            .map_err(|error| format!("cannot reach the Messenger: {error}"))?;
        match announce(rep, frontend, me).await {
            Ok(_) => break,
            // Not up yet, or the connection dropped before the reply (the
            // frontend accepts the same announcement again).
            Err(AnnounceError::Messenger(
                MessengerError::Unreachable { .. } | MessengerError::ConnectionLost,
            )) if tries < ANNOUNCE_TRIES => ebb_event::sleep(ANNOUNCE_PAUSE).await,
            Err(error) => return Err(format!("node {node}: {error}")),
        }
    }
    ebb_app::info!(
        "node {node}: worker {worker_id}, Messenger on port {}, announced to {frontend}",
        listening.port()
    );
    Ok(Joined {
        messenger,
        worker,
        listening,
    })
}
