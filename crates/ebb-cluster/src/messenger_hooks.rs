//! The allocator's two hooks done with the Messenger (issue 16: a node
//! learns its id, the frontend's address, its global Ebb ids and the
//! Messenger port at boot, and `allocate` resolves once it has announced
//! itself):
//!
//! - [`MessengerContract`], a [`BootContract`]: for node `k`,
//!   `Frontend::expect(k, ids_per_node)` hands out its id range (or, with
//!   a global id map, `reserve_range(k, ids_per_node)` reserves it there as
//!   the node is allocated and `Frontend::expect_range` records it), and the
//!   node is told `node=k frontend=10.96.0.1:PORT ebb_ids=A-B
//!   messenger_port=PORT` (`ebb_boot_abi::NodeContract`'s words).
//! - [`Announced`], a [`Readiness`]: the node is ready once
//!   `Frontend::when_announced(k)` resolves. It is waited for on the
//!   allocator's thread (a blocking call), so the future is polled with a
//!   waker that unparks that thread, in slices, so that a VM that ends
//!   first is seen within [`SLICE`].

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddrV4;
use std::ops::Range;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use ebb_boot_abi::NodeContract;
use ebb_core::{GlobalIdMap, NodeId};
use ebb_messenger::Frontend;
use ebb_testbed::cluster_net::NodeLink;

use crate::frontend::global_map::wait;
use crate::launcher::BootContract;
use crate::readiness::{NotReady, Readiness, ReadyProbe};

/// How long [`Announced`] sleeps at most between looks at the VM.
pub const SLICE: Duration = Duration::from_millis(100);

/// Tells each node its place in the application: its id range from the
/// frontend's registry, and where the frontend's Messenger listens.
pub struct MessengerContract {
    frontend: Arc<Frontend>,
    ids_per_node: u32,
    port: u16,
    /// Where nodes' ids are reserved, if not from the registry's space.
    map: Option<Arc<dyn GlobalIdMap>>,
    /// The range each node was given, for the frontend program.
    ranges: Mutex<BTreeMap<NodeId, Range<u32>>>,
}

impl MessengerContract {
    /// Nodes get `ids_per_node` global ids each from `frontend`, and the
    /// Messenger listens on `port` (the frontend's, and each node's own).
    pub fn new(frontend: Arc<Frontend>, ids_per_node: u32, port: u16) -> MessengerContract {
        MessengerContract {
            frontend,
            ids_per_node,
            port,
            map: None,
            ranges: Mutex::new(BTreeMap::new()),
        }
    }

    /// Reserves each node's ids from `map` as the node is allocated,
    /// instead of from the registry's space: frontends sharing the map
    /// (one etcd) never hand out the same ids, and each takes only what
    /// its nodes use. Blocks the allocator's thread for the reservation.
    pub fn with_map(mut self, map: Arc<dyn GlobalIdMap>) -> MessengerContract {
        self.map = Some(map);
        self
    }

    /// Node `id`'s range: from the map, if there is one, else from the
    /// registry's space.
    fn give_ids(&self, id: NodeId) -> Result<Range<u32>, String> {
        let cannot = |why: &dyn std::fmt::Display| {
            format!("the frontend cannot give node {id} its Ebb ids: {why}")
        };
        let Some(map) = &self.map else {
            return self
                .frontend
                .expect(id, self.ids_per_node)
                .map_err(|e| cannot(&e));
        };
        // A node given its ids already keeps them: refused before any
        // are reserved for nothing.
        if self.range(id).is_some() {
            return Err(cannot(&ebb_messenger::FrontendError::AlreadyExpected(id)));
        }
        let ids = wait(map.reserve_range(id, self.ids_per_node)).map_err(|e| cannot(&e))?;
        self.frontend
            .expect_range(id, ids.clone())
            .map_err(|e| cannot(&e))?;
        Ok(ids)
    }

    /// The global Ebb ids node `id` was given, once it was.
    pub fn range(&self, id: NodeId) -> Option<Range<u32>> {
        self.ranges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .cloned()
    }

    /// The words for node `id` on `link` with the range `ids`.
    fn words(&self, id: NodeId, link: &NodeLink, ids: &Range<u32>) -> Vec<String> {
        let contract = NodeContract {
            node: id.0,
            frontend: SocketAddrV4::new(link.frontend, self.port),
            ebb_ids_start: ids.start,
            ebb_ids_end: ids.end,
            messenger_port: self.port,
        };
        contract
            .to_string()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }
}

impl BootContract for MessengerContract {
    fn boot_args(&self, id: NodeId, link: &NodeLink) -> Result<Vec<String>, String> {
        let ids = self.give_ids(id)?;
        let words = self.words(id, link, &ids);
        self.ranges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, ids);
        Ok(words)
    }
}

/// Ready once the node has announced itself to the frontend's registry.
pub struct Announced {
    frontend: Arc<Frontend>,
}

impl Announced {
    /// Waits on `frontend`'s announcements.
    pub fn new(frontend: Arc<Frontend>) -> Announced {
        Announced { frontend }
    }
}

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

impl Readiness for Announced {
    fn awaited(&self) -> String {
        "its announcement to the frontend over the Messenger".to_owned()
    }

    fn wait_ready(&self, node: &ReadyProbe<'_>, deadline: Instant) -> Result<(), NotReady> {
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut context = Context::from_waker(&waker);
        let mut announced = pin!(self.frontend.when_announced(node.id));
        loop {
            match announced.as_mut().poll(&mut context) {
                Poll::Ready(Ok(_)) => return Ok(()),
                // Forgotten: the frontend saw the node end; say how if
                // its VM did.
                Poll::Ready(Err(_)) if (node.ended)() => return Err(NotReady::Ended),
                Poll::Ready(Err(_)) => return Err(NotReady::Forgotten),
                Poll::Pending => {}
            }
            if (node.ended)() {
                return Err(NotReady::Ended);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(NotReady::TimedOut);
            }
            // A wake-up before the park makes the park return at once.
            std::thread::park_timeout(SLICE.min(deadline - now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_core::{FIRST_GLOBAL_ID, MAX_EBB_IDS};
    use ebb_messenger::{Announce, AnnounceReply, NodeEntry};
    use ebb_testbed::cluster_net::AddressPlan;
    use std::net::Ipv4Addr;
    use std::path::Path;

    fn link(id: u32) -> NodeLink {
        AddressPlan::default_plan().link(id).expect("a node's link")
    }

    #[test]
    fn each_node_is_told_its_own_id_range_and_the_frontends_messenger() {
        let frontend = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
        let contract = MessengerContract::new(Arc::clone(&frontend), 64, 7000);
        let first = contract.boot_args(NodeId(1), &link(1)).expect("node 1");
        let second = contract.boot_args(NodeId(2), &link(2)).expect("node 2");
        assert_eq!(
            first.join(" "),
            format!(
                "node=1 frontend=10.96.0.1:7000 ebb_ids={}-{} messenger_port=7000",
                FIRST_GLOBAL_ID,
                FIRST_GLOBAL_ID + 64
            )
        );
        assert_eq!(
            second.join(" "),
            format!(
                "node=2 frontend=10.96.0.1:7000 ebb_ids={}-{} messenger_port=7000",
                FIRST_GLOBAL_ID + 64,
                FIRST_GLOBAL_ID + 128
            )
        );
        // What the node parses is what it was told.
        let parsed = NodeContract::parse_words(first.iter().map(String::as_str))
            .expect("valid words")
            .expect("a contract");
        assert_eq!(parsed.ebb_ids(), FIRST_GLOBAL_ID..FIRST_GLOBAL_ID + 64);
        assert_eq!(parsed.node, 1);
        assert_eq!(
            contract.range(NodeId(2)),
            Some(FIRST_GLOBAL_ID + 64..FIRST_GLOBAL_ID + 128)
        );
        // A node expected twice, and a space run dry, are refused.
        let again = contract.boot_args(NodeId(1), &link(1));
        assert_eq!(
            again,
            Err(
                "the frontend cannot give node 1 its Ebb ids: node 1 already has an id range"
                    .to_owned()
            )
        );
        let small = MessengerContract::new(
            Frontend::new(FIRST_GLOBAL_ID..FIRST_GLOBAL_ID + 10),
            64,
            7000,
        );
        assert_eq!(
            small.boot_args(NodeId(1), &link(1)),
            Err("the frontend cannot give node 1 its Ebb ids: 64 global Ebb ids asked for, only 10 are left".to_owned())
        );
    }

    /// With a map, each node's ids are reserved there as it is allocated:
    /// two frontends sharing the map never overlap, a frontend takes only
    /// what its nodes use, and a map run dry is said.
    #[test]
    fn with_a_map_each_nodes_ids_are_reserved_from_it_as_it_is_allocated() {
        let map = Arc::new(ebb_core::InProcessGlobalIdMap::new());
        let frontend = |registry: &Arc<Frontend>| {
            MessengerContract::new(Arc::clone(registry), 64, 7000)
                .with_map(Arc::clone(&map) as Arc<dyn GlobalIdMap>)
        };
        let (first_registry, second_registry) = (
            Frontend::new(FIRST_GLOBAL_ID..FIRST_GLOBAL_ID),
            Frontend::new(FIRST_GLOBAL_ID..FIRST_GLOBAL_ID),
        );
        let (first, second) = (frontend(&first_registry), frontend(&second_registry));
        first.boot_args(NodeId(1), &link(1)).expect("node 1");
        second
            .boot_args(NodeId(1), &link(1))
            .expect("the other's node 1");
        first.boot_args(NodeId(2), &link(2)).expect("node 2");
        let start = FIRST_GLOBAL_ID;
        assert_eq!(first.range(NodeId(1)), Some(start..start + 64));
        assert_eq!(second.range(NodeId(1)), Some(start + 64..start + 128));
        assert_eq!(first.range(NodeId(2)), Some(start + 128..start + 192));
        // The node is accepted with the range it was given.
        assert_eq!(
            announce(&second_registry, 1),
            AnnounceReply::Accepted {
                ebb_ids: (start + 64, start + 128),
                directory: Vec::new(),
            }
        );
        // A node given its ids already reserves none again.
        assert_eq!(
            first.boot_args(NodeId(1), &link(1)),
            Err(
                "the frontend cannot give node 1 its Ebb ids: node 1 already has an id range"
                    .to_owned()
            )
        );
        assert_eq!(map.reserve_range_now(1), Ok(start + 192..start + 193));
        // The map run dry.
        let left = MAX_EBB_IDS - (start + 193);
        map.reserve_range_now(left - 10).expect("all but 10");
        assert_eq!(
            first.boot_args(NodeId(3), &link(3)),
            Err("the frontend cannot give node 3 its Ebb ids: 64 global Ebb ids asked for, only 10 are left".to_owned())
        );
    }

    fn probe<'a>(id: u32, ended: &'a (dyn Fn() -> bool + Sync)) -> ReadyProbe<'a> {
        ReadyProbe {
            id: NodeId(id),
            address: Ipv4Addr::new(10, 96, 0, 2),
            console_log: Path::new("/nonexistent"),
            ended,
        }
    }

    fn announce(frontend: &Frontend, id: u32) -> AnnounceReply {
        let entry = NodeEntry {
            node: NodeId(id),
            addr: SocketAddrV4::new(Ipv4Addr::new(10, 96, 0, 2), 7000),
            cores: 1,
        };
        frontend.accept(NodeId(id), &Announce(entry), None)
    }

    #[test]
    fn a_node_is_ready_when_it_announces_itself_and_not_when_its_vm_ends() {
        let frontend = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
        frontend.expect(NodeId(1), 8).expect("expect");
        frontend.expect(NodeId(2), 8).expect("expect");
        let ready = Announced::new(Arc::clone(&frontend));
        let alive = || false;
        let soon = || Instant::now() + Duration::from_millis(300);
        assert_eq!(
            ready.wait_ready(&probe(1, &alive), soon()),
            Err(NotReady::TimedOut)
        );
        // Announced from another thread while waiting: woken, ready.
        let announcer = {
            let frontend = Arc::clone(&frontend);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                announce(&frontend, 1)
            })
        };
        let started = Instant::now();
        assert_eq!(
            ready.wait_ready(&probe(1, &alive), Instant::now() + Duration::from_secs(30)),
            Ok(())
        );
        assert!(matches!(
            announcer.join().expect("join"),
            AnnounceReply::Accepted { .. }
        ));
        assert!(started.elapsed() < Duration::from_secs(10));
        // A VM that ended never becomes ready.
        let dead = || true;
        assert_eq!(
            ready.wait_ready(&probe(2, &dead), soon()),
            Err(NotReady::Ended)
        );
        // Forgotten (lost or stopped) while the VM still seems to run.
        let forgetter = {
            let frontend = Arc::clone(&frontend);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                frontend.forget(NodeId(2));
            })
        };
        assert_eq!(
            ready.wait_ready(&probe(2, &alive), Instant::now() + Duration::from_secs(30)),
            Err(NotReady::Forgotten)
        );
        forgetter.join().expect("join");
        assert_eq!(
            ready.awaited(),
            "its announcement to the frontend over the Messenger"
        );
    }
}
