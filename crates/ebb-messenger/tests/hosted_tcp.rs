//! Two hosted nodes (two Ebbflow processes' worth of runtime, in one test
//! process) talking through the Messenger over kernel TCP on 127.0.0.1:
//! calls and replies of 1 B to 16 MiB, intact, those up to 1 MiB checked to
//! arrive as views of the kernel-filled receive buffers on both nodes, and
//! an unknown Ebb. A message larger than a core's receive-buffer ring
//! (4 MiB) cannot be views alone: the Messenger keeps a partly received
//! message, and ebb-hosted hands over copies once handlers hold the ring
//! down to its reserve (`RESERVED_BUFFERS`, `LAST_BUFFERS`), so that such a
//! message still arrives.
//!
//! And the same through the Messenger Ebb: node 1 (two cores) connects on
//! its first call, and both its cores' calls share that one connection;
//! node 2 has two cores, and a call naming
//! a core runs on that core, its payload moved there as views of the
//! receive buffers, also when that core answers later; a core node 2
//! does not have gets an error reply.

mod echo_support;
mod hosted_support;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ebb_core::{CoreId, EbbId, EbbRef, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{
    acceptor, create_messenger, Config, LocalNode, Message, MessageNumber, MessengerError,
    MessengerSettings, Peer, PeerState, Request, Service, ServiceError,
};
use ebb_net::TcpConnection;
use echo_support::{Where, SEEN, WHERE, WHERE_LATER};
use hosted_support::node_config;

const ECHO: MessageNumber = MessageNumber(1);

fn echo_id() -> EbbId {
    EbbId::new(40_300).unwrap()
}

/// Received payload segments that were not views of the receive buffers.
fn copied(chain: &IoChain) -> usize {
    chain
        .segments()
        .filter(|s| !ebb_hosted::net::is_receive_buffer(s.as_ptr()))
        .count()
}

/// Echoes message 1; counts payload segments that were copied on receive.
struct Echo {
    copied: Rc<RefCell<usize>>,
}

impl Service for Echo {
    fn handle(&self, request: Request) -> Result<Message, ServiceError> {
        if request.message != ECHO {
            return Err(ServiceError::UnknownMessage);
        }
        if request.body.payload.len() <= IN_PLACE_UP_TO {
            *self.copied.borrow_mut() += copied(&request.body.payload);
        }
        Ok(request.body)
    }
}

thread_local! {
    /// The server node, for the listener's accept function (`Send`).
    static SERVER: RefCell<Option<Rc<LocalNode>>> = const { RefCell::new(None) };
}

/// Messages up to this size are checked to arrive without a copy.
const IN_PLACE_UP_TO: usize = 1 << 20;

fn payload(len: usize) -> IoBuf {
    IoBuf::from_vec((0..len).map(|i| u8::try_from(i % 241).unwrap()).collect())
}

#[test]
fn two_hosted_nodes_call_each_other_over_kernel_tcp() {
    let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
    let (stop_tx, stop_rx) = ebb_event::oneshot::<()>();
    // Node 2 serves the echo Ebb until node 1 is done; it reports how many
    // received segments were copies.
    let server = thread::spawn(move || {
        ebb_hosted::run_task(node_config(), move || async move {
            let copied = Rc::new(RefCell::new(0));
            let node = LocalNode::new(NodeId(2), Config::default());
            node.register(
                echo_id(),
                Rc::new(Echo {
                    copied: copied.clone(),
                }),
            );
            SERVER.with(|s| *s.borrow_mut() = Some(node));
            let addr = ebb_net::listen(
                "127.0.0.1:0".parse().unwrap(),
                Arc::new(|conn: &TcpConnection| {
                    let node = SERVER.with(|s| s.borrow().clone().unwrap());
                    Peer::accept(node, conn).1
                }),
            )
            .unwrap();
            addr_tx.send(addr).unwrap();
            // Ends when node 1 says so, or gives up (its sender dropped).
            let _ = stop_rx.await;
            let copied = *copied.borrow();
            copied
        })
        .unwrap()
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server node listens");
    let (result_tx, result_rx) = mpsc::channel();
    thread::spawn(move || {
        let result = ebb_hosted::run_task(node_config(), move || async move {
            let peer = Peer::new(LocalNode::new(NodeId(1), Config::default()));
            ebb_net::connect(addr, peer.handler()).unwrap();
            let mut replies = Vec::new();
            let mut reply_copies = 0;
            for len in [1, 64, 1460, 100_000, 1 << 20, 4 << 20, 16 << 20] {
                let sent = payload(len);
                let reply = peer
                    .call(
                        echo_id(),
                        ECHO,
                        Message::payload(IoChain::from(sent.clone())),
                    )
                    .await
                    .unwrap();
                if len <= IN_PLACE_UP_TO {
                    reply_copies += copied(&reply.payload);
                }
                replies.push((len, reply.payload == *sent.as_slice()));
            }
            let unknown = peer
                .call(EbbId::new(40_301).unwrap(), ECHO, Message::default())
                .await;
            let state = peer.state();
            stop_tx.send(());
            (replies, reply_copies, unknown, state)
        });
        let _ = result_tx.send(result);
    });
    // Bounded: a hang fails the test instead of hanging the suite.
    let (replies, reply_copies, unknown, state) = result_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("node 1 finished its calls within 60 s")
        .unwrap();
    let server_copies = server.join().unwrap();
    for (len, intact) in replies {
        assert!(intact, "{len} bytes came back intact");
    }
    assert_eq!(state, PeerState::Ready { node: NodeId(2) });
    assert_eq!(
        unknown.unwrap_err(),
        MessengerError::UnknownEbb {
            node: NodeId(2),
            ebb: 40_301
        }
    );
    assert_eq!(server_copies, 0, "requests were views of receive buffers");
    assert_eq!(reply_copies, 0, "replies were views of receive buffers");
}

#[test]
fn two_hosted_nodes_call_through_the_messenger_ebb_on_named_cores() {
    let place = EbbRef::<Where>::bind(EbbId::new(40_310).unwrap()).unwrap();
    let (addr_tx, addr_rx) = mpsc::channel::<SocketAddr>();
    let (stop_tx, stop_rx) = ebb_event::oneshot::<()>();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    // Node 2: two cores, both accepting; the Where Ebb answers on any core.
    let server = thread::spawn(move || {
        ebb_hosted::run_task(
            ebb_hosted::Config {
                cores: Some(2),
                ..node_config()
            },
            move || async move {
                let messenger = create_messenger(MessengerSettings::new(NodeId(2))).unwrap();
                messenger.get().unwrap().register_ebb(place);
                let accept = acceptor(messenger);
                let addr = ebb_net::listen_on_all_cores(
                    "127.0.0.1:0".parse().unwrap(),
                    Arc::new(move |conn: &TcpConnection| {
                        counted.fetch_add(1, Ordering::SeqCst);
                        accept(conn)
                    }),
                )
                .await
                .unwrap();
                addr_tx.send(addr).unwrap();
                let _ = stop_rx.await;
                // Each payload segment a representative saw is checked on
                // every core: it must lie in one core's receive buffers
                // (moved there from the connection's core, not copied).
                let seen: Vec<usize> = SEEN
                    .lock()
                    .unwrap()
                    .iter()
                    .flat_map(|(_, segments)| segments.clone())
                    .collect();
                let mut in_place = 0;
                for core in 0..2 {
                    let seen = seen.clone();
                    in_place += ebb_event::spawn_task_on(CoreId(core), async move {
                        seen.iter()
                            .filter(|&&a| ebb_hosted::net::is_receive_buffer(a as *const u8))
                            .count()
                    })
                    .unwrap()
                    .await
                    .unwrap();
                }
                (seen.len(), in_place)
            },
        )
        .unwrap()
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the server node listens");
    let (result_tx, result_rx) = mpsc::channel();
    // Node 1: two cores; core 1 calls first and so holds the connection,
    // and core 0's calls are made there.
    let client = ebb_hosted::Config {
        cores: Some(2),
        ..node_config()
    };
    thread::spawn(move || {
        let result = ebb_hosted::run_task(client, move || async move {
            let messenger = create_messenger(MessengerSettings::new(NodeId(1))).unwrap();
            let rep = messenger.get().unwrap();
            rep.directory().insert(NodeId(2), addr);
            let from_core_1 = ebb_event::spawn_task_on(CoreId(1), async move {
                let call = messenger.get().unwrap().call(
                    NodeId(2),
                    place.id(),
                    WHERE,
                    IoChain::from(payload(10)),
                );
                let reply = call.await.map(|r| r.payload.len());
                (reply, messenger.get().unwrap().dials())
            })
            .unwrap()
            .await
            .unwrap();
            let mut cores = Vec::new();
            for core in [None, Some(1), Some(0), Some(1)] {
                let body = IoChain::from(payload(100_000));
                let reply = match core {
                    None => rep.call(NodeId(2), place.id(), WHERE, body).await,
                    Some(core) => {
                        rep.call_on(NodeId(2), CoreId(core), place.id(), WHERE, body)
                            .await
                    }
                };
                let reply = reply.map(|r| r.payload.to_vec());
                cores.push((core, reply));
            }
            let missing = rep
                .call_on(NodeId(2), CoreId(5), place.id(), WHERE, IoChain::new())
                .await;
            // A deferred answer on the named core comes back as well.
            let later = rep
                .call_on(
                    NodeId(2),
                    CoreId(1),
                    place.id(),
                    WHERE_LATER,
                    IoChain::new(),
                )
                .await
                .map(|reply| reply.payload.to_vec());
            let dials = rep.dials() + from_core_1.1;
            stop_tx.send(());
            assert_eq!(from_core_1.0, Ok(4), "core 1's call got its reply");
            (cores, missing, later, dials)
        });
        let _ = result_tx.send(result);
    });
    let (cores, missing, later, dials) = result_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("node 1 finished its calls within 60 s")
        .unwrap();
    let (segments, in_place) = server.join().unwrap();
    for (named, reply) in &cores[1..] {
        let core = u32::try_from(named.unwrap()).unwrap();
        assert_eq!(
            reply.as_deref(),
            Ok(&core.to_le_bytes()[..]),
            "core {core} ran the call that named it"
        );
    }
    let on_connection = cores[0].1.as_ref().unwrap();
    assert!(on_connection == &[0, 0, 0, 0] || on_connection == &[1, 0, 0, 0]);
    assert_eq!(
        missing.unwrap_err(),
        MessengerError::NoSuchCore {
            node: NodeId(2),
            core: 5
        }
    );
    assert_eq!(
        later.as_deref(),
        Ok(&1u32.to_le_bytes()[..]),
        "core 1 answered later"
    );
    assert_eq!(dials, 1, "one connection for every call from both cores");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection accepted"
    );
    assert!(
        segments >= 5,
        "the calls' payloads were seen ({segments} segments)"
    );
    assert_eq!(
        in_place, segments,
        "every payload segment is a receive buffer view"
    );
}
