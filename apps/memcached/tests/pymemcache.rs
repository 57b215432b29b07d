//! pymemcache's own integration tests (`pymemcache/test/test_integration.py`
//! from its sdist) against our server, run with pytest in a virtual
//! environment under `target/pyenv` that this test creates and caches
//! (from PyPI, with the versions in `tests/requirements.txt`).
//!
//! Against Debian's memcached 1.6.18 they give "100 passed, 3 skipped":
//! the three skipped are pymemcache's TLS test, which it marks skipped
//! itself. We require the same, from the hosted server and from memcached
//! booted as its own image (`./ebb run memcached --native`, QEMU with
//! TCG, virtio-net on QEMU's user network, the port forwarded).

mod client_tools;
mod common;
mod native_boot;

use std::net::SocketAddr;

use client_tools::pymemcache::passes;
use common::start_ours;

#[test]
fn pymemcache_integration_tests_pass() {
    let server = start_ours(&[]);
    passes(None, SocketAddr::from(([127, 0, 0, 1], server.port)));
}

#[test]
fn pymemcache_integration_tests_pass_against_native_memcached() {
    let port = common::free_port();
    let _server = native_boot::NativeServer::start(
        &["--timeout", "900", "--forward", &format!("{port}:11211")],
        &[],
    );
    passes(None, SocketAddr::from(([127, 0, 0, 1], port)));
}
