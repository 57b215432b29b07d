//! A Linux guest for comparison: Debian's cloud kernel and an initramfs with
//! stock memcached and stock Redis (Debian 12's 7.0.15), booted under QEMU
//! on the same virtual hardware as Ebbflow's native memcached and Redis
//! (q35, `virtio-net-pci,disable-legacy=on`, the same memory and vCPUs;
//! memcached with the same `-m` and `-c`, Redis in memory only). The kernel
//! command line picks which one it serves ([`GuestService`]).
//!
//! - [`image`] builds it from Debian packages ([`debian`]: `apt-get
//!   download`, never installed on the host), resolving memcached's and
//!   Redis's shared libraries with the packages' own loader ([`libs`]) and
//!   virtio-net's modules from their `.modinfo` ([`modules`]); [`cpio`]
//!   writes the initramfs, [`init`] its `/init`. Cached under
//!   `target/linux-guest/`.
//! - [`overlay`] adds Ebbflow's hosted netpipe binary (or another hosted
//!   program with its start script) to a copy of the initrd, so the guest
//!   can serve netpipe (or run that program) instead.
//! - [`qemu`] boots it; [`boot_user`] and [`boot_tap`] return a guest whose
//!   service has answered ([`probe`]), over user networking, over a TAP
//!   device in a network namespace ([`crate::netns`], [`crate::tap`]), or
//!   as a node on a cluster's bridge ([`boot_on_link`]).

pub mod cpio;
pub mod debian;
pub mod image;
pub mod init;
pub mod libs;
pub mod modules;
pub mod overlay;
pub mod probe;
pub mod qemu;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use crate::cluster_net::NodeLink;
use crate::free_port;
use crate::netns::NetNamespace;
use crate::qemu::{measure_tsc_khz, shell_words};
use crate::tap::TapDevice;
pub use image::{build_or_reuse, default_cache_dir, Built, GuestImage};
pub use init::{
    GuestAddress, GuestService, MemcachedSettings, RedisSettings, MEMCACHED_PORT, NETPIPE_PORTS,
    PROGRAM_BINARY, REDIS_PORT,
};
pub use overlay::{with_batch, with_netpipe, with_program};
use qemu::{qemu_command, BootSettings, GuestNetwork, RunningGuest, GUEST_MAC};

/// How to boot the guest, whatever the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestSettings {
    /// Guest memory in QEMU's `-m` syntax.
    pub memory: String,
    /// vCPUs.
    pub cpus: u16,
    /// What the guest serves.
    pub service: GuestService,
    /// Seconds before QEMU is stopped whatever happens.
    pub timeout_secs: u64,
    /// How long to wait for the service to answer after QEMU starts.
    pub ready_limit: Duration,
    /// Pin QEMU to these host CPUs (`taskset -c LIST`), if set.
    pub pin_cpus: Option<String>,
    /// Words before QEMU's `timeout` that set its priority (`nice -n -10`).
    pub priority: Vec<String>,
    /// QEMU's accelerator: `tcg` (QEMU-NOTES: no usable KVM here) or `kvm`.
    pub accel: String,
    /// More QEMU arguments, last on its command line (e.g. a TCG plugin).
    pub qemu_args: Vec<String>,
}

impl Default for GuestSettings {
    /// 512 MiB and one vCPU as Ebbflow's guest, memcached with its
    /// defaults, QEMU stopped after 10 minutes, 90 s to become ready under
    /// TCG on a busy machine.
    fn default() -> Self {
        GuestSettings {
            memory: "512M".to_owned(),
            cpus: 1,
            service: GuestService::Memcached(MemcachedSettings::default()),
            timeout_secs: 600,
            ready_limit: Duration::from_secs(90),
            pin_cpus: None,
            priority: Vec::new(),
            accel: "tcg".to_owned(),
            qemu_args: Vec::new(),
        }
    }
}

/// A booted guest whose service answered.
pub struct ReadyGuest {
    /// The QEMU process (stopped on drop).
    pub qemu: RunningGuest,
    /// Where the service's ports answer, in the order of
    /// [`GuestService::ports`] (inside the namespace for TAP).
    pub addresses: Vec<SocketAddr>,
    /// The service's first answer: memcached's version, `redis PONG`, or
    /// `netpipe`.
    pub answer: String,
    /// From QEMU's start to the ready marker on the serial console.
    pub boot_to_marker: Duration,
    /// From QEMU's start to the service's first reply.
    pub boot_to_ready: Duration,
    /// The QEMU command line.
    pub command: String,
}

impl ReadyGuest {
    /// The address of the service's first port (memcached's, Redis's, or
    /// netpipe's ping-pong).
    pub fn server(&self) -> SocketAddr {
        self.addresses[0]
    }
}

/// Boots `image` with user networking; each service port is forwarded from
/// a free port on 127.0.0.1.
pub fn boot_user(image: &GuestImage, settings: &GuestSettings) -> Result<ReadyGuest, String> {
    let cmdline = init::kernel_cmdline(
        &GuestAddress::USER_NETWORKING,
        &settings.service,
        measure_tsc_khz(),
    );
    let forwards = settings
        .service
        .ports()
        .iter()
        .map(|&guest| free_port().map(|host| (host, guest)))
        .collect::<Result<Vec<_>, _>>()?;
    let addresses = forwards
        .iter()
        .map(|&(host, _)| SocketAddr::from((Ipv4Addr::LOCALHOST, host)))
        .collect();
    let boot = boot_settings(settings, cmdline, GuestNetwork::User { forwards }, None);
    start_and_wait(image, &boot, settings, addresses, wait_for_service)
}

/// Boots `image` on `tap` inside `namespace` (QEMU runs there too); the
/// service answers at the guest's address from inside the namespace.
pub fn boot_tap(
    image: &GuestImage,
    settings: &GuestSettings,
    namespace: &NetNamespace,
    tap: &TapDevice,
) -> Result<ReadyGuest, String> {
    let guest = tap
        .guest()
        .ok_or_else(|| format!("TAP {} has no guest neighbour entry", tap.ifname()))?;
    let address = GuestAddress {
        address: guest,
        netmask: Ipv4Addr::new(255, 255, 255, 0),
        gateway: Some(tap.host()),
    };
    boot_in_namespace(image, settings, namespace, tap.ifname(), GUEST_MAC, address)
}

/// Boots `image` as a node of a cluster network
/// ([`crate::cluster_net::ClusterNetwork::add_node`]): on the node's TAP
/// device on the bridge, with its address and MAC, the frontend as its
/// gateway; the service answers at that address from inside `namespace`.
pub fn boot_on_link(
    image: &GuestImage,
    settings: &GuestSettings,
    namespace: &NetNamespace,
    link: &NodeLink,
) -> Result<ReadyGuest, String> {
    let netmask = u32::MAX
        .checked_shl(32 - u32::from(link.prefix_len))
        .unwrap_or(0);
    let address = GuestAddress {
        address: link.address,
        netmask: Ipv4Addr::from(netmask),
        gateway: Some(link.frontend),
    };
    boot_in_namespace(image, settings, namespace, &link.tap, &link.mac, address)
}

fn boot_in_namespace(
    image: &GuestImage,
    settings: &GuestSettings,
    namespace: &NetNamespace,
    ifname: &str,
    mac: &str,
    address: GuestAddress,
) -> Result<ReadyGuest, String> {
    let cmdline = init::kernel_cmdline(&address, &settings.service, measure_tsc_khz());
    let network = GuestNetwork::Tap {
        ifname: ifname.to_owned(),
        queues: 1,
    };
    let mut boot = boot_settings(
        settings,
        cmdline,
        network,
        Some(namespace.name().to_owned()),
    );
    mac.clone_into(&mut boot.mac);
    let addresses = settings
        .service
        .ports()
        .iter()
        .map(|&port| SocketAddr::from((address.address, port)))
        .collect();
    start_and_wait(
        image,
        &boot,
        settings,
        addresses,
        |service, server, limit| {
            namespace.run_inside(|| wait_for_service(service, server, limit))?
        },
    )
}

/// Boots `image` (made by [`with_batch`]) to run its batch script once,
/// with user networking and nothing forwarded: the console lines between
/// the ready marker and the end of the batch, after `settings.ready_limit`
/// to boot and `limit` to run. An error names a script that exited
/// non-zero, with the last lines.
pub fn run_batch(
    image: &GuestImage,
    settings: &GuestSettings,
    limit: Duration,
) -> Result<Vec<String>, String> {
    let cmdline = init::kernel_cmdline(
        &GuestAddress::USER_NETWORKING,
        &GuestService::Batch,
        measure_tsc_khz(),
    );
    let network = GuestNetwork::User {
        forwards: Vec::new(),
    };
    let boot = boot_settings(settings, cmdline, network, None);
    let mut qemu = RunningGuest::spawn(qemu_command(image, &boot))?;
    qemu.wait_ready(settings.ready_limit)?;
    let mut lines = qemu.lines_until(init::BATCH_DONE_MARKER, limit)?;
    let done = lines.pop().unwrap_or_default();
    let status = done
        .split(init::BATCH_DONE_MARKER)
        .nth(1)
        .map_or("", str::trim);
    if status != "0" {
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        return Err(format!(
            "the guest's batch exited with status {status}:\n{tail}"
        ));
    }
    Ok(lines)
}

/// Waits until the service at `server` gives a real answer.
fn wait_for_service(
    service: &GuestService,
    server: SocketAddr,
    limit: Duration,
) -> Result<String, String> {
    match service {
        GuestService::Memcached(_) => probe::wait_for_version(server, limit),
        GuestService::Redis(_) => probe::wait_for_redis_ping(server, limit),
        GuestService::Netpipe | GuestService::Program { .. } => {
            probe::wait_for_accept(server, limit)
        }
        GuestService::Batch => {
            Err("a batch guest serves nothing: run it with run_batch".to_owned())
        }
    }
}

fn boot_settings(
    settings: &GuestSettings,
    cmdline: String,
    network: GuestNetwork,
    namespace: Option<String>,
) -> BootSettings {
    let mut boot = BootSettings::new(cmdline, network);
    boot.memory.clone_from(&settings.memory);
    boot.cpus = settings.cpus;
    boot.timeout_secs = settings.timeout_secs;
    boot.namespace = namespace;
    boot.pin_cpus.clone_from(&settings.pin_cpus);
    boot.priority.clone_from(&settings.priority);
    boot.accel.clone_from(&settings.accel);
    boot.qemu_args.clone_from(&settings.qemu_args);
    boot
}

/// Starts QEMU, waits for the serial marker, then for `ask` to get an
/// answer from the service's first address.
fn start_and_wait(
    image: &GuestImage,
    boot: &BootSettings,
    settings: &GuestSettings,
    addresses: Vec<SocketAddr>,
    ask: impl FnOnce(&GuestService, SocketAddr, Duration) -> Result<String, String>,
) -> Result<ReadyGuest, String> {
    let Some(&first) = addresses.first() else {
        return Err("this guest serves no port (a batch guest runs with run_batch)".to_owned());
    };
    let command = qemu_command(image, boot);
    let shown = shell_words(&command);
    let start = Instant::now();
    let mut qemu = RunningGuest::spawn(command)?;
    let boot_to_marker = qemu.wait_ready(settings.ready_limit)?;
    let left = settings.ready_limit.saturating_sub(start.elapsed());
    let answer = ask(&settings.service, first, left.max(Duration::from_secs(5)))
        .map_err(|e| format!("{e}\n--- last serial lines ---\n{}", qemu.serial_tail(20)))?;
    Ok(ReadyGuest {
        boot_to_ready: qemu.uptime(),
        qemu,
        addresses,
        answer,
        boot_to_marker,
        command: shown,
    })
}
