//! The forwarder's side: one Messenger call to the owner's shard Ebb
//! carrying a forwarded command, and its decoded answer
//! (`docs/distributed-memcached.md`, "The forwarding protocol").

use core::fmt;
use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;

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
    /// No answer within [`FORWARD_TIME_LIMIT`].
    TimedOut,
}

/// How long a forwarded call may take. An owner that froze, or whose
/// network went away without its connection closing, would otherwise
/// hold the client's connection, and every request pipelined behind the
/// forwarded one, until its lease ran out (10 s) and the map dropped it,
/// or forever if it kept its lease. A hop takes milliseconds even under
/// TCG, so 1.5 s is no false alarm; a get then answers a miss, a write
/// an error naming the owner (`text_forward.rs`).
pub const FORWARD_TIME_LIMIT: Duration = Duration::from_millis(1_500);

impl fmt::Display for ForwardFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForwardFailure::Protocol(error) => write!(f, "forwarding: {error}"),
            ForwardFailure::Messenger(error) => write!(f, "forwarding: {error}"),
            ForwardFailure::Ebb(error) => write!(f, "forwarding: {error}"),
            ForwardFailure::TimedOut => write!(
                f,
                "forwarding: no answer within {} ms",
                FORWARD_TIME_LIMIT.as_millis()
            ),
        }
    }
}

/// Sends `request` (with `payload`, a store's value: sent as it is, not
/// copied) to `owner`'s shard Ebb; its reply and the reply's payload (a
/// get's found values, in order: views of the receive buffers).
///
/// # Errors
///
/// What kept the answer from coming, as [`ForwardFailure`] says; no
/// answer within [`FORWARD_TIME_LIMIT`] is `TimedOut` (the call is
/// dropped: a late answer is thrown away).
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
    let call = rep.call_with(owner.node, None, ebb, FORWARD, body);
    let reply = within(FORWARD_TIME_LIMIT, call)
        .await
        .ok_or(ForwardFailure::TimedOut)?
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

/// `work`'s output if it ends within `limit` (on this core's timers),
/// else `None`, and `work` is dropped.
async fn within<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    let mut work = pin!(work);
    let mut timer = pin!(ebb_event::sleep(limit));
    poll_fn(|cx| {
        if let Poll::Ready(output) = work.as_mut().poll(cx) {
            Poll::Ready(Some(output))
        } else if timer.as_mut().poll(cx).is_ready() {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await
}
