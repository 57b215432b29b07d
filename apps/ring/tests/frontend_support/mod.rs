//! The frontend of the ring tests: `ebb_messenger::LocalFrontend` on
//! 127.0.0.1, and the ring it makes of the nodes once they announced
//! themselves.

// Each test binary uses part of it.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use ebb_core::{EbbId, NodeId};
use ebb_messenger::LocalFrontend;
use ring::WorkerNode;

/// Global ids each node gets.
pub const IDS_PER_NODE: u32 = 64;

/// A frontend expecting nodes 1 to `count`, listening on 127.0.0.1 (on
/// the calling core).
pub fn start(count: u32) -> LocalFrontend {
    let any_port = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    LocalFrontend::start(any_port, count, IDS_PER_NODE).expect("the frontend starts")
}

/// Where `frontend` listens (IPv4: it was asked to).
pub fn v4(frontend: &LocalFrontend) -> SocketAddrV4 {
    match frontend.addr {
        SocketAddr::V4(addr) => addr,
        SocketAddr::V6(addr) => unreachable!("listening on 127.0.0.1, not {addr}"),
    }
}

/// The ring, once every node announced itself (the test's own timeout
/// bounds the wait): each node's worker is the first of its ids.
pub async fn announced(frontend: &LocalFrontend) -> Vec<WorkerNode> {
    let mut nodes = Vec::new();
    for (node, range) in (1..).zip(&frontend.ranges) {
        frontend
            .registry
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
