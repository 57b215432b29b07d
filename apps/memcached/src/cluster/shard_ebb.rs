//! The shard Ebb: on every node, one representative per core serving the
//! forwarding protocol's requests ([`FORWARD`]) from the node's store,
//! through `serve.rs` (`docs/distributed-memcached.md`, "The pieces").
//! Its id is the first of the node's global range, written into the
//! shard map, so no id is agreed in advance.
//!
//! Every request is answered at once (`Service::handle`): the owner check
//! (with the fences, `current.rs`) and the store operation run in one
//! event, inside one RCU read section of the map in force, which is what `current.rs`'s grace period waits
//! out before it sweeps.

use alloc::boxed::Box;

use ebb_core::{Ebb, EbbError, EbbId, EbbRef, FaultContext};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Message, MessageNumber, MessengerRef, Request, Service, ServiceError};

use super::current::CurrentMap;
use super::forward::is_meta;
use super::meta_forward::serve_meta;
use super::serve::serve;
use crate::Server;

/// The forwarding protocol's one message: a forwarded command, answered
/// with its reply (`forward.rs`).
pub const FORWARD: MessageNumber = MessageNumber(1);

/// The refusal code of a reply that could not be encoded (cannot happen:
/// a reply has at most as many entries as its request had keys).
pub const UNENCODABLE_REPLY: u32 = 1;

/// The shard Ebb type.
pub struct ShardEbb;

/// What the node's representatives share.
pub struct ShardRoot {
    /// The node's server: its store and clock.
    pub server: &'static Server,
    /// The map in force.
    pub current: &'static CurrentMap,
}

/// A core's representative of [`ShardEbb`].
pub struct ShardRep {
    root: &'static ShardRoot,
}

impl ShardEbb {
    /// Makes Ebb `id` this node's shard Ebb, serving `server`'s store by
    /// `current`, and has `messenger` deliver its messages.
    ///
    /// # Errors
    ///
    /// Not on a core, or `id` is bound already.
    pub fn register(
        id: EbbId,
        messenger: MessengerRef,
        server: &'static Server,
        current: &'static CurrentMap,
    ) -> Result<EbbRef<ShardEbb>, EbbError> {
        let rep = messenger.get()?;
        let node = ebb_core::current_node().ok_or(EbbError::NotOnCore)?;
        node.local_ids().insert(id, ShardRoot { server, current })?;
        let shard = EbbRef::<ShardEbb>::bind(id)?;
        rep.register_ebb(shard);
        Ok(shard)
    }
}

impl Ebb for ShardEbb {
    type Rep = ShardRep;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static ShardRep, EbbError> {
        let root = ctx.node.local_ids().get::<ShardRoot>(ctx.id)?;
        Ok(Box::leak(Box::new(ShardRep { root })))
    }
}

impl Service for ShardRep {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        answer(self.root, &request)
    }
}

/// The answer to `request` from the node `root` describes (the whole of
/// a representative's work, so tests can drive it without a connection).
///
/// # Errors
///
/// An unknown message number.
pub fn answer(root: &ShardRoot, request: &Request) -> Result<Message, ServiceError> {
    if request.message != FORWARD {
        return Err(ServiceError::UnknownMessage);
    }
    // Controls are at most 4 KiB (the Messenger's limit): one small copy
    // only when they arrived split across receive buffers.
    let copied;
    let control = match request.body.control.contiguous() {
        Some(control) => control,
        None => {
            copied = request.body.control.to_vec();
            &copied
        }
    };
    let now = root.server.unix_now();
    let (reply, values) = root.current.view(|view| {
        let payload = &request.body.payload;
        if is_meta(control) {
            serve_meta(root.server, view, control, payload)
        } else {
            serve(&root.server.store, view, now, control, payload)
        }
    });
    let control = reply
        .encode()
        .map_err(|_| ServiceError::Refused(UNENCODABLE_REPLY))?;
    Ok(Message {
        control: IoChain::from(IoBuf::from_vec(control)),
        payload: values,
    })
}
