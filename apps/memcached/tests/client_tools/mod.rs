//! Real memcached clients' own test suites, run against a server or a
//! cache of several nodes: libmemcached's `memccapable` (Debian's
//! libmemcached-tools) and pymemcache's integration tests. The checks
//! take addresses (and a network namespace, for servers only reachable
//! inside one), so that the single-server tests, the hosted cluster and
//! the native cluster run the very same check.

// Each test binary uses part of it.
#![allow(dead_code)]

pub mod memccapable;
pub mod pymemcache;

use std::net::SocketAddr;

/// memccapable (its ascii and its binary tests) and then pymemcache's
/// integration tests through each of `nodes` in turn (every node of one
/// cache), run inside `namespace` if given; panics naming the node and
/// the suite that failed.
pub fn client_suites_pass_through_each(namespace: Option<&str>, nodes: &[SocketAddr]) {
    for (index, node) in nodes.iter().enumerate() {
        println!("client suites through node {} at {node}", index + 1);
        memccapable::passes(namespace, *node, "-a", "ascii");
        memccapable::passes(namespace, *node, "-b", "binary");
        pymemcache::passes(namespace, *node);
    }
}
