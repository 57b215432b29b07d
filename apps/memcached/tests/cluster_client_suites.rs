//! Real clients' own test suites through each node of a cache of three
//! `memcached` processes (`process_cluster`): libmemcached's
//! `memccapable` (its 27 ascii and 27 binary tests) and pymemcache's
//! integration tests (100 passed, 3 skipped: its TLS test), run through
//! node 1, then node 2, then node 3. Most of their keys belong to
//! another node than the one asked, so they go through the forwarding
//! of the text and binary protocols, and their `flush_all` reaches all
//! three nodes.

mod client_tools;
mod cluster_support;
mod common;
mod process_cluster;

use client_tools::client_suites_pass_through_each;
use process_cluster::ProcessCluster;

#[test]
fn memccapable_and_pymemcache_pass_through_each_node_of_three() {
    let cluster = ProcessCluster::start(3, &[]);
    client_suites_pass_through_each(None, &cluster.addrs);
    // The nodes first (killed and waited for), then their frontend.
    drop(cluster.processes);
    cluster.frontend.stop.send(());
}
