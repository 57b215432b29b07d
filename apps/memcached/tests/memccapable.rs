//! libmemcached's `memccapable` (Debian's libmemcached-tools) against our
//! server: every one of its text ("ascii") and binary tests must pass.
//!
//! Against Debian's memcached 1.6.18 it runs 27 ascii and 27 binary tests
//! and prints "All tests passed" (no test is skipped without `-P`); we
//! require exactly that, on the hosted platform (kernel TCP on 127.0.0.1)
//! and on Ebbflow's own TCP over a TAP device (`--tap`, the user-space
//! stack), with memccapable in the TAP device's network namespace.

mod client_tools;
mod common;
mod netns;

use std::net::SocketAddr;

use client_tools::memccapable::passes;
use common::start_ours;

/// Where memccapable finds the server.
enum Target {
    /// A fresh hosted server of ours on 127.0.0.1.
    Hosted,
    /// A fresh server of ours on the user-space stack in a namespace.
    UserStack,
}

fn check(target: &Target, flag: &str, protocol: &str) {
    match target {
        Target::Hosted => {
            let server = start_ours(&[]);
            passes(
                None,
                SocketAddr::from(([127, 0, 0, 1], server.port)),
                flag,
                protocol,
            );
        }
        Target::UserStack => {
            let server = netns::UserStackServer::start(env!("CARGO_BIN_EXE_memcached"));
            let ip: std::net::Ipv4Addr = netns::STACK_IP.parse().unwrap();
            passes(
                Some(&server.namespace),
                SocketAddr::from((ip, 11211)),
                flag,
                protocol,
            );
        }
    }
}

#[test]
fn memccapable_binary_tests_all_pass() {
    check(&Target::Hosted, "-b", "binary");
}

#[test]
fn memccapable_ascii_tests_all_pass() {
    check(&Target::Hosted, "-a", "ascii");
}

#[test]
fn memccapable_binary_tests_all_pass_on_the_user_space_stack() {
    ebb_testbed::skip_unless!(
        ebb_testbed::Need::Root,
        ebb_testbed::Need::Tun,
        ebb_testbed::Need::Ip
    );
    check(&Target::UserStack, "-b", "binary");
}

#[test]
fn memccapable_ascii_tests_all_pass_on_the_user_space_stack() {
    ebb_testbed::skip_unless!(
        ebb_testbed::Need::Root,
        ebb_testbed::Need::Tun,
        ebb_testbed::Need::Ip
    );
    check(&Target::UserStack, "-a", "ascii");
}
