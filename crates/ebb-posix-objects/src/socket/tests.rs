//! The socket's state machine against a connection that records what
//! the socket asks of it.

use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use ebb_core::CoreId;
use ebb_net::{SendError, TcpOps};

use super::*;

#[derive(Default)]
struct Recorded {
    sent: RefCell<Vec<u8>>,
    credit: Cell<usize>,
    closed: Cell<bool>,
    aborted: Cell<bool>,
    paused: Cell<bool>,
}

impl TcpOps for Recorded {
    fn send(&self, data: IoChain) -> Result<(), SendError> {
        self.send_or_buffer(data)
    }
    fn send_or_buffer(&self, data: IoChain) -> Result<(), SendError> {
        self.credit
            .set(self.credit.get().saturating_sub(data.len()));
        self.sent.borrow_mut().extend(data.to_vec());
        Ok(())
    }
    fn send_credit(&self) -> usize {
        self.credit.get()
    }
    fn pause_receive(&self) {
        self.paused.set(true);
    }
    fn resume_receive(&self) {
        self.paused.set(false);
    }
    fn close(&self) {
        self.closed.set(true);
    }
    fn abort(&self) {
        self.aborted.set(true);
    }
    fn peer_addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 2), 40_000))
    }
    fn local_addr(&self) -> SocketAddr {
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 2, 15), 6379))
    }
    fn core(&self) -> CoreId {
        CoreId(0)
    }
    fn id(&self) -> u64 {
        1
    }
}

fn connected(credit: usize) -> (Rc<Socket>, Rc<Recorded>, TcpConnection) {
    let ops = Rc::new(Recorded::default());
    ops.credit.set(credit);
    let conn = TcpConnection::new(Rc::clone(&ops) as Rc<dyn TcpOps>);
    let socket = Socket::with_state(State::Connected(Stream::new(conn.clone())));
    (socket, ops, conn)
}

fn chain(bytes: &[u8]) -> IoChain {
    IoChain::from(IoBuf::copy_from_slice(bytes))
}

#[test]
fn received_data_is_read_in_order_then_the_peers_end_reads_zero() {
    let (socket, _, conn) = connected(100);
    let mut buf = [0u8; 4];
    assert_eq!(socket.recv(&mut buf, false), Err(EAGAIN));
    assert_eq!(socket.readiness() & EPOLLIN, 0);
    socket.on_data(&conn, chain(b"hello"));
    assert_eq!(socket.readiness() & EPOLLIN, EPOLLIN);
    assert_eq!(socket.recv(&mut buf, true), Ok(4));
    assert_eq!(socket.recv(&mut buf, false), Ok(4));
    assert_eq!(&buf, b"hell");
    socket.on_peer_closed();
    assert_eq!(socket.recv(&mut buf, false), Ok(1));
    assert_eq!(buf[0], b'o');
    assert_eq!(socket.recv(&mut buf, false), Ok(0));
    assert_ne!(socket.readiness() & EPOLLRDHUP, 0);
}

#[test]
fn sends_take_at_most_the_credit_and_say_eagain_without_it() {
    let (socket, ops, _) = connected(3);
    assert_ne!(socket.readiness() & EPOLLOUT, 0);
    assert_eq!(socket.send(b"hello"), Ok(3));
    assert_eq!(socket.send(b"lo"), Err(EAGAIN));
    assert_eq!(socket.readiness() & EPOLLOUT, 0);
    ops.credit.set(10);
    assert_eq!(socket.send(b"lo"), Ok(2));
    assert_eq!(&*ops.sent.borrow(), b"hello");
    socket.shutdown(SHUT_WR).unwrap();
    assert!(ops.closed.get());
    assert_eq!(socket.send(b"x"), Err(EPIPE));
}

#[test]
fn a_reset_is_reported_once_then_the_stream_is_over() {
    let (socket, _, _) = connected(10);
    socket.on_aborted(&NetError::ConnectionReset);
    assert_ne!(socket.readiness() & EPOLLERR, 0);
    assert_eq!(socket.recv(&mut [0u8; 4], false), Err(ECONNRESET));
    assert_eq!(socket.recv(&mut [0u8; 4], false), Ok(0));
    assert_eq!(socket.send(b"x"), Err(EPIPE));
}

#[test]
fn the_receive_window_closes_above_the_high_mark_and_opens_below_the_low() {
    let (socket, ops, conn) = connected(10);
    socket.on_data(&conn, chain(&alloc::vec![1u8; RECEIVE_HIGH]));
    assert!(ops.paused.get());
    let mut buf = alloc::vec![0u8; RECEIVE_HIGH - RECEIVE_LOW];
    assert_eq!(socket.recv(&mut buf, false), Ok(RECEIVE_HIGH - RECEIVE_LOW));
    assert!(ops.paused.get(), "exactly the low mark left: still paused");
    assert_eq!(socket.recv(&mut [0u8; 1], false), Ok(1));
    assert!(!ops.paused.get());
}

#[test]
fn closing_with_unread_data_resets_and_otherwise_finishes() {
    let (socket, ops, conn) = connected(10);
    socket.on_data(&conn, chain(b"unread"));
    socket.release();
    assert!(ops.aborted.get() && !ops.closed.get());
    let (socket, ops, _) = connected(10);
    socket.release();
    assert!(ops.closed.get() && !ops.aborted.get());
}

#[test]
fn a_listener_queues_up_to_its_backlog_and_accept_takes_in_order() {
    let listener = Socket::with_state(State::Listening(Listener {
        local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 6379),
        backlog: 2,
        queue: VecDeque::new(),
        key: 0,
    }));
    assert_eq!(listener.accept().err(), Some(EAGAIN));
    let (_, _, first) = connected(0);
    let (_, _, second) = connected(0);
    let (_, _, third) = connected(0);
    assert!(listener.enqueue(&first).is_some());
    assert!(listener.enqueue(&second).is_some());
    assert!(listener.enqueue(&third).is_none(), "the backlog is full");
    assert_eq!(listener.readiness(), EPOLLIN);
    let (accepted, peer) = listener.accept().unwrap();
    assert_eq!(peer.port(), 40_000);
    assert_eq!(accepted.peer_addr().unwrap().port(), 40_000);
    assert_eq!(listener.local_addr().port(), 6379);
    assert_eq!(
        listener.option(SOL_SOCKET, SO_ACCEPTCONN).unwrap(),
        1i32.to_ne_bytes()
    );
}

#[test]
fn a_failed_connect_is_read_once_through_so_error() {
    let socket = Socket::new();
    socket.on_aborted(&NetError::ConnectionRefused);
    assert_ne!(socket.readiness() & EPOLLERR, 0);
    assert_eq!(
        socket.option(SOL_SOCKET, SO_ERROR).unwrap(),
        i32::try_from(ECONNREFUSED).unwrap().to_ne_bytes()
    );
    assert_eq!(
        socket.option(SOL_SOCKET, SO_ERROR).unwrap(),
        0i32.to_ne_bytes()
    );
    // Fresh again, as Linux's TCP_CLOSE: it may bind and connect anew.
    assert_eq!(socket.readiness(), EPOLLOUT | EPOLLHUP);
    socket
        .bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 5000))
        .unwrap();
}

#[test]
fn a_failed_connect_met_by_a_call_reports_its_error_there_once() {
    let socket = Socket::new();
    socket.on_aborted(&NetError::ConnectionReset);
    assert_eq!(socket.recv(&mut [0u8; 1], false), Err(ECONNRESET));
    assert_eq!(socket.recv(&mut [0u8; 1], false), Err(ENOTCONN));
    socket.on_aborted(&NetError::ConnectionRefused);
    assert_eq!(
        socket.connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1)),
        Err(ECONNREFUSED)
    );
    assert!(!socket.is_connecting());
}

#[test]
fn shutting_receiving_drops_what_waits_and_reopens_a_closed_window() {
    let (socket, ops, conn) = connected(10);
    socket.on_data(&conn, chain(&alloc::vec![1u8; RECEIVE_HIGH]));
    assert!(ops.paused.get());
    socket.shutdown(SHUT_RD).unwrap();
    assert!(
        !ops.paused.get(),
        "the peer must not stall on a shut window"
    );
    assert_eq!(socket.recv(&mut [0u8; 4], false), Ok(0));
    socket.on_data(&conn, chain(b"more"));
    assert_eq!(socket.recv(&mut [0u8; 4], false), Ok(0));
}

#[test]
fn shut_directions_read_as_linuxs_tcp_poll_says() {
    let (socket, _, _) = connected(10);
    socket.shutdown(SHUT_RD).unwrap();
    let ready = socket.readiness();
    assert_eq!(ready & (EPOLLIN | EPOLLRDHUP), EPOLLIN | EPOLLRDHUP);
    assert_eq!(ready & EPOLLHUP, 0, "sending still open");
    let (socket, _, _) = connected(10);
    socket.shutdown(SHUT_RDWR).unwrap();
    assert_ne!(socket.readiness() & EPOLLHUP, 0);
    let (socket, _, _) = connected(10);
    socket.shutdown(SHUT_WR).unwrap();
    assert_eq!(socket.readiness() & (EPOLLHUP | EPOLLRDHUP), 0);
    socket.on_peer_closed();
    assert_eq!(
        socket.readiness() & (EPOLLHUP | EPOLLRDHUP),
        EPOLLHUP | EPOLLRDHUP
    );
}

#[test]
fn a_closing_listener_resets_the_connections_never_accepted() {
    let listener = Socket::with_state(State::Listening(Listener {
        local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 6379),
        backlog: 4,
        queue: VecDeque::new(),
        key: 0,
    }));
    let (_, accepted_ops, accepted) = connected(0);
    let (_, waiting_ops, waiting) = connected(0);
    listener.enqueue(&accepted).unwrap();
    listener.enqueue(&waiting).unwrap();
    let (taken, _) = listener.accept().unwrap();
    listener.release();
    assert!(waiting_ops.aborted.get() && !waiting_ops.closed.get());
    assert!(!accepted_ops.aborted.get() && !accepted_ops.closed.get());
    taken.release();
    assert!(accepted_ops.closed.get());
}

#[test]
fn calls_out_of_order_answer_as_linux_does() {
    let socket = Socket::new();
    assert_eq!(socket.recv(&mut [0u8; 1], false), Err(ENOTCONN));
    assert_eq!(socket.send(b"x"), Err(EPIPE));
    assert_eq!(socket.shutdown(SHUT_RDWR), Err(ENOTCONN));
    assert_eq!(socket.peer_addr(), Err(ENOTCONN));
    assert_eq!(socket.accept().err(), Some(EINVAL));
    socket
        .bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80))
        .unwrap();
    assert_eq!(
        socket.bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 81)),
        Err(EINVAL)
    );
    assert_eq!(socket.local_addr().port(), 80);
    assert_eq!(
        socket.set_option(SOL_SOCKET, SO_TYPE, &[0; 4]),
        Err(ENOPROTOOPT)
    );
    let (connected, _, _) = connected(1);
    assert_eq!(connected.shutdown(7), Err(EINVAL));
}

#[test]
fn data_after_the_last_close_resets_the_connection() {
    use ebb_net::TcpHandler;
    let (socket, ops, conn) = connected(10);
    let mut events = events::Events {
        socket: Rc::downgrade(&socket),
    };
    socket.release();
    assert!(ops.closed.get() && !ops.aborted.get(), "closed with a FIN");
    // Still held (an epoll entry being dropped, say): reset all the same.
    events.on_data(&conn, chain(b"more"));
    assert!(ops.aborted.get(), "then reset when data still comes");
    let (socket, ops, conn) = connected(10);
    let mut events = events::Events {
        socket: Rc::downgrade(&socket),
    };
    socket.release();
    drop(socket);
    events.on_data(&conn, chain(b"more"));
    assert!(ops.aborted.get(), "and once it is gone");
}
