//! The Messenger Ebb (DESIGN §5): send a message to the representative of
//! Ebb `E` on node `N`, with one representative per core.
//!
//! The root, shared by the node's cores, holds the node's id, its
//! settings, the [`NodeDirectory`] (node id to address) and the Ebbs every
//! core answers for. Each core's representative holds the connections that
//! core opened or accepted, one [`Peer`] per node, and opens a connection
//! on the first call to a node when no core has one yet, with
//! [`ebb_net::connect`] (kernel sockets hosted, our stack on userstack and
//! native). Calls made while it opens wait for the peer's hello. The first
//! core that needs a connection to a node (by calling it, or by accepting
//! the node's connection) owns it: other cores' calls to that node are
//! made on the owning core (an `ebb_event` cross-core task; the body moves
//! there and the reply back), so a node holds one connection per peer
//! node, not one per core. A connection the node opened to another core
//! only serves the node's calls there.
//!
//! **Failures are values.** A node missing from the directory, a refused
//! connect, a connection that ends before the peer's hello, and a hello
//! that does not come within [`MessengerSettings::hello_timeout`] (an
//! event-layer timer) each complete the call with
//! [`MessengerError::Unreachable`], naming the reason. A connection we
//! accepted whose peer says no hello within the same timeout is closed.
//!
//! **One connection per pair of nodes.** A core uses the connection it
//! has to a node, whichever side opened it. When both nodes dial at once
//! there are two; each side keeps the one dialed by the node with the
//! smaller id, so both pick the same one without another message. The
//! other takes no new calls; the node that dialed it closes it once its
//! calls on it have their replies (the other side, which never puts a
//! call on it, must not close it under those calls). A node that dials
//! us while its earlier connection is still open here has started again
//! under the same id: the earlier one is aborted.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::sync::Arc;
use core::cell::{Cell, RefCell};
use core::future::Future;
use core::net::SocketAddr;
use core::time::Duration;

use ebb_core::{
    CoreId, Ebb, EbbError, EbbId, EbbRef, Multicore, MulticoreEbb, MulticoreRoot, NodeId,
};
use ebb_iobuf::IoChain;
use ebb_net::{AcceptFn, NetError, TcpConnection, TcpHandler};
use spin::{Mutex, Once};

use crate::announce::FRONTEND_NODE;
use crate::frontend::look_up;
use crate::loss::{serve_notices, LostNotice, NODE_EBB, NODE_LOST};
use crate::node::{CoreResult, CoreWork};
use crate::{
    Call, Config, CoreRouter, ErrorReply, LocalNode, Message, MessageNumber, MessengerError,
    NodeDirectory, Peer, PeerState, Service, SharedServices, Unreachable,
};

/// Opens a connection: [`ebb_net::connect`] unless a test gives another
/// (several simulated nodes share one thread, each with its own stack).
pub type Dialer = Rc<dyn Fn(SocketAddr, Box<dyn TcpHandler>) -> Result<TcpConnection, NetError>>;

/// What a node's Messenger is made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessengerSettings {
    /// This node's id.
    pub node: NodeId,
    /// The message layer's limits and queue bound.
    pub config: Config,
    /// How long a new connection may take to bring the peer's hello:
    /// on one we dialed, its calls then fail with
    /// [`Unreachable::NoHello`]; one we accepted is then closed, so that
    /// a peer that connects and says nothing (or half a header) holds no
    /// connection or buffers for ever.
    pub hello_timeout: Duration,
}

impl MessengerSettings {
    /// Default settings for node `node` (a hello within 5 s).
    #[must_use]
    pub fn new(node: NodeId) -> Self {
        MessengerSettings {
            node,
            config: Config::default(),
            hello_timeout: Duration::from_secs(5),
        }
    }
}

/// The Messenger's root, shared by the node's cores.
pub struct MessengerRoot {
    settings: MessengerSettings,
    directory: NodeDirectory,
    shared: Arc<SharedServices>,
    /// The core that holds (or opens) this node's connection to each
    /// node: the first core that needed one. Other cores' calls go there.
    owners: Mutex<BTreeMap<NodeId, CoreId>>,
    /// This Messenger's handle, for calls forwarded to the owning core.
    this: Once<MessengerRef>,
}

/// The Messenger Ebb type: one [`MessengerRep`] per core.
pub type Messenger = Multicore<MessengerRep>;

/// A handle of a node's Messenger.
pub type MessengerRef = EbbRef<Messenger>;

/// Creates the calling core's node's Messenger.
///
/// # Errors
///
/// The calling thread is not a core, or the node is out of local ids.
pub fn create_messenger(settings: MessengerSettings) -> Result<MessengerRef, EbbError> {
    let messenger = Messenger::create(MessengerRoot {
        settings,
        directory: NodeDirectory::new(),
        shared: Arc::new(SharedServices::default()),
        owners: Mutex::new(BTreeMap::new()),
        this: Once::new(),
    })?;
    let root = Messenger::root(messenger)?.shared();
    root.this.call_once(|| messenger);
    serve_notices(&root.shared, messenger);
    Ok(messenger)
}

/// A connection this core uses for a node.
struct Connection {
    peer: Rc<Peer>,
    /// Whether this node dialed it (else the peer did and we accepted).
    dialed: bool,
}

/// One core's Messenger: the connections this core holds.
pub struct MessengerRep {
    root: &'static MulticoreRoot<MessengerRep>,
    core: CoreId,
    local: Rc<LocalNode>,
    peers: RefCell<BTreeMap<NodeId, Connection>>,
    dialer: RefCell<Option<Dialer>>,
    dials: Cell<u64>,
}

impl MulticoreEbb for MessengerRep {
    type Root = MessengerRoot;

    fn create_rep(root: &'static MulticoreRoot<Self>, core: CoreId) -> Result<Self, EbbError> {
        let shared = root.shared();
        let local = LocalNode::on_core(
            shared.settings.node,
            shared.settings.config,
            Arc::clone(&shared.shared),
            core,
            Rc::new(EventRouter),
        );
        Ok(MessengerRep {
            root,
            core,
            local,
            peers: RefCell::new(BTreeMap::new()),
            dialer: RefCell::new(None),
            dials: Cell::new(0),
        })
    }
}

impl MessengerRep {
    /// This node's id.
    #[must_use]
    pub fn node(&self) -> NodeId {
        self.root.shared().settings.node
    }

    /// The node directory (shared by every core).
    #[must_use]
    pub fn directory(&self) -> &NodeDirectory {
        &self.root.shared().directory
    }

    /// This core's view of the node (its own services, limits).
    #[must_use]
    pub fn local(&self) -> &Rc<LocalNode> {
        &self.local
    }

    /// Makes Ebb `ebb` receive messages on every core of this node, each
    /// through that core's representative.
    pub fn register_ebb<E: Ebb>(&self, ebb: EbbRef<E>)
    where
        E::Rep: Service,
    {
        self.local.register_ebb(ebb);
    }

    /// Opens this core's connections with `dialer` instead of
    /// [`ebb_net::connect`].
    pub fn dial_with(&self, dialer: Dialer) {
        *self.dialer.borrow_mut() = Some(dialer);
    }

    /// Connections this core has opened so far.
    #[must_use]
    pub fn dials(&self) -> u64 {
        self.dials.get()
    }

    /// The connection this core uses for `node`, if any.
    #[must_use]
    pub fn peer(&self, node: NodeId) -> Option<Rc<Peer>> {
        self.peers.borrow().get(&node).map(|c| Rc::clone(&c.peer))
    }

    /// Calls message `number` of Ebb `ebb` on node `node` with `payload`,
    /// handled on the core of the node's end of the connection.
    pub fn call(
        &'static self,
        node: NodeId,
        ebb: EbbId,
        number: MessageNumber,
        payload: IoChain,
    ) -> Call {
        self.call_with(node, None, ebb, number, Message::payload(payload))
    }

    /// As [`MessengerRep::call`], handled on the node's core `core`.
    pub fn call_on(
        &'static self,
        node: NodeId,
        core: CoreId,
        ebb: EbbId,
        number: MessageNumber,
        payload: IoChain,
    ) -> Call {
        self.call_with(node, Some(core), ebb, number, Message::payload(payload))
    }

    /// A call with a control part as well, on the connection's core
    /// (`core` `None`) or a named one.
    pub fn call_with(
        &'static self,
        node: NodeId,
        core: Option<CoreId>,
        ebb: EbbId,
        number: MessageNumber,
        body: Message,
    ) -> Call {
        if self.directory().address(node).is_none()
            && node != FRONTEND_NODE
            && self.node() != FRONTEND_NODE
            && self.directory().address(FRONTEND_NODE).is_some()
        {
            // A node that announced after this one: ask the frontend first.
            return self.look_up_then_call(node, core, ebb, number, body);
        }
        let peer = match self.peer(node) {
            Some(peer) if !matches!(peer.state(), PeerState::Closed(_)) => Ok(peer),
            _ => {
                let owner = self.owner_of(node);
                if owner != self.core {
                    return self.forward(owner, node, core, ebb, number, body);
                }
                self.connection(node)
            }
        };
        match peer {
            Err(error) => Call::failed(error),
            Ok(peer) => match core {
                None => peer.call(ebb, number, body),
                Some(core) => peer.call_on(core, ebb, number, body),
            },
        }
    }

    /// Node `node` is gone (its launcher saw its VM or process end): every
    /// call pending on a connection to it, on every core, completes with
    /// [`MessengerError::NodeLost`], and it leaves the directory, so later
    /// calls fail at once (`Unreachable`) until it announces itself again.
    /// A node killed outright sends no reset: without this, a call already
    /// sent would wait for TCP to give up (many minutes).
    ///
    /// On the frontend (node 0) it also tells every other node in the
    /// directory ([`NODE_LOST`], a call whose reply nobody awaits), so
    /// that their calls pending on `node` fail the same way.
    pub fn lose_node(&self, node: NodeId) {
        self.directory().remove(node);
        self.root.shared().owners.lock().remove(&node);
        let Some(&messenger) = self.root.shared().this.get() else {
            return;
        };
        if self.node() == FRONTEND_NODE {
            if let Ok(rep) = messenger.get() {
                let notice = LostNotice(node);
                for (other, _) in self.directory().nodes() {
                    // The call goes out now; its reply (empty) is not
                    // awaited: a node that cannot be told is itself lost
                    // or about to be.
                    drop(rep.call_with(other, None, NODE_EBB, NODE_LOST, notice.message()));
                }
            }
        }
        for core in 0..ebb_event::core_count() {
            let core = CoreId(core);
            if core == self.core {
                self.drop_connection(node);
                continue;
            }
            // Every core, not only the owner: a core may also hold a
            // connection the node opened to it.
            let _ = ebb_event::spawn_task_on(core, async move {
                if let Ok(rep) = messenger.get() {
                    rep.drop_connection(node);
                }
            });
        }
    }

    /// Ends this core's connection to `node`, failing its pending calls.
    fn drop_connection(&self, node: NodeId) {
        let connection = self.peers.borrow_mut().remove(&node);
        if let Some(connection) = connection {
            connection.peer.give_up(MessengerError::NodeLost { node });
        }
    }

    /// Asks the frontend where `node` is, then makes the call (a task on
    /// this core; the reply comes back through it).
    fn look_up_then_call(
        &self,
        node: NodeId,
        core: Option<CoreId>,
        ebb: EbbId,
        number: MessageNumber,
        body: Message,
    ) -> Call {
        let Some(&messenger) = self.root.shared().this.get() else {
            return Call::failed(MessengerError::ConnectionLost);
        };
        call_in_task(self.core, async move {
            look_up(messenger, node).await?;
            let rep = messenger
                .get()
                .map_err(|_| MessengerError::ConnectionLost)?;
            rep.call_with(node, core, ebb, number, body).await
        })
    }

    /// Makes the call on `owner`, the core holding the connection to
    /// `node` (the body moves there; the reply comes back).
    fn forward(
        &self,
        owner: CoreId,
        node: NodeId,
        core: Option<CoreId>,
        ebb: EbbId,
        number: MessageNumber,
        body: Message,
    ) -> Call {
        let Some(&messenger) = self.root.shared().this.get() else {
            return Call::failed(MessengerError::ConnectionLost);
        };
        let call = move || match messenger.get() {
            Ok(rep) => rep.call_with(node, core, ebb, number, body),
            Err(_) => Call::failed(MessengerError::ConnectionLost),
        };
        call_in_task(owner, async move { call().await })
    }

    /// The handler of a connection a listener accepted; for
    /// [`acceptor`].
    pub fn accept(&'static self, conn: &TcpConnection) -> Box<dyn TcpHandler> {
        let (peer, inner) = Peer::accept(Rc::clone(&self.local), conn);
        // A peer that never says hello (silent, or stalled mid-header)
        // would hold the connection and its receive buffers for ever:
        // closed once the hello timeout passes.
        let waiting = Rc::clone(&peer);
        ebb_event::timer_after(self.root.shared().settings.hello_timeout, move || {
            if waiting.state() == PeerState::Handshaking {
                waiting.close(MessengerError::ConnectionLost);
            }
        });
        Box::new(Tracked {
            rep: self,
            peer,
            inner,
            dialed: None,
            ready: false,
        })
    }

    /// The live connection to `node`, opened now if there is none.
    fn connection(&'static self, node: NodeId) -> Result<Rc<Peer>, MessengerError> {
        if let Some(peer) = self.peer(node) {
            if !matches!(peer.state(), PeerState::Closed(_)) {
                return Ok(peer);
            }
            self.peers.borrow_mut().remove(&node);
        }
        let addr = self
            .directory()
            .address(node)
            .ok_or(MessengerError::Unreachable {
                node,
                reason: Unreachable::NotInDirectory,
            })?;
        let peer = Peer::new(Rc::clone(&self.local));
        peer.expect(node);
        let handler = Box::new(Tracked {
            rep: self,
            peer: Rc::clone(&peer),
            inner: peer.handler(),
            dialed: Some(node),
            ready: false,
        });
        // No borrow is held here: the platform may call the handler at once.
        let dialer = self.dialer.borrow().clone();
        let conn = match dialer {
            Some(dial) => dial(addr, handler),
            None => ebb_net::connect(addr, handler),
        }
        .map_err(|error| MessengerError::Unreachable {
            node,
            reason: Unreachable::Connect(error),
        })?;
        self.dials.set(self.dials.get() + 1);
        // The handler may have ended the peer already (refused at once).
        if let PeerState::Closed(error) = peer.state() {
            return Err(error);
        }
        self.peers.borrow_mut().insert(
            node,
            Connection {
                peer: Rc::clone(&peer),
                dialed: true,
            },
        );
        let timeout = self.root.shared().settings.hello_timeout;
        let waiting = Rc::clone(&peer);
        ebb_event::timer_after(timeout, move || {
            if waiting.state() == PeerState::Handshaking {
                waiting.give_up(MessengerError::Unreachable {
                    node,
                    reason: Unreachable::NoHello {
                        waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                    },
                });
                conn.abort();
            }
        });
        Ok(peer)
    }

    /// The core that owns this node's connection to `node`: this core, if
    /// none did yet.
    fn owner_of(&self, node: NodeId) -> CoreId {
        *self
            .root
            .shared()
            .owners
            .lock()
            .entry(node)
            .or_insert(self.core)
    }

    /// A connection's hello came from `node`: makes it the connection this
    /// core uses for `node`, unless it already has one that wins.
    fn connected(&self, node: NodeId, peer: &Rc<Peer>, dialed: bool) {
        // A connection the peer opened makes this core the owner of the
        // node's connection if no core is yet.
        if self.owner_of(node) != self.core {
            // Another core owns our connection to `node`: this one serves
            // the calls `node` sends on it but carries none of ours (they
            // go to the owner). Were it to carry ours, `node` could close
            // it as the loser of two (it keeps the one the smaller id
            // dialed, deciding on its own side) with our calls in flight.
            return;
        }
        let loser = {
            let mut peers = self.peers.borrow_mut();
            let replace = match peers.get(&node) {
                Some(existing) if Rc::ptr_eq(&existing.peer, peer) => return,
                Some(existing)
                    if !matches!(existing.peer.state(), PeerState::Closed(_))
                        && existing.dialed != dialed =>
                {
                    // Both nodes dialed: keep the one the smaller id dialed.
                    dialed == (self.node() < node)
                }
                // The same side opened both (a restarted peer dialed
                // again): the newer one.
                _ => true,
            };
            let connection = Connection {
                peer: Rc::clone(peer),
                dialed,
            };
            if replace {
                peers.insert(node, connection)
            } else {
                Some(connection)
            }
        };
        // Only the side that dialed the loser closes it (after its calls),
        // unless the peer dialed both: a node dials a node it has a live
        // connection to only if it started again under the same id (its
        // old connection stays open on our side when the old incarnation
        // vanished without a reset), so the older one is stale and is
        // closed now, before anything more it carries is served.
        if let Some(loser) = loser {
            if !matches!(loser.peer.state(), PeerState::Closed(_)) {
                let replaced = !Rc::ptr_eq(&loser.peer, peer);
                if loser.dialed {
                    loser.peer.retire();
                } else if replaced && !dialed {
                    loser.peer.give_up(MessengerError::ConnectionLost);
                }
            }
        }
    }
}

/// A listener's accept function that hands each connection to the
/// accepting core's Messenger representative.
#[must_use]
pub fn acceptor(messenger: MessengerRef) -> AcceptFn {
    Arc::new(move |conn: &TcpConnection| match messenger.get() {
        Ok(rep) => rep.accept(conn),
        Err(_) => Box::new(Refuse),
    })
}

/// Aborts a connection no Messenger representative can take.
struct Refuse;

impl TcpHandler for Refuse {
    fn on_data(&mut self, conn: &TcpConnection, _data: IoChain) {
        conn.abort();
    }
}

/// A connection's handler: the [`Peer`]'s, plus what the Messenger tracks
/// (the peer's hello registers it; a dial that fails before the hello is
/// `Unreachable`).
struct Tracked {
    rep: &'static MessengerRep,
    peer: Rc<Peer>,
    inner: Box<dyn TcpHandler>,
    /// The node dialed, for a connection we opened.
    dialed: Option<NodeId>,
    ready: bool,
}

impl Tracked {
    fn check_ready(&mut self) {
        if self.ready {
            return;
        }
        if let PeerState::Ready { node } = self.peer.state() {
            self.ready = true;
            self.rep.connected(node, &self.peer, self.dialed.is_some());
        }
    }

    /// A dial that ends before the hello: the node is unreachable.
    fn ended_before_hello(&self, reason: Unreachable) {
        if let (Some(node), false) = (self.dialed, self.ready) {
            self.peer
                .give_up(MessengerError::Unreachable { node, reason });
        }
    }
}

impl TcpHandler for Tracked {
    fn on_connected(&mut self, conn: &TcpConnection) {
        self.inner.on_connected(conn);
    }

    fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
        self.inner.on_data(conn, data);
        self.check_ready();
    }

    fn on_send_credit(&mut self, conn: &TcpConnection) {
        self.inner.on_send_credit(conn);
    }

    fn on_closed(&mut self, conn: &TcpConnection) {
        self.ended_before_hello(Unreachable::ClosedBeforeHello);
        self.inner.on_closed(conn);
    }

    fn on_aborted(&mut self, conn: &TcpConnection, error: NetError) {
        self.ended_before_hello(Unreachable::Connect(error.clone()));
        self.inner.on_aborted(conn, error);
    }
}

/// A call whose result `work`, a task on `core`, gives.
fn call_in_task(
    core: CoreId,
    work: impl Future<Output = Result<Message, MessengerError>> + Send + 'static,
) -> Call {
    match ebb_event::spawn_task_on(core, work) {
        Ok(handle) => Call::forwarded(handle),
        Err(_) => Call::failed(MessengerError::ConnectionLost),
    }
}

/// Runs a message's work on another core with the event layer's
/// cross-core tasks ([`ebb_event::spawn_task_on`]); the answer comes back
/// through the task's join handle, awaited on the calling core.
struct EventRouter;

impl CoreRouter for EventRouter {
    fn cores(&self) -> usize {
        ebb_event::core_count()
    }

    fn run_on(
        &self,
        core: CoreId,
        work: Box<dyn FnOnce() -> CoreWork + Send>,
        answer: Box<dyn FnOnce(CoreResult)>,
    ) {
        let missing = ErrorReply::NoSuchCore(u32::try_from(core.0).unwrap_or(u32::MAX));
        // The work's future is made and run on `core` (it need not be
        // `Send`: a deferred reply may hold that core's representatives).
        let (sender, result) = ebb_event::oneshot();
        let started = ebb_event::spawn_on(core, move || {
            let work = work();
            ebb_event::spawn_task(async move { sender.send(work.await) });
        });
        match started {
            Ok(()) => {
                ebb_event::spawn_task(async move {
                    // An error here: the core stopped (its node shuts down).
                    answer(result.await.unwrap_or(Err(missing)));
                });
            }
            Err(_) => answer(Err(missing)),
        }
    }
}
