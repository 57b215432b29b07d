//! A node's client connection is shared by its TCP handler and the task
//! that forwards a request (`connection.rs`, `ClusterConnection`). The
//! task holds the connection while it sends the reply and resumes
//! receiving, and a network stack may run the connection's callbacks
//! from inside those very calls: ours does (`ebb-netstack` delivers what
//! waited, such as the client's end of stream, before `resume_receive`
//! returns), kernel sockets do not. A callback that finds the connection
//! held is kept here, in arrival order, and applied as soon as the
//! connection is free: by the task when it lets go, or by the next
//! callback.

use alloc::collections::VecDeque;
use core::cell::RefCell;

use ebb_iobuf::IoChain;
use ebb_net::{NetError, TcpConnection, TcpHandler};

/// A callback not yet applied.
pub enum Callback {
    /// `on_data`.
    Data(IoChain),
    /// `on_send_credit`.
    SendCredit,
    /// `on_closed`.
    Closed,
    /// `on_aborted`.
    Aborted(NetError),
}

impl Callback {
    /// Applies it to `handler`.
    pub fn apply(self, handler: &mut impl TcpHandler, conn: &TcpConnection) {
        match self {
            Callback::Data(data) => handler.on_data(conn, data),
            Callback::SendCredit => handler.on_send_credit(conn),
            Callback::Closed => handler.on_closed(conn),
            Callback::Aborted(error) => handler.on_aborted(conn, error),
        }
    }
}

/// The callbacks waiting for the connection, oldest first.
#[derive(Default)]
pub struct Deferred(RefCell<VecDeque<Callback>>);

impl Deferred {
    /// Keeps `callback` until [`Deferred::apply_to`] runs.
    pub fn push(&self, callback: Callback) {
        self.0.borrow_mut().push_back(callback);
    }

    /// Applies the waiting callbacks in order to the handler in `cell`,
    /// as long as it is free (callbacks that arrive meanwhile, from
    /// inside those applied, are applied too); whether none is left.
    pub fn apply_to<H: TcpHandler>(&self, cell: &RefCell<H>, conn: &TcpConnection) -> bool {
        loop {
            let Ok(mut handler) = cell.try_borrow_mut() else {
                return false;
            };
            // The queue's own borrow ends before the callback runs.
            let Some(callback) = self.0.borrow_mut().pop_front() else {
                return true;
            };
            callback.apply(&mut *handler, conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use alloc::rc::Rc;
    use alloc::string::String;
    use alloc::vec::Vec;
    use core::net::SocketAddr;

    use ebb_core::CoreId;
    use ebb_net::{SendError, TcpOps};

    use super::*;

    /// A handler that records its callbacks and resumes receiving on
    /// data, as memcached's connection does after a forwarded reply.
    #[derive(Default)]
    struct Recorder(Vec<String>);

    impl TcpHandler for Recorder {
        fn on_data(&mut self, conn: &TcpConnection, data: IoChain) {
            self.0.push(alloc::format!("data {}", data.len()));
            conn.resume_receive();
        }
        fn on_send_credit(&mut self, _conn: &TcpConnection) {
            self.0.push("credit".into());
        }
        fn on_closed(&mut self, _conn: &TcpConnection) {
            self.0.push("closed".into());
        }
        fn on_aborted(&mut self, _conn: &TcpConnection, error: NetError) {
            self.0.push(alloc::format!("aborted {error:?}"));
        }
    }

    /// The connection the handler shares and what waits for it.
    struct Shared {
        handler: RefCell<Recorder>,
        deferred: Deferred,
    }

    /// A stack that, as ours, delivers the peer's end of stream from
    /// inside `resume_receive`, to the handler through `deliver`.
    struct Stack(RefCell<Option<(Rc<Shared>, TcpConnection)>>);

    impl Stack {
        fn deliver(&self, callback: Callback) {
            let (shared, conn) = self.0.borrow().clone().expect("wired");
            shared.deferred.push(callback);
            shared.deferred.apply_to(&shared.handler, &conn);
        }
    }

    impl TcpOps for Stack {
        fn send(&self, _data: IoChain) -> Result<(), SendError> {
            Ok(())
        }
        fn send_or_buffer(&self, _data: IoChain) -> Result<(), SendError> {
            Ok(())
        }
        fn send_credit(&self) -> usize {
            0
        }
        fn pause_receive(&self) {}
        fn resume_receive(&self) {
            self.deliver(Callback::Closed);
        }
        fn close(&self) {}
        fn abort(&self) {}
        fn peer_addr(&self) -> SocketAddr {
            SocketAddr::from(([10, 96, 0, 1], 40000))
        }
        fn local_addr(&self) -> SocketAddr {
            SocketAddr::from(([10, 96, 0, 2], 11211))
        }
        fn core(&self) -> CoreId {
            CoreId(0)
        }
        fn id(&self) -> u64 {
            1
        }
    }

    fn wired() -> (Rc<Shared>, Rc<Stack>, TcpConnection) {
        let shared = Rc::new(Shared {
            handler: RefCell::new(Recorder::default()),
            deferred: Deferred::default(),
        });
        let stack = Rc::new(Stack(RefCell::new(None)));
        let conn = TcpConnection::new(Rc::clone(&stack) as Rc<dyn TcpOps>);
        *stack.0.borrow_mut() = Some((Rc::clone(&shared), conn.clone()));
        (shared, stack, conn)
    }

    #[test]
    fn a_callback_from_inside_an_applied_one_waits_for_it_and_follows_it() {
        let (shared, stack, _conn) = wired();
        // `on_data` resumes receiving; the stack delivers the end of
        // stream from inside that call, while the handler is held.
        stack.deliver(Callback::Data(IoChain::new()));
        assert_eq!(shared.handler.borrow().0, ["data 0", "closed"]);
        *stack.0.borrow_mut() = None;
    }

    #[test]
    fn callbacks_for_a_held_connection_are_applied_in_order_once_it_is_free() {
        let (shared, stack, conn) = wired();
        let held = shared.handler.borrow_mut();
        stack.deliver(Callback::SendCredit);
        stack.deliver(Callback::Aborted(NetError::ConnectionRefused));
        drop(held);
        assert!(shared.handler.borrow().0.is_empty(), "nothing while held");
        assert!(shared.deferred.apply_to(&shared.handler, &conn));
        assert_eq!(
            shared.handler.borrow().0,
            ["credit", "aborted ConnectionRefused"]
        );
        *stack.0.borrow_mut() = None;
    }
}
