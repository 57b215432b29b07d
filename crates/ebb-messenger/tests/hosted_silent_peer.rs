//! A hosted Messenger on 127.0.0.1 and peers that connect but never say
//! hello: one sends nothing, one sends half a header and stalls. Each is
//! closed (the raw kernel socket reads our hello, then end of stream)
//! once the hello timeout passes, so it holds no connection or buffers
//! for ever, and the Messenger still serves a proper peer afterwards.

mod echo_support;
mod hosted_support;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use ebb_core::{EbbId, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{acceptor, create_messenger, MessengerSettings, HEADER_LEN};
use ebb_net::TcpConnection;
use echo_support::{Echo, ECHO};
use hosted_support::node_config;

/// The server's hello timeout: short, so that the test is.
const HELLO_TIMEOUT: Duration = Duration::from_millis(300);

/// How long a raw socket waits for the server to close it: far longer
/// than the hello timeout, so only a server that never closes fails.
const CLOSE_WITHIN: Duration = Duration::from_secs(10);

fn echo_id() -> EbbId {
    EbbId::new(40_320).unwrap()
}

/// What a raw socket read before the server closed it, or the error that
/// ended the wait (a read timeout: the server never closed it).
fn read_until_closed(mut socket: TcpStream) -> Result<usize, ErrorKind> {
    socket.set_read_timeout(Some(CLOSE_WITHIN)).unwrap();
    let mut received = Vec::new();
    match socket.read_to_end(&mut received) {
        Ok(_) => Ok(received.len()),
        Err(error) => Err(error.kind()),
    }
}

#[test]
fn a_peer_that_never_says_hello_is_closed_and_a_proper_peer_is_served_after() {
    let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
    let (stop_tx, stop_rx) = ebb_event::oneshot::<()>();
    let server = thread::spawn(move || {
        ebb_hosted::run_task(node_config(), move || async move {
            let messenger = create_messenger(MessengerSettings {
                hello_timeout: HELLO_TIMEOUT,
                ..MessengerSettings::new(NodeId(2))
            })
            .unwrap();
            let rep = messenger.get().unwrap();
            rep.local().register(echo_id(), Rc::new(Echo::default()));
            let accept = acceptor(messenger);
            let addr = ebb_net::listen(
                "127.0.0.1:0".parse().unwrap(),
                Arc::new(move |conn: &TcpConnection| accept(conn)),
            )
            .unwrap();
            addr_tx.send(addr).unwrap();
            let _ = stop_rx.await;
        })
        .unwrap();
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server node listens");

    // Both raw peers connect at once; neither says hello.
    let silent = TcpStream::connect(addr).unwrap();
    let mut stalled = TcpStream::connect(addr).unwrap();
    stalled.write_all(&b"EBBM\x01\x00\x02\x00"[..]).unwrap();
    let silent = thread::spawn(move || read_until_closed(silent));
    let stalled = thread::spawn(move || read_until_closed(stalled));
    let hello_len = HEADER_LEN + 8;
    assert_eq!(
        silent.join().unwrap(),
        Ok(hello_len),
        "the silent peer got the server's hello, then end of stream"
    );
    assert_eq!(
        stalled.join().unwrap(),
        Ok(hello_len),
        "the peer that stalled mid-header got the hello, then end of stream"
    );

    // A proper peer: node 1's Messenger calls the echo Ebb.
    let (result_tx, result_rx) = mpsc::channel();
    thread::spawn(move || {
        let result = ebb_hosted::run_task(node_config(), move || async move {
            let messenger = create_messenger(MessengerSettings::new(NodeId(1))).unwrap();
            let rep = messenger.get().unwrap();
            rep.directory().insert(NodeId(2), addr);
            let body = IoChain::from(IoBuf::copy_from_slice(b"after the silent ones"));
            let reply = rep.call(NodeId(2), echo_id(), ECHO, body).await;
            stop_tx.send(());
            reply.map(|reply| reply.payload.to_vec())
        });
        let _ = result_tx.send(result);
    });
    let reply = result_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("node 1 finished its call within 60 s")
        .unwrap();
    assert_eq!(reply.as_deref(), Ok(&b"after the silent ones"[..]));
    server.join().unwrap();
}
