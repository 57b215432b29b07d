//! The worker Ebb: one representative per core, all sharing the node's
//! digests (its root, kept in the node's map of Ebb roots under the
//! worker's id).
//!
//! [`WORK`]: digest the slice (the payload, views of the receive buffers),
//! keep it for the round, reply with it. [`TOKEN`]: add this node's digest
//! of the round to the total and call the next hop's worker with the rest
//! of the ring (native to native); the reply, given when that call ends
//! (a deferred answer), is the last node's, or says where the ring broke.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::format;
use core::time::Duration;

use ebb_core::{Ebb, EbbError, EbbId, EbbRef, FaultContext, NodeId};
use ebb_messenger::{Answer, Message, MessengerRef, Request, Service, ServiceError};
use spin::Mutex;

use crate::bound::{silence, token_bound, within};
use crate::wire::{Token, TokenReply, WorkDone, WorkOrder, BAD_CONTROL, TOKEN, WORK};
use crate::work::digest;

/// Rounds whose digests a node keeps (a ring retried over the survivors
/// needs the current round's only).
const KEPT_ROUNDS: u32 = 4;

/// The worker Ebb type.
pub struct Worker;

/// What the node's representatives share.
pub struct WorkerRoot {
    node: NodeId,
    messenger: MessengerRef,
    /// Round → this node's digest of its slice.
    digests: Mutex<BTreeMap<u32, u64>>,
}

/// A core's representative of [`Worker`].
pub struct WorkerRep {
    root: &'static WorkerRoot,
}

impl Worker {
    /// Makes Ebb `id` this node's worker, calling other nodes through
    /// `messenger` (the calling core's node's), and has the Messenger
    /// deliver its messages.
    ///
    /// # Errors
    ///
    /// Not on a core, or `id` is bound already.
    pub fn register(id: EbbId, messenger: MessengerRef) -> Result<EbbRef<Worker>, EbbError> {
        let rep = messenger.get()?;
        let node = ebb_core::current_node().ok_or(EbbError::NotOnCore)?;
        node.local_ids().insert(
            id,
            WorkerRoot {
                node: rep.node(),
                messenger,
                digests: Mutex::new(BTreeMap::new()),
            },
        )?;
        let worker = EbbRef::<Worker>::bind(id)?;
        rep.register_ebb(worker);
        Ok(worker)
    }
}

impl Ebb for Worker {
    type Rep = WorkerRep;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static WorkerRep, EbbError> {
        let root = ctx.node.local_ids().get::<WorkerRoot>(ctx.id)?;
        Ok(Box::leak(Box::new(WorkerRep { root })))
    }
}

impl Service for WorkerRep {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        if request.message != WORK {
            return Err(ServiceError::UnknownMessage);
        }
        let order = WorkOrder::decode(&request.body.control)
            .map_err(|_| ServiceError::Refused(BAD_CONTROL))?;
        let digest = digest(&request.body.payload);
        let mut digests = self.root.digests.lock();
        digests.insert(order.round, digest);
        digests.retain(|&round, _| round.saturating_add(KEPT_ROUNDS) > order.round);
        drop(digests);
        ebb_app::info!(
            "node {}: round {}: {} bytes, digest {digest:#018x}",
            self.root.node,
            order.round,
            request.body.payload.len()
        );
        Ok(WorkDone {
            round: order.round,
            digest,
        }
        .message())
    }

    fn answer(&self, request: Request) -> Answer {
        if request.message != TOKEN {
            return Answer::Now(self.handle(request));
        }
        match Token::decode(&request.body.control) {
            Ok(token) => Answer::Later(Box::pin(pass_on(self.root, token))),
            Err(_) => Answer::Now(Err(ServiceError::Refused(BAD_CONTROL))),
        }
    }
}

/// Adds this node's digest to the token and calls the next hop with it.
async fn pass_on(root: &'static WorkerRoot, token: Token) -> Result<Message, ServiceError> {
    let digest = root.digests.lock().get(&token.round).copied();
    let Some(digest) = digest else {
        return Ok(TokenReply::NoWork { at: root.node }.message());
    };
    let total = token.total.wrapping_add(digest);
    let Some((next, rest)) = token.hops.split_first() else {
        return Ok(TokenReply::Done { total }.message());
    };
    let passed = Token {
        round: token.round,
        total,
        hops: rest.to_vec(),
        hop_timeout_ms: token.hop_timeout_ms,
    };
    // Fewer hops than the token it came in: it fits.
    let Ok(message) = passed.message() else {
        return Err(ServiceError::Refused(BAD_CONTROL));
    };
    let call = root
        .messenger
        .get()
        .map_err(|_| ServiceError::NoRepresentative)?
        .call_with(next.node, None, next.worker, TOKEN, message);
    // One unit under the caller's bound: this call gives up first when the
    // next node is frozen, and the ring is reported broken there.
    let unit = Duration::from_millis(u64::from(token.hop_timeout_ms.max(1)));
    let limit = token_bound(unit, rest.len());
    // Said on this node's console too: where a native-to-native call
    // failed, and how (a loss notice from the frontend: `NodeLost`).
    let broken = |why: alloc::string::String| {
        ebb_app::info!(
            "node {}: round {}: token to node {} failed: {why}",
            root.node,
            token.round,
            next.node
        );
        TokenReply::Broken { at: next.node, why }.message()
    };
    let Some(answer) = within(limit, call).await else {
        return Ok(broken(silence(next.node, limit)));
    };
    Ok(match answer {
        Ok(reply) if TokenReply::decode(&reply).is_ok() => reply,
        Ok(reply) => broken(format!(
            "node {} sent a token reply that does not decode ({} bytes)",
            next.node,
            reply.control.len()
        )),
        Err(error) => broken(format!("{error}")),
    })
}
