//! The hooks other network stacks use: `Config::net_stack` (a core's
//! `NetStack` made by the caller) and `watch_readable` (a callback when a
//! file has data).

mod common;

use std::cell::Cell;
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::sync::{mpsc, Arc};

use ebb_core::CoreId;
use ebb_hosted::{Backend, Config, NetStackFactory};
use ebb_net::{AcceptFn, NetError, NetStack, TcpConnection, TcpHandler, UdpHandler, UdpSocket};

use common::{on_node, wait_until};

/// A stack that names its core in every refusal.
struct Marked(&'static str);

impl NetStack for Marked {
    fn listen(&self, _: SocketAddr, _: AcceptFn) -> Result<SocketAddr, NetError> {
        Err(NetError::Unsupported(self.0))
    }

    fn connect(&self, _: SocketAddr, _: Box<dyn TcpHandler>) -> Result<TcpConnection, NetError> {
        Err(NetError::Unsupported(self.0))
    }

    fn udp_bind(&self, _: SocketAddr, _: Box<dyn UdpHandler>) -> Result<UdpSocket, NetError> {
        Err(NetError::Unsupported(self.0))
    }
}

#[test]
fn a_net_stack_factory_replaces_kernel_sockets_on_every_core() {
    let mut config = Config {
        cores: Some(2),
        pin: false,
        handle_signals: false,
        ..Config::default()
    };
    config.net_stack = Some(NetStackFactory(Arc::new(|core: CoreId| {
        let mark = if core.0 == 0 { "core 0" } else { "other" };
        Box::new(Marked(mark)) as Box<dyn NetStack>
    })));
    let (sender, receiver) = mpsc::channel();
    let code = ebb_hosted::run(config, move || {
        ebb_event::spawn_task(async move {
            let addr = SocketAddr::from(([127, 0, 0, 1], 0));
            let here = ebb_net::listen(addr, Arc::new(|_: &TcpConnection| unreachable!()));
            let there = ebb_event::spawn_task_on(CoreId(1), async move {
                ebb_net::listen(addr, Arc::new(|_: &TcpConnection| unreachable!())).err()
            })
            .expect("core 1 exists")
            .await
            .expect("the task ran");
            sender.send((here.err(), there)).expect("the test waits");
            ebb_event::shutdown(0).expect("first shutdown");
        });
    })
    .expect("node runs");
    assert_eq!(code, 0);
    let (here, there) = receiver.recv().expect("the task reported");
    assert!(matches!(here, Some(NetError::Unsupported("core 0"))));
    assert!(matches!(there, Some(NetError::Unsupported("other"))));
}

#[test]
fn watch_readable_calls_back_until_dropped() {
    let seen = on_node(1, Backend::IoUring, || async {
        let (mut writer, reader) = UnixStream::pair().expect("socketpair");
        reader.set_nonblocking(true).expect("non-blocking");
        let calls = Rc::new(Cell::new(0));
        let counted = Rc::clone(&calls);
        let reader = Rc::new(reader);
        let drained = Rc::clone(&reader);
        let watch = ebb_hosted::watch_readable(
            reader.as_raw_fd(),
            Box::new(move || {
                let mut buffer = [0u8; 64];
                while std::io::Read::read(&mut &*drained, &mut buffer).is_ok_and(|n| n > 0) {}
                counted.set(counted.get() + 1);
            }),
        )
        .expect("io_uring core");
        writer.write_all(b"one").expect("write");
        assert!(wait_until(|| calls.get() >= 1).await, "no callback");
        let after_first = calls.get();
        writer.write_all(b"two").expect("write");
        assert!(
            wait_until(|| calls.get() > after_first).await,
            "no second callback"
        );
        drop(watch);
        let before = calls.get();
        writer.write_all(b"three").expect("write");
        // Give a wrong callback the chance to run.
        ebb_event::sleep(std::time::Duration::from_millis(50)).await;
        (before, calls.get())
    });
    assert_eq!(seen.0, seen.1, "a dropped watch called back");
}

#[test]
fn watch_readable_is_unsupported_on_epoll() {
    let kind = on_node(1, Backend::Epoll, || async {
        let (_writer, reader) = UnixStream::pair().expect("socketpair");
        ebb_hosted::watch_readable(reader.as_raw_fd(), Box::new(|| {}))
            .err()
            .map(|error| error.kind())
    });
    assert_eq!(kind, Some(std::io::ErrorKind::Unsupported));
}
