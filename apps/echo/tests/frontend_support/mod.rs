//! The frontend of echo's node tests: a hosted node 0 of one core with a
//! Messenger and the registry of nodes, which expects nodes 1 to N (64
//! global ids each) and listens on 127.0.0.1.

use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;

use ebb_core::{NodeId, FIRST_GLOBAL_ID, MAX_EBB_IDS};
use ebb_messenger::{
    acceptor, create_messenger, Frontend, MessengerRef, MessengerSettings, FRONTEND_NODE,
};

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
    pub addr: SocketAddr,
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
            .map(|node| registry.expect(NodeId(node), 64).unwrap())
            .collect();
        let addr = ebb_net::listen("127.0.0.1:0".parse().unwrap(), acceptor(messenger)).unwrap();
        TestFrontend {
            messenger,
            registry,
            addr,
            ranges,
        }
    }
}
