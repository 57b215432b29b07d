//! The Messenger over Ebbflow's own TCP/IP in a process (the userstack:
//! `ebb-userstack` over a TAP device) against a hosted node on kernel
//! sockets, in a network namespace of the test's own: node 1 is hosted
//! (kernel TCP, 10.79.0.1 on the TAP's kernel side), node 2 runs on our
//! stack (10.79.0.2 over the TAP), both in this process; each calls the
//! other's echo Ebb once. Everything is deleted afterwards (the
//! namespace and the TAP with it), also when the test fails.
//!
//! Needs root, `/dev/net/tun` and `ip`; without them it says why and is
//! counted as skipped.

mod echo_support;
mod hosted_support;

use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use ebb_core::{EbbId, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{acceptor, create_messenger, MessengerError, MessengerSettings};
use ebb_net::TcpConnection;
use ebb_netstack::{IpConfig, IpSetup};
use ebb_testbed::netns::NetNamespace;
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{skip_unless, Need};
use echo_support::{Echo, ECHO};
use hosted_support::node_config;

const TAP: &str = "ebbmsg0";
const HOSTED: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);
const USERSTACK: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 2);
const PORT: u16 = 7100;

fn echo_id() -> EbbId {
    EbbId::new(40_330).unwrap()
}

/// What one node saw: its call's reply payload, or the error.
type Outcome = Result<Vec<u8>, MessengerError>;

/// Node `me` at `me_ip`: serves the echo Ebb on [`PORT`], waits for
/// `ready` (the other node listens), calls node `other` at `other_ip`
/// once, tells `done_tx` it is done, and serves until `done_rx` says the
/// other node is done too.
struct NodePlan {
    me: NodeId,
    me_ip: Ipv4Addr,
    other: NodeId,
    other_ip: Ipv4Addr,
    signals: Signals,
}

/// How a node hears from the other one, and tells it.
struct Signals {
    listening: ebb_event::Sender<()>,
    ready: ebb_event::Receiver<()>,
    done_tx: ebb_event::Sender<()>,
    done_rx: ebb_event::Receiver<()>,
}

/// Two nodes' signals, each one's senders the other's receivers.
fn crossed_signals() -> (Signals, Signals) {
    let (a_listening, b_ready) = ebb_event::oneshot();
    let (b_listening, a_ready) = ebb_event::oneshot();
    let (a_done, b_hears_done) = ebb_event::oneshot();
    let (b_done, a_hears_done) = ebb_event::oneshot();
    let a = Signals {
        listening: a_listening,
        ready: a_ready,
        done_tx: a_done,
        done_rx: a_hears_done,
    };
    let b = Signals {
        listening: b_listening,
        ready: b_ready,
        done_tx: b_done,
        done_rx: b_hears_done,
    };
    (a, b)
}

async fn run_node(plan: NodePlan) -> Outcome {
    let messenger = create_messenger(MessengerSettings::new(plan.me)).unwrap();
    let rep = messenger.get().unwrap();
    rep.local().register(echo_id(), Rc::new(Echo::default()));
    rep.directory()
        .insert(plan.other, SocketAddr::from((plan.other_ip, PORT)));
    let accept = acceptor(messenger);
    let listen = SocketAddr::from((plan.me_ip, PORT));
    ebb_net::listen(listen, Arc::new(move |conn: &TcpConnection| accept(conn)))
        .unwrap_or_else(|error| panic!("node {} listens on {listen}: {error}", plan.me));
    let signals = plan.signals;
    signals.listening.send(());
    let _ = signals.ready.await;
    let greeting = format!("from node {}", plan.me);
    let body = IoChain::from(IoBuf::copy_from_slice(greeting.as_bytes()));
    let reply = rep.call(plan.other, echo_id(), ECHO, body).await;
    signals.done_tx.send(());
    let _ = signals.done_rx.await;
    reply.map(|reply| reply.payload.to_vec())
}

#[test]
fn a_userstack_node_and_a_hosted_node_call_each_other() {
    skip_unless!(Need::Root, Need::Tun, Need::Ip);
    let namespace = NetNamespace::for_this_process("msg").expect("namespace");
    let link = TapConfig::from_cidr(TAP, &format!("{HOSTED}/24")).unwrap();
    let tap = TapDevice::create(&namespace, &link).expect("tap");

    let (hosted_signals, userstack_signals) = crossed_signals();
    let hosted = NodePlan {
        me: NodeId(1),
        me_ip: HOSTED,
        other: NodeId(2),
        other_ip: USERSTACK,
        signals: hosted_signals,
    };
    let userstack = NodePlan {
        me: NodeId(2),
        me_ip: USERSTACK,
        other: NodeId(1),
        other_ip: HOSTED,
        signals: userstack_signals,
    };

    // Detached threads (not a scope): a node that hangs fails the test at
    // the timeout below instead of hanging it.
    let namespace = Arc::new(namespace);
    let (results_tx, results) = mpsc::channel::<(&str, Outcome)>();
    let inside = Arc::clone(&namespace);
    let sender = results_tx.clone();
    thread::spawn(move || {
        let outcome = inside
            .run_inside(|| ebb_hosted::run_task(node_config(), move || run_node(hosted)))
            .expect("entering the namespace")
            .expect("the hosted node runs");
        let _ = sender.send(("hosted", outcome));
    });
    let inside = Arc::clone(&namespace);
    thread::spawn(move || {
        let outcome = inside
            .run_inside(|| {
                let mut config = node_config();
                let mut options = ebb_userstack::Options::new(TAP);
                options.ip = IpSetup::Static(IpConfig {
                    addr: USERSTACK,
                    prefix_len: 24,
                    gateway: None,
                });
                ebb_userstack::install(&mut config, options).expect("attaching to the TAP");
                ebb_hosted::run_task(config, move || run_node(userstack))
            })
            .expect("entering the namespace")
            .expect("the userstack node runs");
        let _ = results_tx.send(("userstack", outcome));
    });
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(
            results
                .recv_timeout(Duration::from_secs(60))
                .expect("both nodes finish their call within 60 s"),
        );
    }
    seen.sort_by_key(|(node, _)| *node);
    assert_eq!(
        seen,
        [
            ("hosted", Ok(b"from node 1".to_vec())),
            ("userstack", Ok(b"from node 2".to_vec())),
        ]
    );
    // The TAP first, then the namespace (the last thread out drops it).
    drop(tap);
}
