//! filecheck's node role (DESIGN §5): started with a boot contract, the
//! node creates its Messenger, serves [`COPY`] under the first id of its
//! global range on every core, listens on the contract's port and
//! announces itself to the frontend (retrying while it is not up yet).
//! Each copy runs as a deferred answer: its file operations are calls to
//! the frontend's FileSystem Ebb.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use core::time::Duration;

use ebb_app::{exit, NodeContract};
use ebb_core::{EbbId, NodeId};
use ebb_messenger::{
    acceptor, announce_retrying, create_messenger, Answer, MessengerSettings, NodeEntry, Request,
    ServiceError,
};
use ebb_offload::RemoteFileSystem;

use crate::wire::{copied_message, refusal};
use crate::{copy_file, CopyOrder, COPY};

/// How often, and how long apart, the node tries to reach the frontend.
const ANNOUNCE_TRIES: u32 = 120;
const ANNOUNCE_PAUSE: Duration = Duration::from_secs(1);

/// The refusal code of a [`COPY`] whose control does not decode.
pub const BAD_ORDER: u32 = 1;

/// Joins the cluster as `contract` says (a task on core 0); a node that
/// cannot stops with exit code 1.
pub async fn join(contract: NodeContract) {
    if let Err(error) = try_join(contract).await {
        ebb_app::error!("{error}");
        exit::stop(exit::FAILURE);
    }
}

async fn try_join(contract: NodeContract) -> Result<(), String> {
    let node = NodeId(contract.node);
    let messenger = create_messenger(MessengerSettings::new(node))
        .map_err(|error| format!("cannot create the Messenger: {error}"))?;
    let id = EbbId::new(contract.ebb_ids_start)
        .map_err(|error| format!("ebb_ids={}: {error}", contract.ebb_ids_start))?;
    let files = RemoteFileSystem::new(messenger);
    let rep = messenger
        .get()
        .map_err(|error| format!("cannot reach the Messenger: {error}"))?;
    rep.local().shared().register(
        id,
        Arc::new(move |request: Request| answer(node, files, &request)),
    );
    let listen = SocketAddr::new(ebb_app::net::default_listen_ip(), contract.messenger_port);
    let port = ebb_app::net::listen(listen, acceptor(messenger))
        .await
        .map_err(|error| format!("cannot listen for the Messenger on {listen}: {error}"))?
        .addr
        .port();
    // 0.0.0.0: the frontend records the address it sees us at.
    let me = NodeEntry {
        node,
        addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port),
        cores: u16::try_from(ebb_event::core_count()).unwrap_or(u16::MAX),
    };
    let frontend = SocketAddr::V4(contract.frontend);
    announce_retrying(rep, frontend, me, ANNOUNCE_TRIES, ANNOUNCE_PAUSE)
        .await
        .map_err(|error| format!("node {node}: {error}"))?;
    ebb_app::info!("node {node}: copies files on request as Ebb {id}, Messenger on port {port}");
    Ok(())
}

/// [`COPY`]: the copy, later (its file operations are calls).
fn answer(node: NodeId, files: RemoteFileSystem, request: &Request) -> Answer {
    if request.message != COPY {
        return Answer::Now(Err(ServiceError::UnknownMessage));
    }
    let Some(order) = CopyOrder::decode(&request.body.control.to_vec()) else {
        return Answer::Now(Err(ServiceError::Refused(BAD_ORDER)));
    };
    Answer::Later(Box::pin(async move {
        match copy_file(&files, &order.from, &order.to).await {
            Ok(copied) => {
                ebb_app::info!(
                    "node {node}: copied {} to {}: {} bytes, digest {:#018x}",
                    order.from,
                    order.to,
                    copied.bytes,
                    copied.digest
                );
                Ok(copied_message(copied))
            }
            Err(error) => {
                ebb_app::info!(
                    "node {node}: copying {} to {}: {error}",
                    order.from,
                    order.to
                );
                Err(ServiceError::Refused(refusal(&error)))
            }
        }
    }))
}
