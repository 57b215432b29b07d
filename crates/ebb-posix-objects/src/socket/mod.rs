//! A TCP socket (tcp(7)) over Ebbflow's network interface (`ebb-net`):
//! fresh, bound, listening (with a queue of accepted connections),
//! connecting, connected (with the received data as views into the
//! receive buffers), or failed.
//!
//! - **Listening.** `listen` asks the stack to listen on this core; each
//!   connection it accepts waits in the socket's queue (at most the
//!   backlog: beyond it the connection is reset) until `accept` takes it.
//!   Closing the listener stops the stack listening: the port is free.
//! - **Receiving.** Data waits as an `IoChain`; above
//!   [`RECEIVE_HIGH`] bytes the socket closes its receive window
//!   (`pause_receive`), and reopens it below [`RECEIVE_LOW`].
//! - **Sending.** A send takes at most the connection's send credit (what
//!   the stack accepts without queueing beyond the windows), so a full
//!   connection says `EAGAIN` and becomes writable when the stack reports
//!   credit again.
//! - **Closing.** The last descriptor's close sends FIN after what was
//!   sent, or RST if received data was never read (as Linux does); data
//!   that still arrives afterwards resets the connection.
//! - **`shutdown(SHUT_RD)`** drops what waits and what arrives later, so
//!   `recv` says 0 at once; Linux TCP still hands over queued and later
//!   data. Nothing here needs that yet.
//!
//! `bind` records the address and `listen` claims it, so a port in use
//! or an address not this machine's is `listen`'s error, not `bind`'s.
//! A connecting socket's local address is the stack's choice (a bound
//! address is not used for `connect`).

pub mod address;
mod events;
mod listeners;
pub mod options;

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::{Rc, Weak};
use alloc::vec::Vec;
use core::cell::RefCell;
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{NetError, TcpConnection};
use ebb_posix::errno::{
    EADDRINUSE, EADDRNOTAVAIL, EAGAIN, EALREADY, ECONNREFUSED, ECONNRESET, EINPROGRESS, EINVAL,
    EISCONN, ENETUNREACH, ENOPROTOOPT, ENOTCONN, EOPNOTSUPP, EPIPE, ETIMEDOUT,
};

use crate::copies;
use crate::notify::{Notifier, Pollable};
use crate::readiness::{EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP};
use events::Events;
use options::{Options, SOL_SOCKET, SO_ACCEPTCONN, SO_ERROR, SO_TYPE};

/// Received bytes held before the receive window closes.
pub const RECEIVE_HIGH: usize = 256 << 10;
/// Received bytes held below which it opens again.
pub const RECEIVE_LOW: usize = 64 << 10;
/// Linux's `somaxconn` default: the largest backlog.
pub const MAX_BACKLOG: usize = 4096;

/// shutdown(2)'s `how`.
pub const SHUT_RD: u32 = 0;
/// No more sending.
pub const SHUT_WR: u32 = 1;
/// Neither.
pub const SHUT_RDWR: u32 = 2;

/// One socket.
pub struct Socket {
    state: RefCell<State>,
    options: RefCell<Options>,
    pub(crate) notifier: Notifier,
    me: Weak<Socket>,
}

enum State {
    Fresh {
        bound: Option<SocketAddrV4>,
    },
    Listening(Listener),
    Connecting(TcpConnection),
    Connected(Stream),
    /// A connect that failed, its error not yet read (SO_ERROR, or the
    /// next call). Once read the socket is fresh again and may connect
    /// anew (Linux's is back in TCP_CLOSE too; it forgets an explicit
    /// `bind` here, which Linux keeps).
    Failed(isize),
    Closed,
}

struct Listener {
    local: SocketAddrV4,
    backlog: usize,
    queue: VecDeque<(Rc<Socket>, SocketAddrV4)>,
    key: u64,
}

struct Stream {
    conn: TcpConnection,
    received: IoChain,
    peer_finished: bool,
    error: Option<isize>,
    read_shut: bool,
    write_shut: bool,
    paused: bool,
    /// The connection is gone (reset): nothing more comes or goes.
    gone: bool,
}

impl Stream {
    fn new(conn: TcpConnection) -> Stream {
        Stream {
            conn,
            received: IoChain::new(),
            peer_finished: false,
            error: None,
            read_shut: false,
            write_shut: false,
            paused: false,
            gone: false,
        }
    }
}

/// A network error as the errno the socket calls give.
#[must_use]
pub fn errno_of(error: &NetError) -> isize {
    match error {
        NetError::AddrInUse => EADDRINUSE,
        NetError::AddrNotAvailable => EADDRNOTAVAIL,
        NetError::ConnectionRefused => ECONNREFUSED,
        NetError::ConnectionReset => ECONNRESET,
        NetError::Closed => EPIPE,
        NetError::NoCredit { .. } => EAGAIN,
        NetError::WrongCore => EINVAL,
        NetError::NotOnCore => ENETUNREACH,
        NetError::Unsupported(_) => EOPNOTSUPP,
        NetError::Os { errno, .. } => isize::try_from(*errno).unwrap_or(EINVAL),
    }
}

fn v4(addr: SocketAddr) -> SocketAddrV4 {
    match addr {
        SocketAddr::V4(addr) => addr,
        SocketAddr::V6(_) => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
    }
}

impl Socket {
    /// A fresh socket.
    #[must_use]
    pub fn new() -> Rc<Socket> {
        Socket::with_state(State::Fresh { bound: None })
    }

    fn with_state(state: State) -> Rc<Socket> {
        Rc::new_cyclic(|me| Socket {
            state: RefCell::new(state),
            options: RefCell::new(Options::default()),
            notifier: Notifier::default(),
            me: me.clone(),
        })
    }

    /// bind(2): records the address `listen` will claim.
    pub fn bind(&self, addr: SocketAddrV4) -> Result<(), isize> {
        match &mut *self.state.borrow_mut() {
            State::Fresh {
                bound: bound @ None,
            } => {
                *bound = Some(addr);
                Ok(())
            }
            _ => Err(EINVAL),
        }
    }

    /// listen(2): listens on the bound address (any address, a port the
    /// stack picks, if unbound), on this core.
    pub fn listen(&self, backlog: i32) -> Result<(), isize> {
        let backlog = usize::try_from(backlog)
            .unwrap_or(0)
            .saturating_add(1)
            .min(MAX_BACKLOG);
        let wanted = match &mut *self.state.borrow_mut() {
            State::Fresh { bound } => bound.unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
            State::Listening(listener) => {
                listener.backlog = backlog;
                return Ok(());
            }
            _ => return Err(EINVAL),
        };
        let me = self.me.upgrade().ok_or(EINVAL)?;
        let here = listeners::here().map_err(|_| ENETUNREACH)?;
        let key = here.add(&me);
        // No borrow held: the stack may call back.
        match ebb_net::listen(SocketAddr::V4(wanted), events::accept_for(key)) {
            Ok(local) => {
                *self.state.borrow_mut() = State::Listening(Listener {
                    local: v4(local),
                    backlog,
                    queue: VecDeque::new(),
                    key,
                });
                Ok(())
            }
            Err(error) => {
                here.remove(key);
                Err(errno_of(&error))
            }
        }
    }

    /// A connection the stack accepted for this listening socket: queued
    /// for `accept`; `None` (refuse it) if the queue is full or the
    /// socket no longer listens.
    pub(crate) fn enqueue(&self, conn: &TcpConnection) -> Option<Rc<Socket>> {
        let accepted = {
            let mut state = self.state.borrow_mut();
            let State::Listening(listener) = &mut *state else {
                return None;
            };
            if listener.queue.len() >= listener.backlog {
                return None;
            }
            let accepted = Socket::with_state(State::Connected(Stream::new(conn.clone())));
            listener
                .queue
                .push_back((Rc::clone(&accepted), v4(conn.peer_addr())));
            accepted
        };
        self.notifier.notify();
        Some(accepted)
    }

    /// accept(2) without blocking: the next connection and its peer;
    /// `EAGAIN` when none waits, `EINVAL` when not listening.
    pub fn accept(&self) -> Result<(Rc<Socket>, SocketAddrV4), isize> {
        match &mut *self.state.borrow_mut() {
            State::Listening(listener) => listener.queue.pop_front().ok_or(EAGAIN),
            _ => Err(EINVAL),
        }
    }

    /// connect(2) without blocking: `Ok` if connected at once,
    /// `EINPROGRESS` while the handshake runs (the caller waits for the
    /// socket to become writable, then reads `SO_ERROR`).
    pub fn connect(&self, addr: SocketAddrV4) -> Result<(), isize> {
        let refused = match &*self.state.borrow() {
            State::Fresh { .. } => None,
            State::Connecting(_) => Some(EALREADY),
            State::Connected(_) => Some(EISCONN),
            State::Listening(_) | State::Closed => Some(EINVAL),
            // The earlier attempt's error, reported now (Linux's
            // `sock_error` in __inet_stream_connect); the next is anew.
            State::Failed(_) => Some(0),
        };
        match refused {
            None => {}
            Some(0) => return Err(self.take_error()),
            Some(errno) => return Err(errno),
        }
        let handler = Box::new(Events {
            socket: self.me.clone(),
        });
        // No borrow held: the stack may call back (a refusal) before it
        // returns.
        let conn = ebb_net::connect(SocketAddr::V4(addr), handler).map_err(|e| errno_of(&e))?;
        let mut state = self.state.borrow_mut();
        match &*state {
            State::Fresh { .. } => {
                *state = State::Connecting(conn);
                Err(EINPROGRESS)
            }
            State::Connected(_) => Ok(()),
            State::Failed(error) => {
                let error = *error;
                *state = State::Fresh { bound: None };
                Err(error)
            }
            _ => Err(EINPROGRESS),
        }
    }

    /// Whether a connect is still under way.
    #[must_use]
    pub fn is_connecting(&self) -> bool {
        matches!(&*self.state.borrow(), State::Connecting(_))
    }

    /// The pending error, cleared (`SO_ERROR`); 0 for none. A failed
    /// connect's socket is fresh again.
    pub fn take_error(&self) -> isize {
        let mut state = self.state.borrow_mut();
        match &mut *state {
            State::Failed(error) => {
                let error = *error;
                *state = State::Fresh { bound: None };
                error
            }
            State::Connected(stream) => stream.error.take().unwrap_or(0),
            _ => 0,
        }
    }

    /// recv(2) without blocking (`peek`: `MSG_PEEK`, the data stays).
    pub fn recv(&self, buf: &mut [u8], peek: bool) -> Result<usize, isize> {
        let (count, resume) = {
            let mut state = self.state.borrow_mut();
            let stream = match &mut *state {
                State::Connected(stream) => stream,
                State::Connecting(_) => return Err(EAGAIN),
                State::Failed(error) => {
                    let error = *error;
                    *state = State::Fresh { bound: None };
                    return Err(error);
                }
                _ => return Err(ENOTCONN),
            };
            if stream.received.is_empty() || stream.read_shut {
                if stream.read_shut || buf.is_empty() {
                    return Ok(0);
                }
                if let Some(error) = stream.error.take() {
                    return Err(error);
                }
                return if stream.peer_finished || stream.gone {
                    Ok(0)
                } else {
                    Err(EAGAIN)
                };
            }
            let count = buf.len().min(stream.received.len());
            if peek {
                let mut cursor = stream.received.cursor();
                cursor.read_into(&mut buf[..count]).map_err(|_| EINVAL)?;
            } else {
                let taken = stream.received.split_to(count).map_err(|_| EINVAL)?;
                taken.copy_to_slice(&mut buf[..count]).map_err(|_| EINVAL)?;
            }
            let resume = stream.paused && stream.received.len() < RECEIVE_LOW;
            if resume {
                stream.paused = false;
            }
            (count, resume.then(|| stream.conn.clone()))
        };
        copies::count_received(count);
        if let Some(conn) = resume {
            conn.resume_receive();
        }
        Ok(count)
    }

    /// send(2) without blocking: at most the send credit; `EAGAIN` when
    /// there is none, `EPIPE` once our side is shut or the connection
    /// gone (SIGPIPE is not delivered), a pending error first.
    pub fn send(&self, bytes: &[u8]) -> Result<usize, isize> {
        let conn = {
            let mut state = self.state.borrow_mut();
            match &mut *state {
                State::Connected(stream) => {
                    if let Some(error) = stream.error.take() {
                        stream.gone = true;
                        return Err(error);
                    }
                    if stream.write_shut || stream.gone {
                        return Err(EPIPE);
                    }
                    stream.conn.clone()
                }
                State::Connecting(_) => return Err(EAGAIN),
                State::Failed(error) => {
                    let error = *error;
                    *state = State::Fresh { bound: None };
                    return Err(error);
                }
                _ => return Err(EPIPE),
            }
        };
        if bytes.is_empty() {
            return Ok(0);
        }
        // The stack is called with no borrow held.
        let credit = conn.send_credit();
        if credit == 0 {
            return Err(EAGAIN);
        }
        let count = bytes.len().min(credit);
        let chain = IoChain::from(IoBuf::copy_from_slice(&bytes[..count]));
        conn.send_or_buffer(chain)
            .map_err(|refused| errno_of(&refused.error))?;
        copies::count_sent(count);
        Ok(count)
    }

    /// shutdown(2).
    pub fn shutdown(&self, how: u32) -> Result<(), isize> {
        if how > SHUT_RDWR {
            return Err(EINVAL);
        }
        let (close, resume) = {
            let mut state = self.state.borrow_mut();
            let State::Connected(stream) = &mut *state else {
                return Err(ENOTCONN);
            };
            let mut resume = false;
            if how != SHUT_WR {
                stream.read_shut = true;
                stream.received = IoChain::new();
                // What arrives from now on is dropped (`on_data`): a window
                // closed for unread data opens again, or the peer would
                // stall on a window nobody will ever open.
                resume = core::mem::take(&mut stream.paused);
            }
            let close = how != SHUT_RD && !stream.write_shut;
            if close {
                stream.write_shut = true;
            }
            (
                close.then(|| stream.conn.clone()),
                resume.then(|| stream.conn.clone()),
            )
        };
        // The stack is called with no borrow held.
        if let Some(conn) = resume {
            conn.resume_receive();
        }
        if let Some(conn) = close {
            conn.close();
        }
        self.notifier.notify();
        Ok(())
    }

    /// getsockname(2).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddrV4 {
        match &*self.state.borrow() {
            State::Fresh { bound: Some(addr) } => *addr,
            State::Listening(listener) => listener.local,
            State::Connecting(conn) => v4(conn.local_addr()),
            State::Connected(stream) => v4(stream.conn.local_addr()),
            _ => SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        }
    }

    /// getpeername(2): `ENOTCONN` unless connected.
    pub fn peer_addr(&self) -> Result<SocketAddrV4, isize> {
        match &*self.state.borrow() {
            State::Connected(stream) => Ok(v4(stream.conn.peer_addr())),
            _ => Err(ENOTCONN),
        }
    }

    /// setsockopt(2).
    pub fn set_option(&self, level: u32, name: u32, value: &[u8]) -> Result<(), isize> {
        if level == SOL_SOCKET && matches!(name, SO_TYPE | SO_ERROR | SO_ACCEPTCONN) {
            // Read-only options: Linux says ENOPROTOOPT.
            return Err(ENOPROTOOPT);
        }
        self.options.borrow_mut().set(level, name, value)
    }

    /// getsockopt(2): the value's bytes (an `int` for most).
    pub fn option(&self, level: u32, name: u32) -> Result<Vec<u8>, isize> {
        if level == SOL_SOCKET {
            let int = |value: i32| Ok(value.to_ne_bytes().to_vec());
            match name {
                SO_TYPE => return int(1),
                SO_ERROR => return int(i32::try_from(self.take_error()).unwrap_or(0)),
                SO_ACCEPTCONN => {
                    return int(i32::from(matches!(
                        &*self.state.borrow(),
                        State::Listening(_)
                    )))
                }
                _ => {}
            }
        }
        self.options.borrow().get(level, name)
    }

    /// The last descriptor closed.
    pub(crate) fn release(&self) {
        let state = core::mem::replace(&mut *self.state.borrow_mut(), State::Closed);
        match state {
            State::Listening(listener) => {
                if let Ok(here) = listeners::here() {
                    here.remove(listener.key);
                }
                // The port is free again (Redis's CONFIG SET bind closes
                // its listeners and listens anew on the same port). A stack
                // that cannot unlisten keeps the port; what arrives there is
                // then reset, the accept callback finding no socket.
                let _ = ebb_net::unlisten(SocketAddr::V4(listener.local));
                // Connections never accepted are reset, as Linux's
                // inet_csk_listen_stop does: nobody will ever answer them.
                for (accepted, _) in listener.queue {
                    accepted.abort();
                }
            }
            State::Connecting(conn) => conn.abort(),
            State::Connected(stream) if stream.gone => {}
            // tcp(7)/RFC 9293 §3.10.4: data received but never read
            // means the peer's request went unanswered: reset.
            State::Connected(stream) if !stream.received.is_empty() => stream.conn.abort(),
            State::Connected(stream) if !stream.write_shut => stream.conn.close(),
            _ => {}
        }
    }

    /// Resets the connection (RST), whatever it holds.
    fn abort(&self) {
        let state = core::mem::replace(&mut *self.state.borrow_mut(), State::Closed);
        match state {
            State::Connected(stream) if !stream.gone => stream.conn.abort(),
            State::Connecting(conn) => conn.abort(),
            _ => {}
        }
    }

    // ----- the network's events (`events.rs`) -----

    fn on_connected(&self, conn: &TcpConnection) {
        {
            let mut state = self.state.borrow_mut();
            if matches!(&*state, State::Fresh { .. } | State::Connecting(_)) {
                *state = State::Connected(Stream::new(conn.clone()));
            }
        }
        self.notifier.notify();
    }

    fn on_data(&self, conn: &TcpConnection, mut data: IoChain) {
        let pause = {
            let mut state = self.state.borrow_mut();
            let stream = match &mut *state {
                State::Connected(stream) => stream,
                State::Closed => {
                    drop(state);
                    // Closed by the program: reset, as `events.rs` does
                    // once the socket is gone.
                    conn.abort();
                    return;
                }
                _ => return,
            };
            if stream.read_shut {
                return;
            }
            stream.received.append(&mut data);
            let pause = !stream.paused && stream.received.len() >= RECEIVE_HIGH;
            stream.paused |= pause;
            pause
        };
        if pause {
            conn.pause_receive();
        }
        self.notifier.notify();
    }

    fn on_peer_closed(&self) {
        if let State::Connected(stream) = &mut *self.state.borrow_mut() {
            stream.peer_finished = true;
        }
        self.notifier.notify();
    }

    fn on_aborted(&self, error: &NetError) {
        let errno = match error {
            NetError::ConnectionRefused => ECONNREFUSED,
            NetError::Os { .. } | NetError::Unsupported(_) => errno_of(error),
            NetError::Closed => ETIMEDOUT,
            _ => ECONNRESET,
        };
        {
            let mut state = self.state.borrow_mut();
            match &mut *state {
                State::Fresh { .. } | State::Connecting(_) => *state = State::Failed(errno),
                State::Connected(stream) => {
                    stream.error = Some(errno);
                    stream.gone = true;
                }
                _ => {}
            }
        }
        self.notifier.notify();
    }
}

impl Pollable for Socket {
    fn readiness(&self) -> u32 {
        let conn = {
            let state = self.state.borrow();
            match &*state {
                State::Fresh { .. } => return EPOLLOUT | EPOLLHUP,
                State::Listening(listener) => {
                    return if listener.queue.is_empty() {
                        0
                    } else {
                        EPOLLIN
                    }
                }
                State::Connecting(_) => return 0,
                State::Failed(_) => return EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP,
                State::Closed => return EPOLLHUP,
                State::Connected(stream) => {
                    // Linux's tcp_poll: receiving is shut by the peer's
                    // FIN or by shutdown(SHUT_RD), and either says
                    // IN|RDHUP; both directions shut, or the connection
                    // gone, says HUP.
                    let receive_shut = stream.peer_finished || stream.read_shut;
                    let mut ready = 0;
                    if !stream.received.is_empty() || receive_shut {
                        ready |= EPOLLIN;
                    }
                    if receive_shut {
                        ready |= EPOLLRDHUP;
                    }
                    if stream.error.is_some() {
                        ready |= EPOLLERR | EPOLLIN | EPOLLOUT;
                    }
                    if stream.gone || (receive_shut && stream.write_shut) {
                        ready |= EPOLLHUP | EPOLLIN;
                    }
                    if stream.gone || stream.write_shut {
                        return ready | EPOLLOUT;
                    }
                    (ready, stream.conn.clone())
                }
            }
        };
        let (ready, conn) = conn;
        // The stack is asked with no borrow held; a credit of 0 asks it
        // to say when there is credit again (`on_send_credit`).
        if conn.send_credit() > 0 {
            ready | EPOLLOUT
        } else {
            ready
        }
    }

    fn notifier(&self) -> &Notifier {
        &self.notifier
    }
}

#[cfg(test)]
mod tests;
