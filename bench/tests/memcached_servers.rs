//! The servers of `./ebb bench memcached` and `./ebb bench tcp`, started
//! the benchmarks' way and measured briefly: stock memcached on loopback,
//! and, as root, stock on the kernel's TCP and ours on the user-space stack
//! behind a TAP device in a namespace the test creates and deletes.

use std::time::Duration;

use ebb_bench::memcached::{build_ours, Launch, Plan, Server, Which, STOCK};
use ebb_loadgen::ProtocolKind;
use ebb_testbed::netns::{self, NetNamespace};
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{function_name, require, skip, skip_unless, Need};

const PLAN: Plan = Plan {
    runs: 1,
    window: Duration::from_millis(300),
    warmup: Duration::from_millis(100),
};

/// A short closed-loop run: replies came, none was an error, and both the
/// server and the generator were seen using CPU; the kernel's
/// retransmissions are counted exactly when the server has a namespace.
fn check(server: &Server<'_>, in_namespace: bool) {
    server.preload(ProtocolKind::Text, 0).expect("preload");
    let measured = server
        .measure(&server.load(ProtocolKind::Text, &PLAN, 0))
        .expect("measure");
    let name = server.which().name();
    assert!(measured.summary.replies > 0, "{name}: no replies");
    assert!(
        measured.server_us_per_request > 0.0,
        "{name}: no server CPU"
    );
    assert!(
        measured.generator_us_per_request > 0.0,
        "{name}: no generator CPU"
    );
    assert_eq!(
        measured.kernel_retransmits.is_some(),
        in_namespace,
        "{name}"
    );
}

#[test]
fn both_memcacheds_serve_the_benchmark_load() {
    skip_unless!(Need::Memcached);
    assert!(std::path::Path::new(STOCK).exists(), "{STOCK} is missing");
    check(
        &Server::start(&Launch::loopback(Which::Stock, 0)).expect("stock on loopback"),
        false,
    );

    if let Err(why) = require(&[Need::Root, Need::Tun, Need::Ip]) {
        skip(&format!("{} (TAP half)", function_name!()), &why.reason);
        return;
    }
    build_ours().expect("our memcached builds");
    let namespace = NetNamespace::for_this_process("mc-test").expect("namespace");
    let name = namespace.name().to_owned();
    {
        let config = TapConfig::guest_link("02:eb:00:00:00:02");
        let _tap = TapDevice::create(&namespace, &config).expect("tap");
        for which in [Which::Stock, Which::Ours] {
            let server = Server::start(&Launch::on_tap(which, 0, &namespace, &config))
                .unwrap_or_else(|e| panic!("{} on TAP: {e}", which.name()));
            check(&server, true);
        }
    }
    drop(namespace);
    assert!(!netns::exists(&name));
}
