//! The Linux comparison guest end to end: built from Debian packages (or
//! taken from the cache in target/linux-guest), booted under QEMU (TCG),
//! and stock memcached answering a set/get over user networking on
//! 127.0.0.1 and, as root, over a TAP device in a network namespace the
//! test creates and deletes.

use ebb_bench::linux_guest::{self, default_cache_dir, probe, GuestSettings};
use ebb_bench::netns::{can_use_tap, NetNamespace, TapConfig, TapDevice};

#[test]
fn stock_memcached_answers_in_the_linux_guest() {
    let built = linux_guest::build_or_reuse(&default_cache_dir(), false).expect("guest image");
    let manifest = std::fs::read_to_string(&built.image.manifest).expect("manifest");
    assert!(manifest.contains("package memcached "), "{manifest}");
    assert!(manifest.contains(" virtio_net\n"), "{manifest}");
    let settings = GuestSettings::default();

    let guest = linux_guest::boot_user(&built.image, &settings).expect("user boot");
    assert!(guest.answer.starts_with("1."), "{}", guest.answer);
    probe::set_and_get(guest.server(), "ebb-test", "over-user-net").expect("set/get");
    drop(guest);

    if !can_use_tap() {
        eprintln!("TAP part skipped: needs root and /dev/net/tun");
        return;
    }
    let namespace = NetNamespace::create("guest-test").expect("namespace");
    let name = namespace.name().to_owned();
    {
        let tap = TapDevice::create(&namespace, &TapConfig::new(linux_guest::qemu::GUEST_MAC))
            .expect("tap");
        let guest =
            linux_guest::boot_tap(&built.image, &settings, &namespace, &tap).expect("tap boot");
        let server = guest.server();
        namespace
            .run_inside(|| probe::set_and_get(server, "ebb-test", "over-tap"))
            .expect("inside")
            .expect("set/get in the namespace");
        // The guest's address is not reachable from outside the namespace.
        assert!(probe::version(server).is_err());
    }
    drop(namespace);
    assert!(!std::path::Path::new("/run/netns").join(name).exists());
}
