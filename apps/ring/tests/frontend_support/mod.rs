//! The frontend of the ring tests, as the cluster frontend's runtime is
//! to be: a hosted node 0 with a Messenger and the registry of nodes,
//! which expects nodes 1 to N (a range of global ids each), listens on
//! 127.0.0.1 and waits for their announcements.

// Each test binary uses part of it.
#![allow(dead_code)]

use std::net::SocketAddrV4;
use std::ops::Range;
use std::sync::Arc;

use ebb_core::{EbbId, NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_messenger::{
    acceptor, create_messenger, Frontend, MessengerRef, MessengerSettings, FRONTEND_NODE,
};
use ring::WorkerNode;

/// Global ids each node gets.
pub const IDS_PER_NODE: u32 = 64;

/// One core, unpinned, no signal handling: tests run side by side.
pub fn node_config() -> ebb_hosted::Config {
    ebb_hosted::Config {
        cores: Some(1),
        pin: false,
        handle_signals: false,
        ..ebb_hosted::Config::default()
    }
}

/// The frontend, set up on the calling core.
pub struct TestFrontend {
    pub messenger: MessengerRef,
    pub registry: Arc<Frontend>,
    /// Where its Messenger listens.
    pub addr: SocketAddrV4,
    /// Node k's global ids are `ranges[k - 1]`.
    pub ranges: Vec<Range<u32>>,
}

impl TestFrontend {
    /// Expects nodes 1 to `count` and listens.
    pub fn start(count: u32) -> TestFrontend {
        let messenger = create_messenger(MessengerSettings::new(FRONTEND_NODE)).unwrap();
        let registry = Frontend::new(FIRST_GLOBAL_ID..MAX_EBB_IDS);
        registry.serve(messenger).unwrap();
        let ranges = (1..=count)
            .map(|node| registry.expect(NodeId(node), IDS_PER_NODE).unwrap())
            .collect();
        let addr = ebb_net::listen("127.0.0.1:0".parse().unwrap(), acceptor(messenger)).unwrap();
        let std::net::SocketAddr::V4(addr) = addr else {
            unreachable!("listening on IPv4")
        };
        TestFrontend {
            messenger,
            registry,
            addr,
            ranges,
        }
    }

    /// The ring, once every node announced itself (the test's own timeout
    /// bounds the wait): each node's worker is the first of its ids.
    pub async fn announced(&self) -> Vec<WorkerNode> {
        let mut nodes = Vec::new();
        for (node, range) in (1..).zip(&self.ranges) {
            self.registry
                .when_announced(NodeId(node))
                .await
                .expect("the node announces itself");
            nodes.push(WorkerNode {
                node: NodeId(node),
                worker: EbbId::new(range.start).unwrap(),
            });
        }
        nodes
    }

    /// Node `node` is gone, as its launcher would say: forgotten by the
    /// registry and lost by the Messenger (which tells the other nodes).
    pub fn lose(&self, node: NodeId) {
        self.registry.forget(node);
        self.messenger.get().unwrap().lose_node(node);
    }
}
