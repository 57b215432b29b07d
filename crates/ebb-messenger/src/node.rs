//! The local end of the message layer: this node's id, its configuration
//! and the Ebbs that receive messages here.
//!
//! An Ebb receives messages on a node once the node knows its type:
//! [`LocalNode::register_ebb`] binds the id, and each message is handled by
//! the receiving core's representative, which the Ebb's fault handler
//! builds on the first message there (lazy creation, as for a local miss).
//! [`LocalNode::register`] takes any [`Service`] instead (tests, adapters).

use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use core::cell::RefCell;

use ebb_core::{Ebb, EbbId, EbbRef, NodeId};
use ebb_iobuf::IoChain;

use crate::{Limits, MessageNumber};

/// A message's body: its control bytes and its payload.
/// Equality compares contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// A small control structure the Ebb type defines (copied once into
    /// the header's buffer when sent).
    pub control: IoChain,
    /// The bulk data (sent as it is, never copied).
    pub payload: IoChain,
}

impl Message {
    /// A message with only a payload.
    #[must_use]
    pub fn payload(payload: IoChain) -> Self {
        Message {
            control: IoChain::new(),
            payload,
        }
    }
}

/// A message received for one of this node's Ebbs.
#[derive(Debug)]
pub struct Request {
    /// The sending node.
    pub from: NodeId,
    /// The message number within the Ebb type.
    pub message: MessageNumber,
    /// Its body; views into the receive buffers.
    pub body: Message,
}

/// Why a [`Service`] did not answer a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceError {
    /// The Ebb type has no message with this number.
    UnknownMessage,
    /// The Ebb refused, with a code of its own.
    Refused(u32),
    /// The Ebb has no representative on this core and its fault handler
    /// could not build one.
    NoRepresentative,
}

/// An Ebb's receiving side on this node.
pub trait Service {
    /// Handles one message; for a call, the result is the reply (for a
    /// one-way message it is dropped).
    ///
    /// # Errors
    ///
    /// What the caller receives as an error reply.
    fn handle(&self, request: Request) -> Result<Message, ServiceError>;
}

/// The message layer's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The largest message parts this node accepts (the peer learns them
    /// in the hello).
    pub limits: Limits,
    /// Bytes a connection may queue for a peer that does not read fast
    /// enough. A new message is refused once the queue holds this many
    /// (an empty queue always takes one message, so any message within
    /// the limits can go out); replies that push the queue past it pause
    /// receiving from the peer until it drains.
    pub max_queued_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limits: Limits::DEFAULT,
            max_queued_bytes: 1 << 20,
        }
    }
}

/// This node, as the message layer sees it.
pub struct LocalNode {
    id: NodeId,
    config: Config,
    services: RefCell<BTreeMap<u32, Rc<dyn Service>>>,
}

impl LocalNode {
    /// A node with no services yet.
    #[must_use]
    pub fn new(id: NodeId, config: Config) -> Rc<Self> {
        Rc::new(LocalNode {
            id,
            config,
            services: RefCell::new(BTreeMap::new()),
        })
    }

    /// The node's id.
    #[must_use]
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// The node's settings.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Makes `service` receive the messages sent to Ebb `ebb` here.
    pub fn register(&self, ebb: EbbId, service: Rc<dyn Service>) {
        self.services.borrow_mut().insert(ebb.raw(), service);
    }

    /// Makes Ebb `ebb` receive the messages sent to it here, through the
    /// receiving core's representative (built by `E`'s fault handler on
    /// the first message that core receives for it).
    pub fn register_ebb<E: Ebb>(&self, ebb: EbbRef<E>)
    where
        E::Rep: Service,
    {
        self.register(ebb.id(), Rc::new(ViaRepresentative(ebb)));
    }

    /// The service of Ebb `ebb`, if it has one here.
    #[must_use]
    pub fn service(&self, ebb: u32) -> Option<Rc<dyn Service>> {
        self.services.borrow().get(&ebb).cloned()
    }
}

/// Hands each message to the calling core's representative of `E`.
struct ViaRepresentative<E: Ebb>(EbbRef<E>);

impl<E: Ebb> Service for ViaRepresentative<E>
where
    E::Rep: Service,
{
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        match self.0.get() {
            Ok(rep) => rep.handle(request),
            Err(_) => Err(ServiceError::NoRepresentative),
        }
    }
}
