//! The Linux comparison guest end to end: built from Debian packages (or
//! taken from the cache in target/linux-guest), booted under QEMU (TCG),
//! and stock memcached and stock Redis each answering a round trip (a
//! set/get; a SET then GET over RESP) over user networking on 127.0.0.1
//! and, as root, over a TAP device in a network namespace the test creates
//! and deletes.
//!
//! The memcached guest and the Redis guest boot side by side, each in its
//! own thread (user networking, then its own namespace), so that the Redis
//! check costs CI about one guest's boot time more, not two: two 1-vCPU
//! TCG guests share the two host cores.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ebb_testbed::linux_guest::{
    self, default_cache_dir, probe, GuestImage, GuestService, GuestSettings, MemcachedSettings,
    RedisSettings,
};
use ebb_testbed::netns::{self, NetNamespace};
use ebb_testbed::tap::{TapConfig, TapDevice};
use ebb_testbed::{function_name, require, skip, skip_unless, Need};

/// QEMU's own limit (`timeout`): a guest left behind by a failed check
/// stops by itself.
const QEMU_LIMIT_SECS: u64 = 300;
/// How long both guests' checks may take together: two boots each, at
/// most `GuestSettings::ready_limit` (90 s) apiece, and the round trips.
const CHECKS_LIMIT: Duration = Duration::from_secs(420);

/// The stock servers the guest image carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stock {
    Memcached,
    Redis,
}

impl Stock {
    fn service(self) -> GuestService {
        match self {
            Stock::Memcached => GuestService::Memcached(MemcachedSettings::default()),
            Stock::Redis => GuestService::Redis(RedisSettings::default()),
        }
    }

    /// The service's first answer must be the real server's: memcached's
    /// version (1.6.x), or Redis's PONG (and its version, 7.x).
    fn check_answer(self, server: SocketAddr, answer: &str) -> Result<(), String> {
        match self {
            Stock::Memcached if answer.starts_with("1.") => Ok(()),
            Stock::Redis if answer == "redis PONG" => {
                let version = probe::redis_version(server)?;
                if version.starts_with("7.") {
                    Ok(())
                } else {
                    Err(format!("Redis {version}, expected Debian 12's 7.0"))
                }
            }
            _ => Err(format!("{self:?} answered {answer:?}")),
        }
    }

    /// A value stored under a key reads back, on another connection.
    fn round_trip(self, server: SocketAddr, value: &str) -> Result<(), String> {
        match self {
            Stock::Memcached => probe::set_and_get(server, "ebb-test", value),
            Stock::Redis => probe::redis_set_and_get(server, "ebb-test", value),
        }
    }

    /// Whether the server answers at `server` from where this runs.
    fn answers(self, server: SocketAddr) -> Result<String, String> {
        match self {
            Stock::Memcached => probe::version(server),
            Stock::Redis => probe::redis_ping(server),
        }
    }
}

/// Boots the guest serving `stock` over user networking, then (if `tap`)
/// on a TAP device in a namespace of its own, and checks it each time.
fn check_guest(stock: Stock, image: &GuestImage, tap: bool) -> Result<(), String> {
    let settings = GuestSettings {
        service: stock.service(),
        timeout_secs: QEMU_LIMIT_SECS,
        ..GuestSettings::default()
    };

    let guest = linux_guest::boot_user(image, &settings).map_err(|e| format!("user boot: {e}"))?;
    stock.check_answer(guest.server(), &guest.answer)?;
    stock
        .round_trip(guest.server(), "over-user-net")
        .map_err(|e| format!("over user networking: {e}"))?;
    drop(guest);
    if !tap {
        return Ok(());
    }

    let namespace = NetNamespace::for_this_process("guest-test")?;
    let name = namespace.name().to_owned();
    {
        let tap = TapDevice::create(
            &namespace,
            &TapConfig::guest_link(linux_guest::qemu::GUEST_MAC),
        )?;
        let guest = linux_guest::boot_tap(image, &settings, &namespace, &tap)
            .map_err(|e| format!("TAP boot: {e}"))?;
        let server = guest.server();
        namespace
            .run_inside(|| stock.round_trip(server, "over-tap"))?
            .map_err(|e| format!("in the namespace: {e}"))?;
        // The guest's address is not reachable from outside the namespace.
        // Which error depends on the host's network: no route, a refusal,
        // a timeout, or (seen on CI hosts) a proxy that intercepts private
        // addresses and answers HTTP. Never the server's answer.
        if let Ok(answer) = stock.answers(server) {
            return Err(format!(
                "{server} answered {answer:?} from outside the namespace"
            ));
        }
    }
    drop(namespace);
    if netns::exists(&name) {
        return Err(format!("namespace {name} is left behind"));
    }
    Ok(())
}

#[test]
fn stock_memcached_and_redis_answer_in_the_linux_guest() {
    skip_unless!(Need::Qemu);
    let built = linux_guest::build_or_reuse(&default_cache_dir(), false).expect("guest image");
    let manifest = std::fs::read_to_string(&built.image.manifest).expect("manifest");
    assert!(manifest.contains("package memcached "), "{manifest}");
    assert!(manifest.contains("package redis-tools "), "{manifest}");
    assert!(manifest.contains(" virtio_net\n"), "{manifest}");

    let tap = match require(&[Need::Root, Need::Tun, Need::Ip]) {
        Ok(()) => true,
        Err(why) => {
            skip(&format!("{} (TAP half)", function_name!()), &why.reason);
            false
        }
    };
    let (done, results) = mpsc::channel();
    for stock in [Stock::Memcached, Stock::Redis] {
        let done = done.clone();
        let image = built.image.clone();
        std::thread::Builder::new()
            .name(format!("{stock:?}"))
            .spawn(move || {
                let _ = done.send((stock, check_guest(stock, &image, tap)));
            })
            .expect("a thread");
    }
    drop(done);

    let deadline = Instant::now() + CHECKS_LIMIT;
    let mut failures = Vec::new();
    for _ in 0..2 {
        match results.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((_, Ok(()))) => {}
            Ok((stock, Err(e))) => failures.push(format!("{stock:?}: {e}")),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                failures.push(format!("no result within {} s", CHECKS_LIMIT.as_secs()));
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                failures.push("a guest's thread panicked".to_owned());
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
