//! The Linux comparison guest end to end: built from Debian packages (or
//! taken from the cache in target/linux-guest), booted under QEMU (TCG),
//! and stock memcached answering a set/get over user networking on
//! 127.0.0.1 and, as root, over a TAP device in a network namespace the
//! test creates and deletes.

use ebb_testbed::linux_guest::{self, default_cache_dir, probe, GuestSettings};
use ebb_testbed::netns::{self, NetNamespace};
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{function_name, require, skip, skip_unless, Need};

#[test]
fn stock_memcached_answers_in_the_linux_guest() {
    skip_unless!(Need::Qemu);
    let built = linux_guest::build_or_reuse(&default_cache_dir(), false).expect("guest image");
    let manifest = std::fs::read_to_string(&built.image.manifest).expect("manifest");
    assert!(manifest.contains("package memcached "), "{manifest}");
    assert!(manifest.contains(" virtio_net\n"), "{manifest}");
    let settings = GuestSettings::default();

    let guest = linux_guest::boot_user(&built.image, &settings).expect("user boot");
    assert!(guest.answer.starts_with("1."), "{}", guest.answer);
    probe::set_and_get(guest.server(), "ebb-test", "over-user-net").expect("set/get");
    drop(guest);

    if let Err(why) = require(&[Need::Root, Need::Tun, Need::Ip]) {
        skip(&format!("{} (TAP half)", function_name!()), &why.reason);
        return;
    }
    let namespace = NetNamespace::for_this_process("guest-test").expect("namespace");
    let name = namespace.name().to_owned();
    {
        let tap = TapDevice::create(
            &namespace,
            &TapConfig::guest_link(linux_guest::qemu::GUEST_MAC),
        )
        .expect("tap");
        let guest =
            linux_guest::boot_tap(&built.image, &settings, &namespace, &tap).expect("tap boot");
        let server = guest.server();
        namespace
            .run_inside(|| probe::set_and_get(server, "ebb-test", "over-tap"))
            .expect("inside")
            .expect("set/get in the namespace");
        // The guest's address is not reachable from outside the namespace.
        // Which error depends on the host's network: no route, a refusal,
        // a timeout, or (seen on CI hosts) a proxy that intercepts private
        // addresses and answers HTTP. Never memcached's answer.
        let error = probe::version(server).expect_err("reachable from outside");
        assert!(!error.contains("VERSION"), "{error}");
    }
    drop(namespace);
    assert!(!netns::exists(&name));
}
