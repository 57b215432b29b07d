//! The local end of the message layer: this node's id, its configuration
//! and the Ebbs that receive messages here.
//!
//! An Ebb receives messages on a node once the node knows its type:
//! [`LocalNode::register_ebb`] binds the id, and each message is handled by
//! the receiving core's representative, which the Ebb's fault handler
//! builds on the first message there (lazy creation, as for a local miss).
//! [`LocalNode::register`] takes any [`Service`] instead (tests, adapters).
//!
//! A message may name the core that handles it (the header's core field).
//! A `LocalNode` made with [`LocalNode::on_core`] knows its core and hands
//! such a message to the named core through a [`CoreRouter`]; there, the
//! Ebbs registered with [`LocalNode::register_ebb`] answer it, since their
//! registration ([`SharedServices`]) is shared by every core of the node.
//! A [`Service`] registered with [`LocalNode::register`] lives on one core
//! and is reached only on the connection's core. A `LocalNode` made with
//! [`LocalNode::new`] is a node of one core, core 0.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::sync::Arc;
use core::cell::RefCell;
use core::future::Future;
use core::net::SocketAddr;
use core::pin::Pin;

use ebb_core::{CoreId, Ebb, EbbId, EbbRef, NodeId};
use ebb_iobuf::IoChain;
use spin::RwLock;

use crate::{ErrorReply, Limits, MessageNumber};

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
    /// The connection's remote address, as this node sees it (`None` on
    /// a connection without addresses, as in tests).
    pub peer_addr: Option<SocketAddr>,
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

/// A reply that comes later: a future the receiving core runs as a task
/// (`ebb_event::spawn_task`), for instance one that calls other nodes
/// first. Its output is sent as the reply (or error reply) when it ends.
pub type Deferred = Pin<Box<dyn Future<Output = Result<Message, ServiceError>>>>;

/// A service's answer to a message: now, or [`Deferred`].
// `Now` is the common answer, given once per message: boxing it to make
// the enum smaller would cost an allocation per message.
#[allow(clippy::large_enum_variant)]
pub enum Answer {
    /// The reply (or error reply), at once.
    Now(Result<Message, ServiceError>),
    /// The reply once the future ends. Only on a node whose cores run the
    /// event layer (an Ebbflow node), which runs the future.
    Later(Deferred),
}

impl From<Result<Message, ServiceError>> for Answer {
    fn from(result: Result<Message, ServiceError>) -> Self {
        Answer::Now(result)
    }
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

    /// What the Messenger asks: by default [`Service::handle`]'s result,
    /// now. A service whose reply must wait (it calls another node first)
    /// overrides it to return [`Answer::Later`] for those messages; the
    /// connection goes on serving other messages meanwhile.
    fn answer(&self, request: Request) -> Answer {
        Answer::Now(self.handle(request))
    }
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

/// An Ebb's receiving side that any core of the node can run (each core
/// resolves its own representative).
pub type SharedService = Arc<dyn Fn(Request) -> Answer + Send + Sync>;

/// The Ebbs every core of a node answers for, registered once and shared
/// by the cores' [`LocalNode`]s.
#[derive(Default)]
pub struct SharedServices {
    services: RwLock<BTreeMap<u32, SharedService>>,
}

impl SharedServices {
    /// Makes `service` answer the messages for Ebb `ebb` on every core.
    pub fn register(&self, ebb: EbbId, service: SharedService) {
        self.services.write().insert(ebb.raw(), service);
    }

    /// Runs Ebb `ebb`'s service on the calling core, if it has one.
    pub fn serve(&self, ebb: u32, request: Request) -> Option<Answer> {
        // The lock is not held while the service runs (it may register).
        let service = self.services.read().get(&ebb).cloned()?;
        Some(service(request))
    }
}

/// What a message's work on another core sends back: the reply's body or
/// the error reply.
pub type CoreResult = Result<Message, ErrorReply>;

/// A message's work on another core: started there, it gives its result
/// when it ends (at once, unless the service deferred its answer).
pub type CoreWork = Pin<Box<dyn Future<Output = CoreResult>>>;

/// How a node runs a message on another of its cores (the Messenger Ebb
/// implements it with the event layer's cross-core tasks).
pub trait CoreRouter {
    /// How many cores the node has.
    fn cores(&self) -> usize;

    /// Starts `work` on `core` and runs the future it gives there, then
    /// `answer` with its result on the calling core. Whatever `work` holds
    /// (the request's payload) is moved to `core`, not copied.
    fn run_on(
        &self,
        core: CoreId,
        work: Box<dyn FnOnce() -> CoreWork + Send>,
        answer: Box<dyn FnOnce(CoreResult)>,
    );
}

/// Where a message is handled.
pub(crate) enum Route {
    /// On this core.
    Here,
    /// On another core of this node.
    Core(CoreId),
    /// The message named a core the node does not have.
    NoSuchCore(u32),
}

/// This node, as the message layer sees it (on one core).
pub struct LocalNode {
    id: NodeId,
    config: Config,
    services: RefCell<BTreeMap<u32, Rc<dyn Service>>>,
    shared: Arc<SharedServices>,
    /// This core and the way to the others; `None` for a one-core node.
    cores: Option<(CoreId, Rc<dyn CoreRouter>)>,
}

impl LocalNode {
    /// A node of one core (core 0) with no services yet.
    #[must_use]
    pub fn new(id: NodeId, config: Config) -> Rc<Self> {
        Rc::new(LocalNode {
            id,
            config,
            services: RefCell::new(BTreeMap::new()),
            shared: Arc::new(SharedServices::default()),
            cores: None,
        })
    }

    /// Core `core`'s view of a node whose cores share `shared`, reaching
    /// the other cores through `router`.
    #[must_use]
    pub fn on_core(
        id: NodeId,
        config: Config,
        shared: Arc<SharedServices>,
        core: CoreId,
        router: Rc<dyn CoreRouter>,
    ) -> Rc<Self> {
        Rc::new(LocalNode {
            id,
            config,
            services: RefCell::new(BTreeMap::new()),
            shared,
            cores: Some((core, router)),
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

    /// Makes Ebb `ebb` receive the messages sent to it here, on every
    /// core of the node, through the receiving core's representative
    /// (built by `E`'s fault handler on the first message that core
    /// receives for it).
    pub fn register_ebb<E: Ebb>(&self, ebb: EbbRef<E>)
    where
        E::Rep: Service,
    {
        self.shared.register(
            ebb.id(),
            Arc::new(move |request| match ebb.get() {
                Ok(rep) => rep.answer(request),
                Err(_) => Answer::Now(Err(ServiceError::NoRepresentative)),
            }),
        );
    }

    /// The Ebbs every core of this node answers for.
    #[must_use]
    pub fn shared(&self) -> &Arc<SharedServices> {
        &self.shared
    }

    /// Runs Ebb `ebb`'s service on this core: a service registered here,
    /// else one registered for every core; `None` if neither exists.
    #[must_use]
    pub fn serve(&self, ebb: u32, request: Request) -> Option<Answer> {
        let service = self.services.borrow().get(&ebb).cloned();
        match service {
            Some(service) => Some(service.answer(request)),
            None => self.shared.serve(ebb, request),
        }
    }

    /// Where a message naming `core` (or none) is handled.
    pub(crate) fn route(&self, core: Option<u16>) -> Route {
        let Some(core) = core else {
            return Route::Here;
        };
        let (here, cores) = match &self.cores {
            Some((here, router)) => (*here, router.cores()),
            None => (CoreId(0), 1),
        };
        if usize::from(core) >= cores {
            Route::NoSuchCore(u32::from(core))
        } else if usize::from(core) == here.0 {
            Route::Here
        } else {
            Route::Core(CoreId(usize::from(core)))
        }
    }

    /// The way to the node's other cores.
    pub(crate) fn router(&self) -> Option<&Rc<dyn CoreRouter>> {
        self.cores.as_ref().map(|(_, router)| router)
    }
}

/// What an error from a service is on the wire.
pub(crate) fn error_reply(
    destination: u32,
    message: MessageNumber,
    error: ServiceError,
) -> ErrorReply {
    match error {
        ServiceError::UnknownMessage => ErrorReply::UnknownMessage(message.0),
        ServiceError::Refused(code) => ErrorReply::Refused(code),
        ServiceError::NoRepresentative => ErrorReply::NoRepresentative(destination),
    }
}

/// Runs Ebb `destination`'s shared service on the calling core (the work
/// of a message handed to a named core).
pub(crate) fn serve_shared(
    shared: &SharedServices,
    destination: u32,
    request: Request,
) -> CoreWork {
    let message = request.message;
    let to_reply = move |error| error_reply(destination, message, error);
    match shared.serve(destination, request) {
        None => Box::pin(core::future::ready(Err(ErrorReply::UnknownEbb(
            destination,
        )))),
        Some(Answer::Now(result)) => Box::pin(core::future::ready(result.map_err(to_reply))),
        Some(Answer::Later(reply)) => Box::pin(async move { reply.await.map_err(to_reply) }),
    }
}
