//! Echo as a node of a distributed application (DESIGN §5): started with
//! a boot contract (`ebb_app::node_contract()`: on the kernel command
//! line natively, `EBB_NODE` hosted), echo also answers Messenger calls.
//!
//! It listens for the Messenger on the contract's port on every core (on
//! the address echo's `--listen` names),
//! serves the Messenger echo Ebb under the first id of its global range
//! (the frontend, which handed out the range, knows it) with a
//! representative per core, and announces itself to the frontend, retrying
//! while the frontend is not reachable yet. Its map is the hosted node's
//! (`ebb_messenger::map::RemoteGlobalIdMap`, installed as the address
//! space's `global_map()`), and its echo Ebb shows both offloads at work:
//! [`MAP_COPY`] reads and writes that map, [`COMMAND_LINE`] answers the
//! arguments fetched from the frontend. Given a [`PingOrder`] (echo's
//! `--ping-node`), it then times round trips to another node
//! ([`crate::ping::run`]) and prints them.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use core::time::Duration;

use ebb_app::{exit, NodeContract};
use ebb_core::{CoreId, Ebb, EbbError, EbbId, EbbRef, FaultContext, NodeId};
use ebb_messenger::map::{
    encode_reply, global_map, install_global_map, MapReply, RemoteGlobalIdMap,
};
use ebb_messenger::{
    acceptor, announce, command_line, create_messenger, AnnounceError, Answer, Message,
    MessageNumber, MessengerError, MessengerRef, MessengerSettings, NodeEntry, Request, Service,
    ServiceError,
};
use spin::Once;

/// The Messenger echo Ebb's message: the reply is the request.
pub const ECHO: MessageNumber = MessageNumber(1);
/// Its other message: the reply is the number of the core that ran it, 4
/// bytes little-endian.
pub const WHICH_CORE: MessageNumber = MessageNumber(2);
/// Its message: the payload is a key; the node reads it from the
/// application's global id map (the hosted node's, over the Messenger)
/// and, if it is there, writes its value under `KEY/copied`. The reply
/// is the read's result, or the write's error, in the map protocol's
/// layout (`ebb_messenger::map::encode_reply` of a `get`).
pub const MAP_COPY: MessageNumber = MessageNumber(3);
/// Its message: the reply is the application's arguments as the node
/// fetched them from the frontend (`CommandLine::encode_args`).
pub const COMMAND_LINE: MessageNumber = MessageNumber(4);

/// Refusal codes of [`MAP_COPY`] and [`COMMAND_LINE`].
pub const KEY_NOT_UTF8: u32 = 1;
/// The node has no Messenger yet.
pub const NOT_JOINED: u32 = 2;
/// The command line could not be fetched (the node's console says why).
pub const NO_COMMAND_LINE: u32 = 3;

/// This node's Messenger, for the deferred answers.
static MESSENGER: Once<MessengerRef> = Once::new();

/// How often, and how long apart, the node tries to reach the frontend.
const ANNOUNCE_TRIES: u32 = 120;
const ANNOUNCE_PAUSE: Duration = Duration::from_secs(1);

/// The Messenger echo Ebb: one representative per core.
pub struct MessengerEcho;

/// A core's representative of [`MessengerEcho`].
pub struct MessengerEchoRep {
    core: CoreId,
}

impl Service for MessengerEchoRep {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        match request.message {
            ECHO => Ok(request.body),
            WHICH_CORE => {
                let core = u32::try_from(self.core.0).unwrap_or(u32::MAX);
                Ok(Message::payload(ebb_app::net::api::IoChain::from(
                    ebb_app::net::api::IoBuf::from_vec(core.to_le_bytes().to_vec()),
                )))
            }
            _ => Err(ServiceError::UnknownMessage),
        }
    }

    fn answer(&self, request: Request) -> Answer {
        match request.message {
            MAP_COPY => Answer::Later(Box::pin(map_copy(request.body.payload.to_vec()))),
            COMMAND_LINE => Answer::Later(Box::pin(command_line_reply())),
            _ => Answer::Now(self.handle(request)),
        }
    }
}

/// [`MAP_COPY`]'s work.
async fn map_copy(key: Vec<u8>) -> Result<Message, ServiceError> {
    let key = String::from_utf8(key).map_err(|_| ServiceError::Refused(KEY_NOT_UTF8))?;
    let map = global_map();
    let result = match map.get(&key).await {
        Ok(Some(value)) => map
            .set(&format!("{key}/copied"), value.clone(), None)
            .await
            .map(|()| Some(value)),
        other => other,
    };
    Ok(payload(encode_reply(&result.map(MapReply::Value))))
}

/// [`COMMAND_LINE`]'s work.
async fn command_line_reply() -> Result<Message, ServiceError> {
    let messenger = *MESSENGER.get().ok_or(ServiceError::Refused(NOT_JOINED))?;
    match command_line::load(messenger).await {
        Ok(line) => Ok(payload(line.encode_args())),
        Err(error) => {
            ebb_app::error!("{error}");
            Err(ServiceError::Refused(NO_COMMAND_LINE))
        }
    }
}

fn payload(bytes: Vec<u8>) -> Message {
    Message::payload(ebb_app::net::api::IoChain::from(
        ebb_app::net::api::IoBuf::from_vec(bytes),
    ))
}

impl Ebb for MessengerEcho {
    type Rep = MessengerEchoRep;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static MessengerEchoRep, EbbError> {
        Ok(Box::leak(Box::new(MessengerEchoRep { core: ctx.core })))
    }
}

/// Round trips to time once announced: to node `node`'s Messenger echo
/// Ebb `ebb` and its TCP echo at `tcp`, `count` of each kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PingOrder {
    /// The node called.
    pub node: u32,
    /// Its Messenger echo Ebb's global id.
    pub ebb: u32,
    /// Its TCP echo.
    pub tcp: SocketAddr,
    /// 64-byte round trips of each kind.
    pub count: usize,
}

/// Joins the application as its contract says (a task on core 0),
/// listening for the Messenger on `listen`, then carries out `ping`, if
/// any.
pub async fn join(contract: NodeContract, listen: IpAddr, ping: Option<PingOrder>) {
    if let Err(error) = try_join(contract, listen, ping).await {
        ebb_app::error!("{error}");
        exit::stop(exit::FAILURE);
    }
}

async fn try_join(
    contract: NodeContract,
    listen: IpAddr,
    ping: Option<PingOrder>,
) -> Result<(), alloc::string::String> {
    let node = NodeId(contract.node);
    let messenger = create_messenger(MessengerSettings::new(node))
        .map_err(|error| format!("cannot create the Messenger: {error}"))?;
    MESSENGER.call_once(|| messenger);
    // Several nodes in one process (tests) keep the first one's map.
    let _ = install_global_map(Arc::new(RemoteGlobalIdMap::new(messenger)));
    let rep = messenger
        .get()
        .map_err(|error| format!("cannot reach the Messenger: {error}"))?;
    let echo_id = EbbId::new(contract.ebb_ids_start)
        .map_err(|error| format!("ebb_ids={}: {error}", contract.ebb_ids_start))?;
    let echo = EbbRef::<MessengerEcho>::bind(echo_id)
        .map_err(|error| format!("cannot bind the echo Ebb: {error}"))?;
    rep.register_ebb(echo);
    let listen = SocketAddr::new(listen, contract.messenger_port);
    let listening = ebb_app::net::listen(listen, acceptor(messenger))
        .await
        .map_err(|error| format!("cannot listen for the Messenger on {listen}: {error}"))?;
    // 0.0.0.0: the frontend records the address it sees us at.
    let me = NodeEntry {
        node,
        addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, listening.addr.port()),
        cores: u16::try_from(ebb_event::core_count()).unwrap_or(u16::MAX),
    };
    let frontend = SocketAddr::V4(contract.frontend);
    let mut tries = 0;
    let welcome = loop {
        tries += 1;
        match announce(rep, frontend, me).await {
            Ok(welcome) => break welcome,
            // Not up yet, or the connection dropped before the reply (the
            // frontend accepts the same announcement again).
            Err(AnnounceError::Messenger(
                MessengerError::Unreachable { .. } | MessengerError::ConnectionLost,
            )) if tries < ANNOUNCE_TRIES => {
                ebb_event::sleep(ANNOUNCE_PAUSE).await;
            }
            Err(error) => return Err(format!("node {node}: {error}")),
        }
    };
    ebb_app::info!(
        "Messenger node {node} on port {}: announced to {frontend}, echo Ebb {echo_id}, {} other nodes",
        listening.addr.port(),
        welcome.directory.len()
    );
    if let Some(order) = ping {
        let target = crate::ping::Target {
            node: NodeId(order.node),
            ebb: EbbId::new(order.ebb)
                .map_err(|error| format!("--ping-ebb {}: {error}", order.ebb))?,
            tcp: order.tcp,
        };
        crate::ping::run(rep, target, order.count).await?;
    }
    Ok(())
}
