//! One TCP connection over a kernel socket.

use std::cell::{Cell, RefCell};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::rc::{Rc, Weak};

use ebb_core::CoreId;
use ebb_iobuf::IoChain;
use ebb_net::{NetError, SendError, TcpConnection, TcpHandler, TcpOps};
use io_uring::{cqueue, opcode, types};
use rustix::net::SocketType;

use super::sockaddr::RawAddr;
use super::{socket, NetCore};
use crate::driver::OpToken;

/// Most segments one `sendmsg` takes (the kernel's `IOV_MAX`).
const MAX_IOVECS: usize = 1024;

/// The least send credit a connection with nothing in flight offers.
const MIN_SEND_BUDGET: usize = 256 * 1024;

/// The `sendmsg` header and iovec array of a connection's one send in
/// flight, kept for the connection's life: allocating them per send cost
/// two allocations per reply, each touching memory gone cold on a lightly
/// loaded core. The kernel may read both until the send completes; only
/// `flush` writes them, and only when no send is in flight.
struct SendSlot {
    header: libc::msghdr,
    iovecs: Vec<libc::iovec>,
}

impl SendSlot {
    fn new() -> Self {
        SendSlot {
            // SAFETY: all-zero is a valid msghdr (no name, no iovecs, no
            // control data).
            header: unsafe { std::mem::zeroed() },
            iovecs: Vec::new(),
        }
    }
}

#[derive(Default)]
struct State {
    connected: bool,
    /// The armed multishot receive, and its generation (a cancelled one
    /// may still complete after a new one was armed).
    receive: Option<(OpToken, u64)>,
    receive_generation: u64,
    paused: bool,
    /// Receive stopped because no buffer was free.
    stalled: bool,
    /// A `sendmsg` is in flight (one at a time keeps bytes in order).
    sending: bool,
    in_flight: usize,
    /// Accepted within credit, waiting for the in-flight send.
    queued: IoChain,
    /// Beyond credit (`send_or_buffer`), sent as credit allows.
    overflow: IoChain,
    /// A send found too little credit: say so when it grows.
    want_credit: bool,
    close_requested: bool,
    write_shut: bool,
    peer_closed: bool,
    /// Gone: the socket is closed and the handler dropped.
    finished: bool,
}

pub(crate) struct TcpConn {
    net: Rc<NetCore>,
    id: u64,
    fd: RefCell<Option<OwnedFd>>,
    raw_fd: RawFd,
    peer: SocketAddr,
    local: Cell<SocketAddr>,
    /// The credit when nothing is in flight: the kernel's send buffer size,
    /// at least `MIN_SEND_BUDGET` (a new socket reports a small buffer that
    /// the kernel grows as the connection speeds up).
    send_buffer: usize,
    me: Weak<TcpConn>,
    handler: RefCell<Option<Box<dyn TcpHandler>>>,
    state: RefCell<State>,
    /// Inside the `Rc`, so its address is stable for the connection's
    /// life, which an in-flight send's completion handler extends.
    send_slot: RefCell<SendSlot>,
}

fn configure(fd: &OwnedFd) -> Result<usize, NetError> {
    socket::set_no_delay(fd)?;
    Ok(socket::send_buffer_size(fd)?.max(MIN_SEND_BUDGET))
}

impl TcpConn {
    fn new(
        net: &Rc<NetCore>,
        fd: OwnedFd,
        peer: SocketAddr,
        local: SocketAddr,
        connected: bool,
    ) -> Result<Rc<Self>, NetError> {
        let send_buffer = configure(&fd)?;
        let raw_fd = fd.as_raw_fd();
        let conn = Rc::new_cyclic(|me| TcpConn {
            net: Rc::clone(net),
            id: net.next_id(),
            fd: RefCell::new(Some(fd)),
            raw_fd,
            peer,
            local: Cell::new(local),
            send_buffer,
            me: me.clone(),
            handler: RefCell::new(None),
            send_slot: RefCell::new(SendSlot::new()),
            state: RefCell::new(State {
                connected,
                ..State::default()
            }),
        });
        net.conns.borrow_mut().insert(conn.id, Rc::clone(&conn));
        Ok(conn)
    }

    /// A connection the kernel accepted (`fd` is ours now).
    pub fn accepted(net: &Rc<NetCore>, fd: RawFd) -> Result<Rc<Self>, NetError> {
        // SAFETY: the accept completion hands us a new fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let peer = socket::peer_addr(&fd)?;
        let local = socket::local_addr(&fd)?;
        TcpConn::new(net, fd, peer, local, true)
    }

    /// Gives the connection its handler and starts receiving.
    pub fn start(self: &Rc<Self>, handler: Box<dyn TcpHandler>) {
        *self.handler.borrow_mut() = Some(handler);
        self.arm_receive();
    }

    /// Opens a connection to `addr`; the handler hears `on_connected` or
    /// `on_aborted`.
    pub fn connect(
        net: &Rc<NetCore>,
        addr: SocketAddr,
        handler: Box<dyn TcpHandler>,
    ) -> Result<TcpConnection, NetError> {
        let fd = socket::socket(&addr, SocketType::STREAM)?;
        let unspecified = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
        let conn = TcpConn::new(net, fd, addr, unspecified, false)?;
        *conn.handler.borrow_mut() = Some(handler);
        let target = Box::new(RawAddr::from(addr));
        let entry =
            opcode::Connect::new(types::Fd(conn.raw_fd), target.as_ptr(), target.len).build();
        let connecting = Rc::clone(&conn);
        let on_connect = move |result: i32, _flags: u32| {
            let _keep_alive = &target;
            connecting.on_connect(result);
            false
        };
        // SAFETY: the address the operation reads lives in the closure,
        // which the reactor keeps until the operation completes.
        unsafe { net.reactor()?.submit(entry, Box::new(on_connect)) };
        Ok(conn.handle())
    }

    fn on_connect(self: &Rc<Self>, result: i32) {
        if result < 0 {
            self.fail(socket::errno_error("connect", -result));
            return;
        }
        if let Some(Ok(local)) = self.fd.borrow().as_ref().map(socket::local_addr) {
            self.local.set(local);
        }
        self.state.borrow_mut().connected = true;
        self.call(|handler, conn| handler.on_connected(conn));
        self.arm_receive();
        self.flush();
    }

    pub fn handle(&self) -> TcpConnection {
        let me: Rc<dyn TcpOps> = self.me.upgrade().expect("a live connection");
        TcpConnection::new(me)
    }

    /// Runs `body` with the handler taken out (so the handler may call
    /// back into the connection), then puts it back unless the connection
    /// finished meanwhile.
    fn call(&self, body: impl FnOnce(&mut dyn TcpHandler, &TcpConnection)) {
        let Some(mut handler) = self.handler.borrow_mut().take() else {
            return;
        };
        let conn = self.handle();
        body(&mut *handler, &conn);
        if !self.state.borrow().finished {
            *self.handler.borrow_mut() = Some(handler);
        }
    }

    fn arm_receive(self: &Rc<Self>) {
        {
            let state = self.state.borrow();
            if state.receive.is_some()
                || state.paused
                || state.stalled
                || state.peer_closed
                || state.finished
                || !state.connected
            {
                return;
            }
        }
        let (Ok(reactor), Ok(buffers)) = (self.net.reactor(), self.net.buffers()) else {
            return;
        };
        let entry = opcode::RecvMulti::new(types::Fd(self.raw_fd), buffers.group).build();
        let conn = Rc::clone(self);
        let generation = {
            let mut state = self.state.borrow_mut();
            state.receive_generation += 1;
            state.receive_generation
        };
        // SAFETY: the receive writes only into ring buffers, which live as
        // long as the ring (see `buffers`).
        let token = unsafe {
            reactor.submit(
                entry,
                Box::new(move |result, flags| conn.on_receive(result, flags, generation)),
            )
        };
        self.state.borrow_mut().receive = Some((token, generation));
    }

    fn on_receive(self: &Rc<Self>, result: i32, flags: u32, generation: u64) -> bool {
        let more = cqueue::more(flags);
        if !more {
            let mut state = self.state.borrow_mut();
            if state
                .receive
                .is_some_and(|(_, current)| current == generation)
            {
                state.receive = None;
            }
        }
        if result > 0 {
            if let (Some(id), Ok(buffers)) = (cqueue::buffer_select(flags), self.net.buffers()) {
                let len = usize::try_from(result).unwrap_or(0);
                let data = IoChain::from(buffers.take(id, len));
                if !self.state.borrow().finished {
                    self.call(|handler, conn| handler.on_data(conn, data));
                }
            }
            if !more {
                self.arm_receive();
            }
            return true;
        }
        if result == 0 {
            let already = std::mem::replace(&mut self.state.borrow_mut().peer_closed, true);
            if !already && !self.state.borrow().finished {
                self.call(|handler, conn| handler.on_closed(conn));
                self.finish_if_done();
            }
            return false;
        }
        match -result {
            libc::ENOBUFS => {
                self.state.borrow_mut().stalled = true;
                self.net.stalled.borrow_mut().push(Rc::downgrade(self));
            }
            libc::ECANCELED => {}
            errno => self.fail(socket::errno_error("recv", errno)),
        }
        false
    }

    /// Buffers came back: receive again.
    pub fn unstall(self: &Rc<Self>) {
        self.state.borrow_mut().stalled = false;
        self.arm_receive();
    }

    fn credit(&self) -> usize {
        let state = self.state.borrow();
        self.send_buffer
            .saturating_sub(state.in_flight + state.queued.len())
    }

    /// Moves what credit allows from `overflow` to `queued`.
    fn refill(&self) {
        let credit = self.credit();
        let mut state = self.state.borrow_mut();
        let take = credit.min(state.overflow.len());
        if take > 0 {
            let mut part = state
                .overflow
                .split_to(take)
                .expect("take <= overflow.len()");
            state.queued.append(&mut part);
        }
    }

    /// Submits what is queued if no send is in flight.
    fn flush(self: &Rc<Self>) {
        let chain = {
            let mut state = self.state.borrow_mut();
            if state.sending || state.queued.is_empty() || !state.connected || state.finished {
                return;
            }
            let mut chain = std::mem::take(&mut state.queued);
            if chain.segment_count() > MAX_IOVECS {
                let first: usize = chain
                    .segments()
                    .take(MAX_IOVECS)
                    .map(|segment| segment.len())
                    .sum();
                let rest = chain.split_off(first).expect("first <= chain.len()");
                state.queued = rest;
            }
            state.sending = true;
            state.in_flight = chain.len();
            chain
        };
        let Ok(reactor) = self.net.reactor() else {
            return;
        };
        let header: *const libc::msghdr = {
            let mut slot = self.send_slot.borrow_mut();
            let slot = &mut *slot;
            slot.iovecs.clear();
            slot.iovecs
                .extend(chain.segments().map(|segment| libc::iovec {
                    iov_base: segment.as_ptr().cast_mut().cast(),
                    iov_len: segment.len(),
                }));
            slot.header.msg_iov = slot.iovecs.as_mut_ptr();
            slot.header.msg_iovlen = crate::sys::iov_count(slot.iovecs.len());
            &slot.header
        };
        let entry = opcode::SendMsg::new(types::Fd(self.raw_fd), header)
            .flags(u32::try_from(libc::MSG_NOSIGNAL).unwrap_or(0))
            .build();
        let conn = Rc::clone(self);
        let mut sent = Some(chain);
        let on_sent = move |result: i32, _flags: u32| {
            if let Some(chain) = sent.take() {
                conn.on_sent(result, chain);
            }
            false
        };
        // The message header and iovec array live in `send_slot` inside
        // this connection's `Rc`, which the completion handler keeps alive,
        // and only `flush` rewrites them, never while `sending`.
        // SAFETY: so they outlive the send; the buffers they point to are
        // immutable views kept alive by `chain` in the handler.
        unsafe { reactor.submit(entry, Box::new(on_sent)) };
    }

    fn on_sent(self: &Rc<Self>, result: i32, mut chain: IoChain) {
        {
            let mut state = self.state.borrow_mut();
            state.sending = false;
            state.in_flight = 0;
        }
        if result < 0 {
            if result != -libc::ECANCELED {
                self.fail(socket::errno_error("sendmsg", -result));
            }
            return;
        }
        let sent = usize::try_from(result).unwrap_or(0).min(chain.len());
        chain.trim_front(sent).expect("sent <= chain.len()");
        {
            let mut state = self.state.borrow_mut();
            if !chain.is_empty() {
                // A short send: the rest goes first.
                chain.append(&mut state.queued);
                state.queued = chain;
            }
        }
        self.refill();
        self.flush();
        let notify = {
            let mut state = self.state.borrow_mut();
            let notify = state.want_credit && state.overflow.is_empty() && !state.finished;
            if notify {
                state.want_credit = false;
            }
            notify
        };
        if notify {
            self.call(|handler, conn| handler.on_send_credit(conn));
        }
        self.shut_write_if_done();
    }

    /// After `close`, once everything is out: FIN.
    fn shut_write_if_done(self: &Rc<Self>) {
        let shut = {
            let mut state = self.state.borrow_mut();
            let done = state.close_requested
                && !state.write_shut
                && !state.sending
                && state.queued.is_empty()
                && state.overflow.is_empty();
            if done {
                state.write_shut = true;
            }
            done
        };
        if shut {
            if let Some(fd) = self.fd.borrow().as_ref() {
                socket::shutdown_write(fd);
            }
            self.finish_if_done();
        }
    }

    fn finish_if_done(self: &Rc<Self>) {
        let done = {
            let state = self.state.borrow();
            state.write_shut && state.peer_closed && !state.finished
        };
        if done {
            self.finish();
        }
    }

    /// The connection failed: tell the handler, then release everything.
    fn fail(self: &Rc<Self>, error: NetError) {
        if self.state.borrow().finished {
            return;
        }
        self.call(|handler, conn| handler.on_aborted(conn, error));
        self.finish();
    }

    /// Releases the socket, the handler and the table entry.
    fn finish(self: &Rc<Self>) {
        let receive = {
            let mut state = self.state.borrow_mut();
            state.finished = true;
            state.queued = IoChain::new();
            state.overflow = IoChain::new();
            state.receive.take()
        };
        if let (Some((token, _)), Ok(reactor)) = (receive, self.net.reactor()) {
            reactor.cancel(token);
        }
        self.fd.borrow_mut().take();
        self.handler.borrow_mut().take();
        self.net.conns.borrow_mut().remove(&self.id);
        // A descriptor is free again: accepts that ran out may go on.
        self.net.resume_accepts();
    }

    /// At core shutdown: drop everything without callbacks.
    pub fn forget(&self) {
        self.state.borrow_mut().finished = true;
        self.fd.borrow_mut().take();
        self.handler.borrow_mut().take();
    }

    fn this(&self) -> Rc<Self> {
        self.me.upgrade().expect("a live connection")
    }
}

impl TcpOps for TcpConn {
    fn send(&self, data: IoChain) -> Result<(), SendError> {
        if self.state.borrow().close_requested || self.state.borrow().finished {
            return Err(SendError {
                error: NetError::Closed,
                data,
            });
        }
        let credit = self.credit();
        if data.len() > credit || !self.state.borrow().overflow.is_empty() {
            self.state.borrow_mut().want_credit = true;
            return Err(SendError {
                error: NetError::NoCredit {
                    credit,
                    offered: data.len(),
                },
                data,
            });
        }
        let mut data = data;
        self.state.borrow_mut().queued.append(&mut data);
        self.this().flush();
        Ok(())
    }

    fn send_or_buffer(&self, mut data: IoChain) -> Result<(), SendError> {
        if self.state.borrow().close_requested || self.state.borrow().finished {
            return Err(SendError {
                error: NetError::Closed,
                data,
            });
        }
        self.state.borrow_mut().overflow.append(&mut data);
        self.refill();
        self.this().flush();
        // What did not fit waits for credit: the handler hears when it is
        // all out (`on_send_credit`), so a handler that paused receiving
        // until then always resumes (issue 15, defect 5).
        let mut state = self.state.borrow_mut();
        if !state.overflow.is_empty() {
            state.want_credit = true;
        }
        Ok(())
    }

    fn send_credit(&self) -> usize {
        let credit = if self.state.borrow().finished || !self.state.borrow().overflow.is_empty() {
            0
        } else {
            self.credit()
        };
        if credit == 0 {
            // The caller found none: tell it when there is some again.
            self.state.borrow_mut().want_credit = true;
        }
        credit
    }

    fn pause_receive(&self) {
        let receive = {
            let mut state = self.state.borrow_mut();
            state.paused = true;
            state.receive.take()
        };
        if let (Some((token, _)), Ok(reactor)) = (receive, self.net.reactor()) {
            reactor.cancel(token);
        }
    }

    fn resume_receive(&self) {
        self.state.borrow_mut().paused = false;
        self.this().arm_receive();
    }

    fn close(&self) {
        self.state.borrow_mut().close_requested = true;
        self.this().shut_write_if_done();
    }

    fn abort(&self) {
        if self.state.borrow().finished {
            return;
        }
        if let Some(fd) = self.fd.borrow().as_ref() {
            socket::set_linger_zero(fd);
        }
        self.this().finish();
    }

    fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    fn local_addr(&self) -> SocketAddr {
        self.local.get()
    }

    fn core(&self) -> CoreId {
        self.net.core
    }

    fn id(&self) -> u64 {
        self.id
    }
}
