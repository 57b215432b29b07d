//! The Messenger Ebb over the simulated link: nodes on their own Ebbflow
//! TCP/IP stacks in one process, on a one-core event loop whose clock
//! moves with the link's (so the hello timeout is an ordinary event-layer
//! timer, in simulated time). Connect on first use with one connection
//! for many calls (and for both directions), `Unreachable` for a node
//! missing from the directory, a refused connect and a node that never
//! says hello, and the header's named core (core 0 runs the handler; a
//! core the node does not have gets an error reply). And the announcement:
//! nodes announce themselves to the frontend once (a duplicate, an
//! unexpected id, an announcement naming another node and one that does
//! not decode are refused, each with its own refusal code),
//! the allocator's hook wakes, a node announcing 0.0.0.0 is recorded at
//! the address the frontend sees, and a late node learns the earlier ones
//! from the frontend's reply and calls them.

mod echo_support;
mod sim_support;

use std::cell::RefCell;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use ebb_core::{CoreId, EbbId, EbbRef, NodeId};
use ebb_event::{spawn_task, yield_now};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{
    announce, Announce, AnnounceError, AnnounceReply, Forgotten, Frontend, Message, MessageNumber,
    MessengerError, NodeEntry, PeerState, Refusal, Unreachable, ANNOUNCE, FRONTEND_EBB,
};
use ebb_net::{NetError, NetStack, TcpConnection, TcpHandler};
use ebb_netstack::sim::Sim;
use echo_support::{Echo, Where, ECHO};
use sim_support::nodes::{
    bytes, ip, ip_of, learn, sim_node, simulate, SimNode, HELLO_TIMEOUT, PORT,
};

/// Nodes 1 and 2, both serving [`Echo`] as Ebb `echo_id`; node 1 knows
/// where node 2 is.
fn echo_pair(sim: &RefCell<Sim>, echo_id: EbbId) -> (SimNode, SimNode) {
    let a = sim_node(sim, 1);
    let b = sim_node(sim, 2);
    for node in [&a, &b] {
        node.rep.local().register(echo_id, Rc::new(Echo::default()));
    }
    learn(&a, &b);
    (a, b)
}

#[test]
fn the_first_call_connects_and_later_calls_in_both_directions_share_the_connection() {
    simulate(|sim| async move {
        let echo_id = EbbId::new(40_400).unwrap();
        let (a, b) = echo_pair(&sim, echo_id);
        // Three calls made before any connection exists queue behind the
        // hello of the one connection the first of them opens.
        let early: Vec<_> = [&b"one"[..], b"two", b"three"]
            .into_iter()
            .map(|text| {
                let call = a.rep.call(
                    NodeId(2),
                    echo_id,
                    ECHO,
                    IoChain::from(IoBuf::copy_from_slice(text)),
                );
                spawn_task(call)
            })
            .collect();
        assert_eq!(
            a.rep.peer(NodeId(2)).unwrap().state(),
            PeerState::Handshaking
        );
        let mut replies = Vec::new();
        for call in early {
            replies.push(call.await.unwrap().unwrap().payload.to_vec());
        }
        assert_eq!(replies, [&b"one"[..], b"two", b"three"]);
        let later = a
            .rep
            .call(NodeId(2), echo_id, ECHO, bytes(b"four"))
            .await
            .unwrap();
        assert_eq!(later.payload, *b"four".as_slice());
        // B calls A over the connection A opened: B has no address for A.
        assert_eq!(b.rep.directory().address(NodeId(1)), None);
        let back = b
            .rep
            .call(NodeId(1), echo_id, ECHO, bytes(b"back"))
            .await
            .unwrap();
        assert_eq!(back.payload, *b"back".as_slice());
        assert_eq!((a.rep.dials(), b.rep.dials()), (1, 0), "one dial in all");
        assert_eq!(
            b.accepted.load(Ordering::SeqCst),
            1,
            "one connection accepted"
        );
        assert_eq!(a.accepted.load(Ordering::SeqCst), 0);
        assert_eq!(
            b.rep.peer(NodeId(1)).unwrap().state(),
            PeerState::Ready { node: NodeId(1) }
        );
    });
}

/// Accepts and reads, never answers: a port that is not a Messenger.
struct Silent;

impl TcpHandler for Silent {
    fn on_data(&mut self, _conn: &TcpConnection, _data: IoChain) {}
}

/// Puts `node` in `a`'s directory at a port of `b` that accepts
/// connections and never says anything.
fn silent_node(a: &SimNode, b: &SimNode, node: NodeId) {
    a.rep
        .directory()
        .insert(node, SocketAddr::from((ip_of(b), SILENT_PORT)));
    // A second node pointed at it finds it listening already.
    let _ = b.side.stack.listen(
        SocketAddr::from((ip_of(b), SILENT_PORT)),
        Arc::new(|_: &TcpConnection| Box::new(Silent) as Box<dyn TcpHandler>),
    );
}

/// Where [`silent_node`] listens.
const SILENT_PORT: u16 = 7200;

#[test]
fn unknown_refused_and_silent_nodes_are_unreachable() {
    simulate(|sim| async move {
        let a = sim_node(&sim, 1);
        let b = sim_node(&sim, 2);
        let echo_id = EbbId::new(40_401).unwrap();
        // Node 3's address has nothing listening; node 4's never says hello.
        a.rep
            .directory()
            .insert(NodeId(3), SocketAddr::from((ip(2), 7999)));
        silent_node(&a, &b, NodeId(4));
        let unreachable = |node: u32, reason: Unreachable| MessengerError::Unreachable {
            node: NodeId(node),
            reason,
        };
        assert_eq!(
            a.rep
                .call(NodeId(9), echo_id, ECHO, bytes(b"x"))
                .await
                .unwrap_err(),
            unreachable(9, Unreachable::NotInDirectory)
        );
        assert_eq!(
            a.rep
                .call(NodeId(3), echo_id, ECHO, bytes(b"x"))
                .await
                .unwrap_err(),
            unreachable(3, Unreachable::Connect(NetError::ConnectionRefused))
        );
        let started = ebb_event::now();
        assert_eq!(
            a.rep
                .call(NodeId(4), echo_id, ECHO, bytes(b"x"))
                .await
                .unwrap_err(),
            unreachable(4, Unreachable::NoHello { waited_ms: 1000 })
        );
        let waited = ebb_event::now().saturating_since(started);
        assert!(
            waited >= HELLO_TIMEOUT && waited < HELLO_TIMEOUT * 2,
            "the silent node was given up on after the hello timeout ({waited:?})"
        );
        // A failed node is dialed afresh on the next call.
        assert_eq!(
            a.rep
                .call(NodeId(3), echo_id, ECHO, bytes(b"x"))
                .await
                .unwrap_err(),
            unreachable(3, Unreachable::Connect(NetError::ConnectionRefused))
        );
        // Node 5's entry points at node 2 (a stale directory): node 2's
        // hello says so, and the call never reaches node 2's Ebbs.
        a.rep
            .directory()
            .insert(NodeId(5), SocketAddr::from((ip(2), PORT)));
        let echo_b = Rc::new(Echo::default());
        b.rep.local().register(echo_id, Rc::clone(&echo_b) as _);
        assert_eq!(
            a.rep
                .call(NodeId(5), echo_id, ECHO, bytes(b"x"))
                .await
                .unwrap_err(),
            unreachable(
                5,
                Unreachable::WrongNode {
                    found: b.rep.node()
                }
            )
        );
        assert!(
            echo_b.views.borrow().is_empty(),
            "node 2 served a call meant for node 5"
        );
        assert_eq!(a.rep.dials(), 4);
    });
}

#[test]
fn a_lost_node_fails_its_pending_calls_at_once_and_leaves_the_directory() {
    simulate(|sim| async move {
        let a = sim_node(&sim, 1);
        let b = sim_node(&sim, 2);
        let echo_id = EbbId::new(40_402).unwrap();
        // Node 3 "is" a listener that never answers, as a node whose VM
        // was killed after accepting: the call waits.
        silent_node(&a, &b, NodeId(3));
        let pending = spawn_task(a.rep.call(NodeId(3), echo_id, ECHO, bytes(b"x")));
        yield_now().await;
        let started = ebb_event::now();
        // The launcher says node 3 is gone.
        a.rep.lose_node(NodeId(3));
        assert_eq!(
            pending.await.unwrap().unwrap_err(),
            MessengerError::NodeLost { node: NodeId(3) }
        );
        assert!(
            ebb_event::now().saturating_since(started) < HELLO_TIMEOUT,
            "the call ended when the node was lost, not at the hello timeout"
        );
        assert_eq!(a.rep.directory().address(NodeId(3)), None);
        assert_eq!(
            a.rep
                .call(NodeId(3), echo_id, ECHO, bytes(b"x"))
                .await
                .unwrap_err(),
            MessengerError::Unreachable {
                node: NodeId(3),
                reason: Unreachable::NotInDirectory
            }
        );
    });
}

#[test]
fn a_named_core_runs_the_handler_and_a_missing_core_gets_an_error_reply() {
    simulate(|sim| async move {
        let a = sim_node(&sim, 1);
        let b = sim_node(&sim, 2);
        let place = EbbRef::<Where>::bind(EbbId::new(40_402).unwrap()).unwrap();
        b.rep.register_ebb(place);
        learn(&a, &b);
        let on_zero = a
            .rep
            .call_on(
                NodeId(2),
                CoreId(0),
                place.id(),
                MessageNumber(1),
                IoChain::new(),
            )
            .await
            .unwrap();
        assert_eq!(on_zero.payload, *0u32.to_le_bytes().as_slice());
        assert_eq!(
            a.rep
                .call_on(
                    NodeId(2),
                    CoreId(3),
                    place.id(),
                    MessageNumber(1),
                    IoChain::new()
                )
                .await
                .unwrap_err(),
            MessengerError::NoSuchCore {
                node: NodeId(2),
                core: 3
            }
        );
    });
}

/// Node `node`'s announcement of itself, listening on [`PORT`].
fn entry(node: u8) -> NodeEntry {
    NodeEntry {
        node: NodeId(u32::from(node)),
        addr: SocketAddrV4::new(ip(node), PORT),
        cores: 1,
    }
}

fn frontend_addr() -> SocketAddr {
    SocketAddr::from((ip(0), PORT))
}

#[test]
fn nodes_announce_themselves_once_and_a_late_node_calls_the_earlier_ones() {
    simulate(|sim| async move {
        let front = sim_node(&sim, 0);
        let registry = Frontend::new(40_000..40_256);
        registry.serve(front.messenger).unwrap();
        let nodes: Vec<SimNode> = (1..=3).map(|id| sim_node(&sim, id)).collect();
        let echo_id = EbbId::new(40_403).unwrap();
        let mut ranges = Vec::new();
        for node in &nodes {
            node.rep.local().register(echo_id, Rc::new(Echo::default()));
            ranges.push(registry.expect(node.rep.node(), 64).unwrap());
        }
        // The allocator's hook: a future that resolves on node 1's
        // announcement (polled here by hand, with a waker that counts).
        let wakes = Arc::new(CountingWaker::default());
        let waker = Waker::from(Arc::clone(&wakes));
        let mut first = Box::pin(registry.when_announced(NodeId(1)));
        assert!(first
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        assert_eq!(registry.announced(NodeId(1)), None);

        let welcome = announce(nodes[0].rep, frontend_addr(), entry(1))
            .await
            .unwrap();
        assert_eq!(welcome.ebb_ids, ranges[0]);
        assert_eq!(welcome.directory, [], "node 1 is the first");
        assert_eq!(
            wakes.0.load(Ordering::SeqCst),
            1,
            "the waiting future was woken"
        );
        assert_eq!(
            first.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready(Ok(entry(1)))
        );
        // A node forgotten (lost) before it announces itself: whoever
        // waits hears so, and a future given up on leaves no waker.
        let mut never = Box::pin(registry.when_announced(NodeId(2)));
        assert!(never
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        drop(Box::pin(registry.when_announced(NodeId(2))));
        registry.forget(NodeId(2));
        assert_eq!(
            never.as_mut().poll(&mut Context::from_waker(&waker)),
            Poll::Ready(Err(Forgotten(NodeId(2))))
        );
        assert_eq!(registry.announced(NodeId(1)), Some(entry(1)));

        // The same announcement again (a node whose reply was lost
        // retries) is accepted again; a different one of node 1 is
        // refused, and so are a node the frontend does not expect and one
        // naming another node.
        let again = announce(nodes[0].rep, frontend_addr(), entry(1))
            .await
            .unwrap();
        assert_eq!(again.ebb_ids, ranges[0]);
        assert_eq!(
            announce(
                nodes[0].rep,
                frontend_addr(),
                NodeEntry {
                    cores: 9,
                    ..entry(1)
                }
            )
            .await,
            Err(AnnounceError::Refused(Refusal::Duplicate))
        );
        let stranger = sim_node(&sim, 9);
        assert_eq!(
            announce(stranger.rep, frontend_addr(), entry(9)).await,
            Err(AnnounceError::Refused(Refusal::UnknownNode))
        );
        assert_eq!(
            announce(nodes[1].rep, frontend_addr(), entry(3)).await,
            Err(AnnounceError::Refused(Refusal::WrongId))
        );

        // Node 2 announces 0.0.0.0: the frontend records where it sees it.
        let anywhere = NodeEntry {
            addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, PORT),
            ..entry(2)
        };
        let welcome = announce(nodes[1].rep, frontend_addr(), anywhere)
            .await
            .unwrap();
        assert_eq!(welcome.directory, [entry(1)]);
        // Node 3 comes last: it learns nodes 1 and 2 from the reply and
        // calls node 2 directly.
        let welcome = announce(nodes[2].rep, frontend_addr(), entry(3))
            .await
            .unwrap();
        assert_eq!(welcome.ebb_ids, ranges[2]);
        assert_eq!(welcome.directory, [entry(1), entry(2)]);
        let reply = nodes[2]
            .rep
            .call(NodeId(2), echo_id, ECHO, bytes(b"from 3"))
            .await
            .unwrap();
        assert_eq!(reply.payload, *b"from 3".as_slice());
        // Node 1 came first and has never heard of node 3: it asks the
        // frontend (LOOKUP) and then calls it. A node nobody announced is
        // still unreachable.
        assert_eq!(nodes[0].rep.directory().address(NodeId(3)), None);
        let reply = nodes[0]
            .rep
            .call(NodeId(3), echo_id, ECHO, bytes(b"from 1"))
            .await
            .unwrap();
        assert_eq!(reply.payload, *b"from 1".as_slice());
        assert_eq!(
            nodes[0].rep.directory().address(NodeId(3)),
            Some(SocketAddr::V4(entry(3).addr))
        );
        assert_eq!(
            nodes[0]
                .rep
                .call(NodeId(7), echo_id, ECHO, bytes(b"x"))
                .await
                .unwrap_err(),
            MessengerError::Unreachable {
                node: NodeId(7),
                reason: Unreachable::NotInDirectory
            }
        );
        assert_eq!(
            front.rep.directory().nodes(),
            [1u8, 2, 3].map(|n| (NodeId(u32::from(n)), SocketAddr::V4(entry(n).addr)))
        );
        assert_eq!(registry.nodes(), [entry(1), entry(2), entry(3)]);
    });
}

/// An announcement whose control is not an `Announce` (a node of
/// another layout: 11 bytes here) is refused in the announcement's own
/// reply with a code naming what was wrong, which `announce` reads as
/// `Refusal::Malformed`; the frontend records nothing and the node may
/// announce properly afterwards.
#[test]
fn a_malformed_announcement_is_refused_with_a_named_refusal() {
    simulate(|sim| async move {
        let front = sim_node(&sim, 0);
        let registry = Frontend::new(40_000..40_256);
        registry.serve(front.messenger).unwrap();
        let node = sim_node(&sim, 1);
        let range = registry.expect(NodeId(1), 64).unwrap();
        node.rep.directory().insert(NodeId(0), frontend_addr());
        let mut short = Announce(entry(1)).encode();
        short.pop();
        let reply = node
            .rep
            .call_with(
                NodeId(0),
                None,
                FRONTEND_EBB,
                ANNOUNCE,
                Message {
                    control: IoChain::from(IoBuf::from_vec(short)),
                    payload: IoChain::new(),
                },
            )
            .await
            .expect("a refusal is a reply, not an error reply");
        let refused = AnnounceReply::decode(&reply.control);
        assert_eq!(refused, Ok(AnnounceReply::Refused(Refusal::Malformed)));
        let error = AnnounceError::Refused(Refusal::Malformed);
        assert_eq!(
            error.to_string(),
            "the frontend refused: the announcement did not decode: \
             its control is not the 12 bytes of an Announce"
        );
        assert_eq!(registry.announced(NodeId(1)), None);
        let welcome = announce(node.rep, frontend_addr(), entry(1)).await.unwrap();
        assert_eq!(welcome.ebb_ids, range);
    });
}

/// Counts its wake-ups.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn when_both_nodes_dial_at_once_both_keep_the_connection_the_smaller_id_dialed() {
    simulate(|sim| async move {
        let echo_id = EbbId::new(40_404).unwrap();
        let (a, b) = echo_pair(&sim, echo_id);
        learn(&b, &a);
        // Both call before either connection is up: each dials.
        let from_a = spawn_task(a.rep.call(NodeId(2), echo_id, ECHO, bytes(b"a")));
        let from_b = spawn_task(b.rep.call(NodeId(1), echo_id, ECHO, bytes(b"b")));
        let dialed_by_a = a.rep.peer(NodeId(2)).unwrap();
        let dialed_by_b = b.rep.peer(NodeId(1)).unwrap();
        assert_eq!(from_a.await.unwrap().unwrap().payload, *b"a".as_slice());
        assert_eq!(from_b.await.unwrap().unwrap().payload, *b"b".as_slice());
        assert_eq!((a.rep.dials(), b.rep.dials()), (1, 1));
        assert_eq!(
            (
                a.accepted.load(Ordering::SeqCst),
                b.accepted.load(Ordering::SeqCst)
            ),
            (1, 1),
            "two connections were made"
        );
        // Node 1's connection won on both sides; node 2 closed its own
        // once its call had its reply.
        for _ in 0..100 {
            if matches!(dialed_by_b.state(), PeerState::Closed(_)) {
                break;
            }
            yield_now().await;
        }
        assert!(Rc::ptr_eq(&a.rep.peer(NodeId(2)).unwrap(), &dialed_by_a));
        assert!(!Rc::ptr_eq(&b.rep.peer(NodeId(1)).unwrap(), &dialed_by_b));
        assert!(dialed_by_b.is_retired());
        assert!(matches!(dialed_by_b.state(), PeerState::Closed(_)));
        // Later calls both ways go over the winner; nobody dials again.
        let again_a = a.rep.call(NodeId(2), echo_id, ECHO, bytes(b"a2")).await;
        let again_b = b.rep.call(NodeId(1), echo_id, ECHO, bytes(b"b2")).await;
        assert_eq!(again_a.unwrap().payload, *b"a2".as_slice());
        assert_eq!(again_b.unwrap().payload, *b"b2".as_slice());
        assert_eq!((a.rep.dials(), b.rep.dials()), (1, 1));
        assert_eq!(
            b.rep.peer(NodeId(1)).unwrap().state(),
            PeerState::Ready { node: NodeId(1) }
        );
    });
}
