//! The frontend's loss notice (DESIGN §5): when the frontend learns that
//! node N is gone (its launcher saw the VM or process end) and calls
//! [`crate::MessengerRep::lose_node`], it tells every other node in its
//! directory, so that their calls pending on N fail with
//! [`crate::MessengerError::NodeLost`] too instead of waiting for TCP to
//! give up (a node killed outright sends no reset, and a frozen one
//! answers nothing).
//!
//! Every node's Messenger serves Ebb [`NODE_EBB`] (a reserved id): message
//! [`NODE_LOST`], whose control is a [`LostNotice`], sent as a call by
//! node 0 only. The receiving node drops its connection to N and N's
//! directory entry ([`crate::MessengerRep::lose_node`], which on a node
//! other than the frontend tells no one) and replies with nothing.

use alloc::sync::Arc;

use ebb_core::{EbbId, NodeId};
use ebb_iobuf::{IoBuf, IoChain};

use crate::announce::FRONTEND_NODE;
use crate::control::u32_at;
use crate::{
    Answer, Message, MessageNumber, MessengerRef, Request, ServiceError, SharedServices, WireError,
};

/// Every node's Messenger control Ebb (a reserved id, the same in every
/// build).
pub const NODE_EBB: EbbId = EbbId::reserved(17);

/// Its message: node N is lost. The control is a [`LostNotice`].
pub const NODE_LOST: MessageNumber = MessageNumber(1);

/// The refusal code of a notice that does not come from the frontend.
pub const NOTICE_NOT_FROM_FRONTEND: u32 = 1;
/// The refusal code of a notice that does not decode or names node 0.
pub const NOTICE_MALFORMED: u32 = 2;

/// The control of [`NODE_LOST`]: the lost node's id (4 bytes,
/// little-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LostNotice(pub NodeId);

impl LostNotice {
    /// Bytes on the wire.
    pub const LEN: usize = 4;

    /// Encodes the structure.
    #[must_use]
    pub fn encode(&self) -> [u8; Self::LEN] {
        self.0 .0.to_le_bytes()
    }

    /// Decodes the structure from a control chain.
    ///
    /// # Errors
    ///
    /// [`WireError::ControlLength`] unless the chain holds exactly
    /// [`LostNotice::LEN`] bytes.
    pub fn decode(control: &IoChain) -> Result<LostNotice, WireError> {
        let bytes = control.to_vec();
        if bytes.len() != Self::LEN {
            return Err(WireError::ControlLength {
                expected: Self::LEN,
                found: bytes.len(),
            });
        }
        Ok(LostNotice(NodeId(u32_at(&bytes, 0))))
    }

    /// As the body of a call.
    pub(crate) fn message(&self) -> Message {
        Message {
            control: IoChain::from(IoBuf::copy_from_slice(&self.encode())),
            payload: IoChain::new(),
        }
    }
}

/// Makes every core of `messenger`'s node answer [`NODE_EBB`].
pub(crate) fn serve_notices(shared: &SharedServices, messenger: MessengerRef) {
    shared.register(
        NODE_EBB,
        Arc::new(move |request: Request| Answer::Now(take_notice(messenger, &request))),
    );
}

fn take_notice(messenger: MessengerRef, request: &Request) -> Result<Message, ServiceError> {
    if request.message != NODE_LOST {
        return Err(ServiceError::UnknownMessage);
    }
    let rep = messenger
        .get()
        .map_err(|_| ServiceError::NoRepresentative)?;
    // Only the frontend, which watches the nodes, says one is lost; so the
    // frontend itself takes no notice (it learns of losses from its
    // launcher), and a node takes one only on a connection whose hello
    // said node 0 (`Request::from` is the hello's node: the peer checks
    // every frame's source against it) from the frontend's address as its
    // contract gave it (a process elsewhere saying hello as node 0 is not
    // the frontend).
    let from_frontend = request.from == FRONTEND_NODE
        && rep.node() != FRONTEND_NODE
        && match (rep.directory().address(FRONTEND_NODE), request.peer_addr) {
            (Some(frontend), Some(sender)) => frontend.ip() == sender.ip(),
            // Not announced yet, or not over TCP (the simulated link).
            _ => true,
        };
    if !from_frontend {
        return Err(ServiceError::Refused(NOTICE_NOT_FROM_FRONTEND));
    }
    let LostNotice(node) = LostNotice::decode(&request.body.control)
        .ok()
        .filter(|notice| notice.0 != FRONTEND_NODE)
        .ok_or(ServiceError::Refused(NOTICE_MALFORMED))?;
    if node != rep.node() {
        rep.lose_node(node);
    }
    Ok(Message::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_is_the_node_id_little_endian() {
        let notice = LostNotice(NodeId(0x0102_0304));
        assert_eq!(notice.encode(), [4, 3, 2, 1]);
        assert_eq!(LostNotice::decode(&notice.message().control), Ok(notice));
        assert_eq!(
            LostNotice::decode(&IoChain::from(IoBuf::copy_from_slice(&[1, 2, 3]))),
            Err(WireError::ControlLength {
                expected: 4,
                found: 3
            })
        );
    }
}
