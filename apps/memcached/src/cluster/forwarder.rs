//! The forwarder's side: one Messenger call to the owner's shard Ebb
//! carrying a forwarded command, and its decoded answer
//! (`docs/distributed-memcached.md`, "The forwarding protocol").

use core::fmt;

use ebb_core::{EbbError, EbbId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Message, MessengerError, MessengerRef};

use super::forward::{ForwardError, ForwardReply, ForwardRequest};
use super::shard_ebb::FORWARD;
use super::shard_map::Member;

/// Why a forwarded command got no answer from its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForwardFailure {
    /// The request or the owner's reply did not encode or decode.
    Protocol(ForwardError),
    /// The call failed (the owner lost or unreachable, an error reply).
    Messenger(MessengerError),
    /// The member's shard Ebb id is not an Ebb id, or this core has no
    /// Messenger.
    Ebb(EbbError),
}

impl fmt::Display for ForwardFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForwardFailure::Protocol(error) => write!(f, "forwarding: {error}"),
            ForwardFailure::Messenger(error) => write!(f, "forwarding: {error}"),
            ForwardFailure::Ebb(error) => write!(f, "forwarding: {error}"),
        }
    }
}

/// Sends `request` (with `payload`, a store's value: sent as it is, not
/// copied) to `owner`'s shard Ebb; its reply and the reply's payload (a
/// get's found values, in order: views of the receive buffers).
///
/// # Errors
///
/// What kept the answer from coming, as [`ForwardFailure`] says.
pub async fn forward(
    messenger: MessengerRef,
    owner: Member,
    request: &ForwardRequest<'_>,
    payload: IoChain,
) -> Result<(ForwardReply, IoChain), ForwardFailure> {
    let control = request.encode().map_err(ForwardFailure::Protocol)?;
    let ebb = EbbId::new(owner.shard_ebb).map_err(ForwardFailure::Ebb)?;
    let rep = messenger.get().map_err(ForwardFailure::Ebb)?;
    let body = Message {
        control: IoChain::from(IoBuf::from_vec(control)),
        payload,
    };
    let reply = rep
        .call_with(owner.node, None, ebb, FORWARD, body)
        .await
        .map_err(ForwardFailure::Messenger)?;
    let copied;
    let control = match reply.control.contiguous() {
        Some(control) => control,
        None => {
            copied = reply.control.to_vec();
            &copied
        }
    };
    let decoded =
        ForwardReply::decode(control, reply.payload.len()).map_err(ForwardFailure::Protocol)?;
    Ok((decoded, reply.payload))
}
