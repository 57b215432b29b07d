//! Messenger nodes over the simulated link, for the Messenger Ebb's tests:
//! each node on its own Ebbflow TCP/IP stack in one process, on a
//! one-core event loop whose clock moves with the link's ([`simulate`]).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ebb_core::NodeId;
use ebb_event::manual_clock::ManualClock;
use ebb_event::{shutdown, spawn_task, yield_now};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{acceptor, create_messenger, MessengerRef, MessengerRep, MessengerSettings};
use ebb_net::{NetStack, TcpConnection};
use ebb_netstack::sim::{LinkConfig, Sim};

use super::{side, Side};

pub const PORT: u16 = 7100;
/// Simulated time per step of the driver.
pub const STEP: Duration = Duration::from_millis(5);
/// A test that has not finished after this much simulated time fails.
pub const LIMIT: Duration = Duration::from_secs(120);
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(1);

/// Node `node`'s address (node 0, the frontend, is 10.0.0.10).
pub fn ip(node: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, 10 + node)
}

/// Runs `body` as a task on a one-core node whose clock moves with the
/// simulated link: a driver task advances both by [`STEP`] each turn until
/// `body` has finished (a test stuck for [`LIMIT`] of simulated time fails).
pub fn simulate<F>(body: impl FnOnce(Rc<RefCell<Sim>>) -> F + 'static)
where
    F: Future<Output = ()> + 'static,
{
    let clock: &'static ManualClock = Box::leak(Box::new(ManualClock::new()));
    let code = clock
        .run(move || {
            let sim = Rc::new(RefCell::new(Sim::new(LinkConfig {
                latency: Duration::from_micros(50),
                bandwidth_bps: 10_000_000_000,
                ..LinkConfig::default()
            })));
            let done = Rc::new(Cell::new(false));
            let test = body(Rc::clone(&sim));
            spawn_task({
                let done = Rc::clone(&done);
                async move {
                    test.await;
                    done.set(true);
                }
            });
            spawn_task(async move {
                let mut waited = Duration::ZERO;
                while !done.get() {
                    assert!(
                        waited < LIMIT,
                        "the test did not finish in {LIMIT:?} (simulated)"
                    );
                    sim.borrow_mut().run_for(STEP);
                    clock.advance(STEP);
                    waited += STEP;
                    yield_now().await;
                }
                shutdown(0).unwrap();
            });
        })
        .unwrap();
    assert_eq!(code, 0);
}

/// A node: its stack on the link, its Messenger (dialing through its own
/// stack, listening on [`PORT`]) and the connections it accepted.
pub struct SimNode {
    pub side: Side,
    pub messenger: MessengerRef,
    pub rep: &'static MessengerRep,
    pub accepted: Arc<AtomicUsize>,
}

pub fn sim_node(sim: &RefCell<Sim>, id: u8) -> SimNode {
    sim_node_at(sim, id, id)
}

/// Node `id` at node `host`'s address (and Ethernet address): a node
/// restarted elsewhere under the same id.
pub fn sim_node_at(sim: &RefCell<Sim>, id: u8, host: u8) -> SimNode {
    let side = side(&sim.borrow(), 10 + host, ip(host));
    sim.borrow_mut().add(Box::new(side.stack.clone()));
    let messenger = create_messenger(MessengerSettings {
        hello_timeout: HELLO_TIMEOUT,
        ..MessengerSettings::new(NodeId(u32::from(id)))
    })
    .unwrap();
    let rep = messenger.get().unwrap();
    let stack = side.stack.clone();
    rep.dial_with(Rc::new(move |addr, handler| stack.connect(addr, handler)));
    let accepted = Arc::new(AtomicUsize::new(0));
    let accept = acceptor(messenger);
    let counted = Arc::clone(&accepted);
    side.stack
        .listen(
            SocketAddr::from((ip(host), PORT)),
            Arc::new(move |conn: &TcpConnection| {
                counted.fetch_add(1, Ordering::SeqCst);
                accept(conn)
            }),
        )
        .unwrap();
    SimNode {
        side,
        messenger,
        rep,
        accepted,
    }
}

/// Tells `node` where `other` listens.
pub fn learn(node: &SimNode, other: &SimNode) {
    node.rep
        .directory()
        .insert(other.rep.node(), SocketAddr::from((ip_of(other), PORT)));
}

pub fn ip_of(node: &SimNode) -> Ipv4Addr {
    ip(u8::try_from(node.rep.node().0).unwrap())
}

pub fn bytes(data: &'static [u8]) -> IoChain {
    IoChain::from(IoBuf::from_static(data))
}
