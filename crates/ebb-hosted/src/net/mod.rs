//! Networking on the hosted platform: Linux kernel sockets driven through
//! the core's io_uring (multishot accept and receive, receive buffers from a
//! provided-buffer ring, batched sends). Received data reaches handlers in
//! the very buffers the kernel filled.
//!
//! Each core has its own listening socket per address (`SO_REUSEPORT`: the
//! kernel spreads connections over cores), its connections, and its buffer
//! ring; a connection lives on the core that accepted (or opened) it.

mod buffers;
mod sockaddr;
mod socket;
mod tcp;
mod udp;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::{Rc, Weak};

use ebb_core::CoreId;
use ebb_net::{
    AcceptFn, NetError, NetStack, TcpConnection, TcpHandler, UdpHandler, UdpSocket, NETWORK,
};
use io_uring::{opcode, types};
use rustix::net::SocketType;

use crate::driver::Reactor;
use buffers::BufferRing;
use tcp::TcpConn;
use udp::UdpSock;

/// Receive buffers per core, their size, and how many stay for the kernel.
pub use buffers::{BUFFER_COUNT, BUFFER_SIZE, RESERVED_BUFFERS};

/// How long an accept that ran out of descriptors waits before it tries
/// again (if no connection closes first).
const ACCEPT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// Whether an accept failed for lack of descriptors or socket memory: the
/// errors `accept(2)` returns when retrying at once cannot help.
fn is_out_of_descriptors(result: i32) -> bool {
    [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM].contains(&-result)
}

/// One core's sockets and buffers.
pub(crate) struct NetCore {
    core: CoreId,
    reactor: Weak<Reactor>,
    buffers: RefCell<Option<Rc<BufferRing>>>,
    /// Connections whose receive stopped because every buffer was taken;
    /// re-armed when buffers come back.
    stalled: RefCell<Vec<Weak<TcpConn>>>,
    conns: RefCell<HashMap<u64, Rc<TcpConn>>>,
    listeners: RefCell<Vec<OwnedFd>>,
    /// Accepts stopped for lack of descriptors, to re-arm (see
    /// `back_off_accept`).
    accepts_waiting: RefCell<Vec<(std::os::fd::RawFd, AcceptFn)>>,
    /// Said that accepting stopped, and not accepted since.
    accept_backed_off: Cell<bool>,
    udp: RefCell<Vec<Rc<UdpSock>>>,
    next_id: Cell<u64>,
}

impl NetCore {
    fn reactor(&self) -> Result<Rc<Reactor>, NetError> {
        self.reactor.upgrade().ok_or(NetError::Closed)
    }

    fn buffers(&self) -> Result<Rc<BufferRing>, NetError> {
        if let Some(ring) = self.buffers.borrow().as_ref() {
            return Ok(Rc::clone(ring));
        }
        let reactor = self.reactor()?;
        let ring = Rc::new(BufferRing::new(&reactor, 0).map_err(|error| NetError::Os {
            operation: "registering the receive buffer ring (needs Linux 5.19+)",
            errno: error.raw_os_error().unwrap_or(0),
        })?);
        *self.buffers.borrow_mut() = Some(Rc::clone(&ring));
        Ok(ring)
    }

    fn next_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// Each loop turn: hand dropped buffers back to the kernel, and restart
    /// receives that stopped for lack of them.
    fn recycle(&self) {
        let Some(ring) = self.buffers.borrow().as_ref().map(Rc::clone) else {
            return;
        };
        if ring.recycle() == 0 {
            return;
        }
        let stalled = std::mem::take(&mut *self.stalled.borrow_mut());
        for conn in stalled.iter().filter_map(Weak::upgrade) {
            conn.unstall();
        }
    }

    /// Closes every socket when the core ends (operations were cancelled).
    fn close_all(&self) {
        let conns: Vec<_> = self
            .conns
            .borrow_mut()
            .drain()
            .map(|(_, conn)| conn)
            .collect();
        for conn in conns {
            conn.forget();
        }
        self.listeners.borrow_mut().clear();
        for socket in self.udp.borrow_mut().drain(..) {
            socket.forget();
        }
        if let (Some(ring), Some(reactor)) =
            (self.buffers.borrow_mut().take(), self.reactor.upgrade())
        {
            if reactor.unregister_buffer_ring(ring.group).is_err() {
                // The kernel may still know the ring: never free it.
                std::mem::forget(ring);
            }
        }
    }

    fn arm_accept(
        self: &Rc<Self>,
        listener: std::os::fd::RawFd,
        accept: AcceptFn,
    ) -> Result<(), NetError> {
        let reactor = self.reactor()?;
        let entry = opcode::AcceptMulti::new(types::Fd(listener)).build();
        let net = Rc::clone(self);
        let on_accept = move |result: i32, flags: u32| {
            if result >= 0 {
                net.accept_backed_off.set(false);
                net.adopt(result, &accept);
            } else if result == -libc::ECANCELED || result == -libc::EBADF {
                return false;
            } else if is_out_of_descriptors(result) && !io_uring::cqueue::more(flags) {
                net.back_off_accept(listener, accept.clone());
                return false;
            }
            if !io_uring::cqueue::more(flags) {
                // The kernel ended the multishot accept: start another.
                let _ = net.arm_accept(listener, accept.clone());
                return false;
            }
            true
        };
        // SAFETY: an accept points to no memory of ours.
        unsafe { reactor.submit(entry, Box::new(on_accept)) };
        Ok(())
    }

    /// Out of descriptors (or kernel memory for sockets): accepting again
    /// at once would fail again at once, a spin that burns the core and
    /// starves the connections it serves. As memcached does (it stops
    /// accepting, "Too many open connections", and retries on a timer), we
    /// retry after `ACCEPT_RETRY` or as soon as a connection of this core
    /// closes, whichever comes first, and say so once per episode.
    fn back_off_accept(self: &Rc<Self>, listener: std::os::fd::RawFd, accept: AcceptFn) {
        if !self.accept_backed_off.replace(true) {
            eprintln!(
                "ebbflow: core {} is out of file descriptors: accepting again when a connection closes (retrying every {} ms)",
                self.core,
                ACCEPT_RETRY.as_millis()
            );
        }
        self.accepts_waiting.borrow_mut().push((listener, accept));
        let net = Rc::downgrade(self);
        ebb_event::timer_after(ACCEPT_RETRY, move || {
            if let Some(net) = net.upgrade() {
                net.resume_accepts();
            }
        });
    }

    /// Re-arms the accepts that backed off (a connection closed, or the
    /// retry time passed).
    fn resume_accepts(self: &Rc<Self>) {
        let waiting = std::mem::take(&mut *self.accepts_waiting.borrow_mut());
        for (listener, accept) in waiting {
            let still_listening = self
                .listeners
                .borrow()
                .iter()
                .any(|fd| fd.as_raw_fd() == listener);
            if still_listening {
                let _ = self.arm_accept(listener, accept);
            }
        }
    }

    fn adopt(self: &Rc<Self>, fd: i32, accept: &AcceptFn) {
        match TcpConn::accepted(self, fd) {
            Ok(conn) => {
                let handler = accept(&conn.handle());
                conn.start(handler);
            }
            Err(error) => eprintln!(
                "ebbflow: dropping an accepted connection on core {}: {error}",
                self.core
            ),
        }
    }
}

/// The hosted [`NetStack`]: the representative of the network Ebb.
struct HostedNet(Rc<NetCore>);

impl NetStack for HostedNet {
    fn listen(&self, addr: SocketAddr, accept: AcceptFn) -> Result<SocketAddr, NetError> {
        let fd = socket::socket(&addr, SocketType::STREAM)?;
        socket::set_reuse_addr_and_port(&fd)?;
        socket::bind(&fd, addr)?;
        socket::listen(&fd, 4096)?;
        let bound = socket::local_addr(&fd)?;
        self.0.buffers()?;
        self.0.arm_accept(fd.as_raw_fd(), accept)?;
        self.0.listeners.borrow_mut().push(fd);
        Ok(bound)
    }

    fn connect(
        &self,
        addr: SocketAddr,
        handler: Box<dyn TcpHandler>,
    ) -> Result<TcpConnection, NetError> {
        self.0.buffers()?;
        TcpConn::connect(&self.0, addr, handler)
    }

    fn udp_bind(
        &self,
        addr: SocketAddr,
        handler: Box<dyn UdpHandler>,
    ) -> Result<UdpSocket, NetError> {
        UdpSock::bind(&self.0, addr, handler)
    }
}

/// A [`NetStack`] for cores without io_uring: every call says why it fails.
struct NoNet;

const NO_NET: &str = "networking needs the io_uring backend (Linux 5.19+); this core runs on epoll";

impl NetStack for NoNet {
    fn listen(&self, _: SocketAddr, _: AcceptFn) -> Result<SocketAddr, NetError> {
        Err(NetError::Unsupported(NO_NET))
    }

    fn connect(&self, _: SocketAddr, _: Box<dyn TcpHandler>) -> Result<TcpConnection, NetError> {
        Err(NetError::Unsupported(NO_NET))
    }

    fn udp_bind(&self, _: SocketAddr, _: Box<dyn UdpHandler>) -> Result<UdpSocket, NetError> {
        Err(NetError::Unsupported(NO_NET))
    }
}

/// Installs this core's network stack (from the core's first event):
/// `factory`'s if there is one, else kernel sockets.
pub(crate) fn install(
    core: CoreId,
    reactor: Option<Rc<Reactor>>,
    factory: Option<crate::NetStackFactory>,
) {
    crate::readiness::set_reactor(reactor.as_ref());
    let stack: Box<dyn NetStack> = match (reactor, factory) {
        (_, Some(factory)) => (factory.0)(core),
        (Some(reactor), None) => {
            let net = Rc::new(NetCore {
                core,
                reactor: Rc::downgrade(&reactor),
                buffers: RefCell::new(None),
                stalled: RefCell::new(Vec::new()),
                conns: RefCell::new(HashMap::new()),
                listeners: RefCell::new(Vec::new()),
                accepts_waiting: RefCell::new(Vec::new()),
                accept_backed_off: Cell::new(false),
                udp: RefCell::new(Vec::new()),
                next_id: Cell::new(1),
            });
            let recycling = Rc::clone(&net);
            reactor.set_on_dispatch(Box::new(move || recycling.recycle()));
            let closing = Rc::clone(&net);
            reactor.on_shutdown(Box::new(move || closing.close_all()));
            CURRENT.with(|current| *current.borrow_mut() = Rc::downgrade(&net));
            Box::new(HostedNet(net))
        }
        (None, None) => Box::new(NoNet),
    };
    if let Err(error) = NETWORK.install(Box::leak(Box::new(stack))) {
        panic!("installing the network stack on core {core}: {error}");
    }
}

thread_local! {
    static CURRENT: RefCell<Weak<NetCore>> = const { RefCell::new(Weak::new()) };
}

/// Whether `ptr` points into the calling core's receive buffers (the
/// memory the kernel receives into). For tests that check received data
/// is not copied.
pub fn is_receive_buffer(ptr: *const u8) -> bool {
    CURRENT.with(|current| {
        current
            .borrow()
            .upgrade()
            .and_then(|net| net.buffers.borrow().as_ref().map(|ring| ring.contains(ptr)))
            .unwrap_or(false)
    })
}
