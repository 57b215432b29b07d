//! The application's side: [`TcpConnection`] handles backed by the stack,
//! and the delivery of events to [`TcpHandler`]s, run to completion.
//!
//! A handler is taken out of the table while it runs and the stack is not
//! borrowed meanwhile, so it can send, close or abort at once; events that
//! its calls produce are delivered after it returns, in order, by the same
//! (non-reentrant) loop.

use alloc::boxed::Box;
use alloc::rc::{Rc, Weak};
use core::cell::RefCell;
use core::net::{Ipv4Addr, SocketAddr};

use ebb_core::CoreId;
use ebb_event::Instant;
use ebb_iobuf::IoChain;
use ebb_net::{AcceptFn, NetError, SendError, TcpConnection, TcpHandler, TcpOps};

use super::table::{Event, TcpLayer};

/// What the TCP layer needs from the interface around it.
pub(crate) trait TcpHost: 'static {
    /// The TCP layer.
    fn tcp(&mut self) -> &mut TcpLayer;
    /// The time now: the platform's clock if the interface has one,
    /// else the last poll's (a simulation's) time.
    fn tcp_now(&mut self) -> Instant;
    /// Our IPv4 address, once we have one.
    fn tcp_local_ip(&self) -> Option<Ipv4Addr>;
    /// Sends the segments the TCP layer queued.
    fn flush_tcp(&mut self);
}

/// The stack's side of one connection.
struct ConnOps<H: TcpHost> {
    host: Weak<RefCell<H>>,
    id: u64,
    local: SocketAddr,
    remote: SocketAddr,
    core: CoreId,
}

impl<H: TcpHost> ConnOps<H> {
    /// Runs `f` on the layer, sends what it queued, then delivers events.
    fn with_layer<R>(&self, f: impl FnOnce(&mut TcpLayer, Instant, u64) -> R) -> Option<R> {
        let host = self.host.upgrade()?;
        let result = {
            let mut h = host.try_borrow_mut().ok()?;
            let now = h.tcp_now();
            let result = f(h.tcp(), now, self.id);
            h.flush_tcp();
            result
        };
        drain(&host);
        Some(result)
    }
}

impl<H: TcpHost> TcpOps for ConnOps<H> {
    fn send(&self, data: IoChain) -> Result<(), SendError> {
        let mut data = Some(data);
        self.with_layer(|layer, now, id| {
            layer.send(now, id, data.take().unwrap_or_default(), false)
        })
        .unwrap_or_else(|| {
            Err(SendError {
                error: NetError::Closed,
                data: data.take().unwrap_or_default(),
            })
        })
    }

    fn send_or_buffer(&self, data: IoChain) -> Result<(), SendError> {
        let mut data = Some(data);
        self.with_layer(|layer, now, id| layer.send(now, id, data.take().unwrap_or_default(), true))
            .unwrap_or_else(|| {
                Err(SendError {
                    error: NetError::Closed,
                    data: data.take().unwrap_or_default(),
                })
            })
    }

    fn send_credit(&self) -> usize {
        let Some(host) = self.host.upgrade() else {
            return 0;
        };
        // A host already borrowed means a call from inside the stack's own
        // processing, which never happens (callbacks run after `drain`,
        // with the host released); every operation here then acts as on a
        // closed connection, whose credit is 0.
        let Ok(mut h) = host.try_borrow_mut() else {
            return 0;
        };
        h.tcp().send_credit(self.id)
    }

    fn pause_receive(&self) {
        self.with_layer(|layer, _, id| layer.pause(id));
    }

    fn resume_receive(&self) {
        self.with_layer(|layer, now, id| layer.resume(now, id));
    }

    fn close(&self) {
        self.with_layer(|layer, now, id| layer.close(now, id));
    }

    fn abort(&self) {
        self.with_layer(|layer, now, id| layer.abort(now, id));
    }

    fn peer_addr(&self) -> SocketAddr {
        self.remote
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn core(&self) -> CoreId {
        self.core
    }

    fn id(&self) -> u64 {
        self.id
    }
}

fn handle<H: TcpHost>(
    host: &Rc<RefCell<H>>,
    id: u64,
    local: SocketAddr,
    remote: SocketAddr,
    core: CoreId,
) -> TcpConnection {
    TcpConnection::new(Rc::new(ConnOps {
        host: Rc::downgrade(host),
        id,
        local,
        remote,
        core,
    }))
}

/// Hands queued events to their handlers, in order, until none are left.
pub(crate) fn drain<H: TcpHost>(host: &Rc<RefCell<H>>) {
    {
        let Ok(mut h) = host.try_borrow_mut() else {
            return;
        };
        let layer = h.tcp();
        if layer.draining || layer.events.is_empty() {
            return;
        }
        layer.draining = true;
    }
    loop {
        let next = {
            let mut h = host.borrow_mut();
            let core = h.tcp().config().core;
            let layer = h.tcp();
            let Some(event) = layer.events.pop_front() else {
                layer.draining = false;
                return;
            };
            let id = match &event {
                Event::Connected(id)
                | Event::Accepted { id, .. }
                | Event::Data(id, _)
                | Event::SendCredit(id)
                | Event::PeerClosed(id)
                | Event::Aborted(id, _)
                | Event::Release(id) => *id,
            };
            if let Event::Release(id) = event {
                // Dropped outside the borrow below (a handler's drop may
                // call into its connection).
                Err(layer.apps.remove(&id))
            } else {
                match layer.apps.get_mut(&id) {
                    Some(app) => Ok((event, id, app.local, app.remote, app.handler.take(), core)),
                    None => continue,
                }
            }
        };
        let (event, id, local, remote, handler, core) = match next {
            Ok(next) => next,
            Err(released) => {
                drop(released);
                continue;
            }
        };
        let conn = handle(host, id, local, remote, core);
        let handler = deliver(event, &conn, handler);
        if let Some(handler) = handler {
            if let Some(app) = host.borrow_mut().tcp().apps.get_mut(&id) {
                app.handler = Some(handler);
            }
        }
    }
}

/// Calls the handler for one event; returns the handler to keep.
fn deliver(
    event: Event,
    conn: &TcpConnection,
    handler: Option<Box<dyn TcpHandler>>,
) -> Option<Box<dyn TcpHandler>> {
    if let Event::Accepted { accept, .. } = event {
        return Some(accept(conn));
    }
    let mut handler = handler?;
    match event {
        Event::Connected(_) => handler.on_connected(conn),
        Event::Data(_, data) => handler.on_data(conn, data),
        Event::SendCredit(_) => handler.on_send_credit(conn),
        Event::PeerClosed(_) => handler.on_closed(conn),
        Event::Aborted(_, error) => handler.on_aborted(conn, error),
        Event::Accepted { .. } | Event::Release(_) => {}
    }
    Some(handler)
}

/// `NetStack::listen` on the host's TCP layer.
pub(crate) fn listen<H: TcpHost>(
    host: &Rc<RefCell<H>>,
    addr: SocketAddr,
    accept: AcceptFn,
) -> Result<SocketAddr, NetError> {
    let SocketAddr::V4(addr) = addr else {
        return Err(NetError::Unsupported("IPv6"));
    };
    let mut h = host.borrow_mut();
    let ip = *addr.ip();
    if !ip.is_unspecified() && h.tcp_local_ip() != Some(ip) {
        return Err(NetError::AddrNotAvailable);
    }
    let port = h.tcp().listen(ip, addr.port(), accept)?;
    Ok(SocketAddr::from((ip, port)))
}

/// `NetStack::unlisten` on the host's TCP layer.
pub(crate) fn unlisten<H: TcpHost>(
    host: &Rc<RefCell<H>>,
    addr: SocketAddr,
) -> Result<(), NetError> {
    let SocketAddr::V4(addr) = addr else {
        return Err(NetError::Unsupported("IPv6"));
    };
    host.borrow_mut().tcp().unlisten(addr.port());
    Ok(())
}

/// `NetStack::connect` on the host's TCP layer.
pub(crate) fn connect<H: TcpHost>(
    host: &Rc<RefCell<H>>,
    addr: SocketAddr,
    handler: Box<dyn TcpHandler>,
) -> Result<TcpConnection, NetError> {
    let SocketAddr::V4(remote) = addr else {
        return Err(NetError::Unsupported("IPv6"));
    };
    let (id, local, core) = {
        let mut h = host.borrow_mut();
        let local_ip = h.tcp_local_ip().ok_or(NetError::AddrNotAvailable)?;
        let now = h.tcp_now();
        let core = h.tcp().config().core;
        let (id, local) = h.tcp().connect(now, local_ip, remote, handler)?;
        h.flush_tcp();
        (id, local, core)
    };
    drain(host);
    Ok(handle(host, id, local, addr, core))
}
