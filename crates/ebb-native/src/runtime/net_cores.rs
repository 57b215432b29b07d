//! One stack per core over multi-queue virtio-net (DESIGN §4, virtio 1.2
//! §5.1.6.5.5).
//!
//! * **Setup.** Core 0 sets the whole device up (every queue must exist
//!   before DRIVER_OK): MSI-X table entry `i` aimed at core `i`'s LAPIC,
//!   min(cores, max_virtqueue_pairs, MSI-X entries) queue pairs, the
//!   control queue, VQ_PAIRS_SET. It keeps pair 0 and sends pair `i` to
//!   core `i` (`spawn_on`), where it becomes that core's `Stack` (same MAC
//!   and address), `NETWORK` representative, timer and interrupt handler.
//!   The device steers each flow to the pair that last sent it, so a
//!   connection stays on the core that accepted it, run to completion
//!   there with nothing shared. Steering is not a promise (a host's tun
//!   device forgets idle flows and falls back to hashing): each stack
//!   claims its connections in one shared `FlowDirectory`
//!   (`ebb_netstack::steering`), and a segment that reaches a core without
//!   its connection is handed to the owner (a view of the receive buffer,
//!   no copy) instead of being answered with a reset.
//! * **ARP.** A reply can reach another core's queue than the one whose
//!   stack asked. After each poll a stack looks at the ARP packets it
//!   received; each sender it took into its cache (RFC 826's rules, applied
//!   by the stack itself) is sent to every other stack
//!   (`Stack::learn_neighbour`). Only the learned binding travels, not the
//!   frame: a request for our address is answered once, by the core that
//!   got it, and never re-forwarded (a learned binding is not a received
//!   packet). ARP is rare, so an event per other core is cheap.
//! * **DHCP** (`net=dhcp`) runs on core 0 only: server messages reaching
//!   another core are copied to core 0's stack, and every lease change
//!   is sent to the other stacks (`Stack::set_ip_config`).
//! * **Fewer queue pairs than cores.** The cores without one get a stack
//!   that accepts `listen` (nothing will arrive there) and refuses the rest,
//!   rather than software steering: steering would cost every packet of
//!   those cores two cross-core events (IPIs: expensive under TCG) and a
//!   shared transmit path, to run the network on more cores than the
//!   device serves. A single-queue device (QEMU user networking) is
//!   driven exactly as before: one stack on core 0, no frame inspection.
//! * **Per queue**, as with one queue: checksum offload, the transmit
//!   backlog and adaptive polling are the pair's own (each core adapts its
//!   own queue, masking only its own interrupt; mode switches are counted
//!   per queue). `virtio_reset_after=` resets single-queue devices only (a
//!   reset stops every queue; see `VirtioNet::reset`).
//! * **Counters**: each stack publishes its pair's counters after every
//!   poll; at exit [`report_queues`] prints the short per-pair lines
//!   (debug level: `-v`) and, with `verbose`, [`report`] the negotiated
//!   features, the mode and every queue's full counters.

use alloc::boxed::Box;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;
use core::net::Ipv4Addr;
use core::sync::atomic::{AtomicUsize, Ordering};

use ebb_core::{CoreId, Ebb, EbbError, EbbId, EbbRef, FaultContext};
use ebb_event::{core_count, now, spawn_on};
use ebb_iobuf::IoBuf;
use ebb_net::{NetStack, NETWORK};
use ebb_netstack::steering::{FlowDirectory, Steering};
use ebb_netstack::{Config, IpConfig, RxChecksum, Stack};
use spin::{Mutex, Once};

use crate::arch::x86_64::apic;
use crate::arch::x86_64::cpu_features::{CpuFeatures, HardwareCpuid};
use crate::drivers::pci::{ecam, msix};
use crate::drivers::virtio::net::config::DEVICE;
use crate::drivers::virtio::net::device::VirtioNet;
use crate::drivers::virtio::net::features::FEATURE_NAMES;
use crate::drivers::virtio::net::stats::QueueStats;
use crate::drivers::virtio::queue::adaptive::{Adaptive, Mode, Thresholds};
use crate::drivers::virtio::transport::pci::VENDOR;
use crate::runtime;
use crate::runtime::net::{CoreDevice, NativeNet, NoNet, NoQueue};
use ebb_boot_abi::PlatformOptions;

/// QEMU user networking's addresses (its built-in DHCP server hands out
/// the same): the guest, its prefix, the gateway. `ip=` replaces them.
const GUEST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
const PREFIX: u8 = 24;
const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// Where a core's driver hands that core's device interrupts.
pub type InterruptHook = Rc<RefCell<Option<Box<dyn FnMut()>>>>;

/// Each core's driver state: its interrupt hook and, once core 0 sent it
/// a queue pair, its stack. A per-core Ebb, so that events sent from
/// other cores find it.
struct CoreNetEbb;

struct CoreNet {
    hook: InterruptHook,
    net: RefCell<Option<Rc<NativeNet>>>,
}

impl Ebb for CoreNetEbb {
    type Rep = CoreNet;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static CoreNet, EbbError> {
        Err(EbbError::Fault {
            id: ctx.id,
            reason: "the native network driver registers each core when it starts",
        })
    }
}

// SAFETY: reserved id 8 is the native network driver's per-core state and
// is used with no other Ebb type anywhere.
const CORE_NET: EbbRef<CoreNetEbb> = unsafe { EbbRef::reserved(EbbId::reserved(8)) };

/// How many cores have a stack over a queue pair (cores `0..STACKS`).
static STACKS: AtomicUsize = AtomicUsize::new(0);
/// The address core 0's DHCP client holds (`net=dhcp`).
static LEASE: Mutex<Option<IpConfig>> = Mutex::new(None);
/// Which core owns each TCP connection, shared by the stacks (more than
/// one stack only).
static DIRECTORY: Once<FlowDirectory> = Once::new();
/// Connections the directory has room for (it rounds up, twice over).
const DIRECTORY_FLOWS: usize = 4096;
/// Each queue pair's counters, as its core last published them.
static PUBLISHED: Once<Box<[Mutex<Published>]>> = Once::new();
/// The device's offered and accepted features, for the dump at exit.
static FEATURES: Once<(u64, u64)> = Once::new();
/// The transmit ring size when `virtio_tx_queue=` does not say.
const TX_QUEUE: u16 = 256;

/// What a core last published of its queue pair. Written by that core
/// after each poll (uncontended), read at exit.
#[derive(Default)]
struct Published {
    rx: QueueStats,
    tx: QueueStats,
    /// Adaptive polling's mode (`None`: forced).
    mode: Option<Mode>,
    /// Polled by an idle handler (`net=poll-…`, or adaptive polling).
    polled: bool,
    resets: u64,
}

/// What every core's stack is built with.
#[derive(Clone, Copy)]
struct Setup {
    dhcp: bool,
    ip: IpConfig,
    /// More than one stack: frames are inspected for ARP and DHCP.
    shared: bool,
    interrupts: bool,
    /// Adaptive polling's thresholds, unless interrupts are forced (or
    /// there are none).
    adaptive: Option<Thresholds>,
    reset_after: Option<u64>,
}

/// Starts the network on this core (each core's first event): registers
/// the core's interrupt hook; core 0 then sets the device up and gives
/// every core its stack (a queue pair's, one that refuses, or one that has
/// no queue), the other cores wait for it.
pub fn install(core: usize, options: &PlatformOptions, hook: &InterruptHook) {
    let state: &'static CoreNet = Box::leak(Box::new(CoreNet {
        hook: Rc::clone(hook),
        net: RefCell::new(None),
    }));
    if let Err(error) = CORE_NET.install(state) {
        log::error!("core {core} cannot register its network driver: {error}");
    }
    if core == 0 {
        start(options);
    }
}

fn start(options: &PlatformOptions) {
    let cores = core_count();
    let (pairs, interrupts) = match open(options, cores) {
        Ok(opened) => opened,
        Err(why) => {
            for core in 1..cores {
                send(core, move || install_stack(Box::new(NoNet(why))));
            }
            install_stack(Box::new(NoNet(why)));
            return;
        }
    };
    let count = pairs.len();
    STACKS.store(count, Ordering::Relaxed);
    if count > 1 {
        let seed = crate::arch::x86_64::clock::nanos() ^ 0x2545_f491_4f6c_dd1d;
        DIRECTORY.call_once(|| FlowDirectory::new(DIRECTORY_FLOWS, seed));
    }
    PUBLISHED.call_once(|| (0..count).map(|_| Mutex::default()).collect());
    let ip = match options.ip {
        Some(ip) => IpConfig {
            addr: ip.addr,
            prefix_len: ip.prefix_len,
            gateway: ip.gateway,
        },
        None => IpConfig {
            addr: GUEST,
            prefix_len: PREFIX,
            gateway: Some(GATEWAY),
        },
    };
    let setup = Setup {
        dhcp: options.net.dhcp,
        ip,
        shared: count > 1,
        interrupts,
        adaptive: (interrupts && !options.net.irq).then(|| thresholds(options)),
        reset_after: options.virtio_reset_after,
    };
    let mut pairs = pairs.into_iter();
    let first = pairs.next();
    for (core, nic) in (1..).zip(pairs) {
        send(core, move || start_pair(nic, setup));
    }
    for core in count..cores {
        send(core, || install_stack(Box::new(NoQueue)));
    }
    if let Some(nic) = first {
        start_pair(nic, setup);
    }
}

/// Finds the device and sets up its queue pairs: one per core, limited by
/// the device and by the MSI-X entries that could be aimed at the cores.
fn open(options: &PlatformOptions, cores: usize) -> Result<(Vec<VirtioNet>, bool), &'static str> {
    let function = ecam::functions()
        .iter()
        .find(|f| f.vendor == VENDOR && f.device == DEVICE)
        .ok_or("no virtio-net device (modern, disable-legacy=on) on PCI")?;
    let config = ecam::config_space().ok_or("no PCI")?;
    let wanted = u16::try_from(cores).unwrap_or(u16::MAX);
    let routed = if options.net.poll {
        0
    } else {
        (0..wanted)
            .take_while(|&entry| {
                runtime::apic_id(usize::from(entry)).is_some_and(|apic_id| {
                    msix::route(function, config, entry, apic::DEVICE_VECTOR as u8, apic_id)
                })
            })
            .count()
    };
    let interrupts = routed > 0;
    let wanted = if interrupts {
        u16::try_from(routed).unwrap_or(wanted)
    } else {
        wanted
    };
    let tx_queue = options.virtio_tx_queue.unwrap_or(TX_QUEUE);
    let pairs = VirtioNet::open(
        function,
        config,
        wanted,
        |pair| interrupts.then_some(pair),
        tx_queue,
    )
    .map_err(|error| {
        log::error!("virtio-net at {}: {error}", function.bdf);
        "the virtio-net device could not be set up"
    })?;
    FEATURES.call_once(|| (pairs[0].offered(), pairs[0].features()));
    if log::log_enabled!(log::Level::Debug) {
        let device = &pairs[0];
        log::debug!(
            "virtio-net at {}: MAC {}, features {:#x}, link {}, {}",
            function.bdf,
            device.mac(),
            device.features(),
            if device.link_up() { "up" } else { "down" },
            if interrupts {
                "MSI-X interrupts"
            } else {
                "polled"
            }
        );
        if cores > 1 {
            log::debug!(
                "virtio-net: {} queue pair{} for {cores} cores{}",
                pairs.len(),
                if pairs.len() == 1 { "" } else { "s" },
                if interrupts {
                    " (MSI-X entry i to core i)"
                } else {
                    ""
                }
            );
        }
        if interrupts && !options.net.irq {
            let thresholds = thresholds(options);
            log::debug!(
                "virtio-net adaptive polling above {} packets/s, interrupts below {}{}",
                thresholds.poll_above,
                thresholds.poll_below,
                if pairs.len() > 1 { " (per queue)" } else { "" }
            );
        }
    }
    Ok((pairs, interrupts))
}

/// Adaptive polling's thresholds: `poll_above=`/`poll_below=`, else the
/// defaults for the hypervisor.
fn thresholds(options: &PlatformOptions) -> Thresholds {
    // KVM's paravirtual clock stands for KVM (every KVM offers it).
    let kvm = CpuFeatures::detect(&HardwareCpuid).kvmclock;
    let thresholds = Thresholds::choose(kvm, options.poll_above, options.poll_below);
    if thresholds.valid() {
        return thresholds;
    }
    // The wrong way round, the mode would flap at every window.
    static WARNED: Once<()> = Once::new();
    WARNED.call_once(|| {
        crate::println!(
            "ebbflow native: poll_below={} is not below poll_above={}: using the defaults",
            thresholds.poll_below,
            thresholds.poll_above
        );
    });
    Thresholds::choose(kvm, None, None)
}

/// Builds this core's stack over `nic` and installs it.
fn start_pair(nic: VirtioNet, setup: Setup) {
    let queue = nic.pair_index();
    let core0 = queue == 0;
    let mac = nic.mac();
    let runs_dhcp = setup.dhcp && core0;
    let mut config = if runs_dhcp {
        Config::new_dhcp(
            mac,
            crate::arch::x86_64::clock::nanos() ^ 0x9e37_79b9_7f4a_7c15,
        )
    } else {
        Config::new_static(mac, setup.ip)
    };
    config.tcp.core = CoreId(usize::from(queue));
    let device = CoreDevice::new(nic, setup.shared, setup.dhcp && !core0);
    let stack = Stack::new(device, config, now());
    // Sends from timer events after a halt are stamped with the time now.
    stack.set_clock(now);
    if let Some(directory) = DIRECTORY.get().filter(|_| setup.shared) {
        stack.set_steering(Rc::new(Forwarder(directory)));
    }
    if setup.dhcp && !core0 {
        // Core 0's lease, whenever it comes (`lease_changed`).
        stack.set_ip_config(*LEASE.lock());
    }
    let adaptive = setup
        .adaptive
        .map(|thresholds| Adaptive::new(thresholds, now().0, 0));
    let net = NativeNet::new(
        stack.clone(),
        queue,
        core0,
        runs_dhcp,
        adaptive,
        // Asked of pair 0 only: a reset concerns the whole device (and
        // is refused with several pairs, once).
        setup.reset_after.filter(|_| core0),
    );
    install_stack(Box::new(stack));
    let Ok(state) = CORE_NET.get() else {
        log::error!("core {queue} has no network driver state");
        return;
    };
    *state.net.borrow_mut() = Some(Rc::clone(&net));
    // The interrupt hook (or idle handler) keeps the driver alive for the
    // node's life; timers and the transmit hook hold weak references.
    let driver = Rc::clone(&net);
    if setup.interrupts {
        *state.hook.borrow_mut() = Some(Box::new(move || {
            driver.count_interrupt();
            driver.poll_and_adapt();
        }));
    } else {
        let id = ebb_event::add_idle_handler(move || driver.poll());
        net.idle.set(Some(id));
    }
    net.poll();
}

/// Installs this core's `NETWORK` representative.
fn install_stack(stack: Box<dyn NetStack>) {
    if let Err(error) = NETWORK.install(Box::leak(Box::new(stack))) {
        log::error!(
            "cannot install the network stack on core {}: {error}",
            ebb_event::current_core().0
        );
    }
}

/// Runs `f` on `core`, reporting (not panicking) if it cannot be sent.
fn send(core: usize, f: impl FnOnce() + Send + 'static) {
    if let Err(error) = spawn_on(CoreId(core), f) {
        log::error!("cannot reach core {core} for the network: {error}");
    }
}

/// Hands segments for another core's connection to that core.
struct Forwarder(&'static FlowDirectory);

impl Steering for Forwarder {
    fn directory(&self) -> &FlowDirectory {
        self.0
    }

    fn forward(&self, core: CoreId, frame: &IoBuf) {
        // A view of the receive buffer, which goes back to this core's
        // pool when the owner is done with it. This stack forwards a
        // segment only after its checksum passed (or the device vouched
        // for it), so the owner need not verify it again.
        let frame = frame.clone();
        send(core.0, move || {
            with_net(|owner| {
                owner
                    .stack
                    .with_device(|device| device.inject(frame, RxChecksum::Verified));
                owner.poll();
            });
        });
    }
}

/// Runs `f` with this core's stack, if it has one.
fn with_net(f: impl FnOnce(&Rc<NativeNet>)) {
    let net = CORE_NET
        .get()
        .ok()
        .and_then(|state| state.net.borrow().clone());
    if let Some(net) = net {
        f(&net);
    }
}

/// After `net`'s poll: tells the other stacks the neighbours it learned and
/// hands DHCP messages to core 0.
pub(crate) fn share(net: &Rc<NativeNet>) {
    let stacks = STACKS.load(Ordering::Relaxed);
    if stacks < 2 {
        return;
    }
    let (senders, dhcp) = net.stack.with_device(CoreDevice::take_shared);
    let here = usize::from(net.queue);
    for (ip, mac) in senders {
        // Only what this stack took (RFC 826: a reply or request for us,
        // or a refresh of a known neighbour).
        if net.stack.arp_lookup(ip) != Some(mac) {
            continue;
        }
        for core in (0..stacks).filter(|&core| core != here) {
            send(core, move || {
                with_net(|other| {
                    other.stack.learn_neighbour(ip, mac, now());
                    other.schedule();
                });
            });
        }
    }
    for (frame, checksum) in dhcp {
        send(0, move || {
            with_net(|core0| {
                core0
                    .stack
                    .with_device(|device| device.inject(frame, checksum));
                core0.poll();
            });
        });
    }
}

/// Core 0's DHCP lease changed: every other stack takes the new address.
pub(crate) fn lease_changed(ip: Option<IpConfig>) {
    *LEASE.lock() = ip;
    for core in 1..STACKS.load(Ordering::Relaxed) {
        send(core, move || with_net(|net| net.stack.set_ip_config(ip)));
    }
}

/// Publishes `net`'s queue pair counters and mode (after each poll, by
/// its core).
pub(crate) fn publish(net: &NativeNet) {
    let Some(slot) = PUBLISHED
        .get()
        .and_then(|all| all.get(usize::from(net.queue)))
    else {
        return;
    };
    let (rx, tx) = net.stats();
    let resets = net.stack.with_device(|device| device.nic().resets());
    // Locked by the one core that owns the pair, and at exit.
    *slot.lock() = Published {
        rx,
        tx,
        mode: net.adaptive_mode(),
        polled: net.idle.get().is_some(),
        resets,
    };
}

/// Prints every queue pair's counters at the debug level (`-v`), one
/// line each, without the logger's prefix so that the line reads the same
/// to every tool: `virtio-net queue N: rx_packets=.. tx_packets=..
/// interrupts=.. ...`.
pub fn report_queues() {
    let Some(all) = PUBLISHED.get() else { return };
    if !log::log_enabled!(log::Level::Debug) {
        return;
    }
    for (queue, q) in all.iter().enumerate() {
        let q = q.lock();
        crate::println!(
            "virtio-net queue {queue}: rx_packets={} tx_packets={} interrupts={} rx_bytes={} tx_bytes={} dropped={}",
            q.rx.packets,
            q.tx.packets,
            q.rx.interrupts,
            q.rx.bytes,
            q.tx.bytes,
            q.rx.dropped + q.tx.dropped,
        );
    }
}

/// Prints the device's negotiated features, each queue's mode and the
/// device resets, and every queue's full counters (`rxN`/`txN`, N the
/// pair): the feature and counter dump (`verbose`, at exit).
pub fn report() {
    let (Some(&(offered, accepted)), Some(all)) = (FEATURES.get(), PUBLISHED.get()) else {
        return;
    };
    crate::print!(
        "ebbflow native: virtio-net features offered={offered:#x} accepted={accepted:#x}:"
    );
    for (bit, name) in FEATURE_NAMES {
        if accepted & bit != 0 {
            crate::print!(" {name}");
        }
    }
    crate::println!();
    let resets: u64 = all.iter().map(|q| q.lock().resets).sum();
    let modes: Vec<&str> = all
        .iter()
        .map(|q| {
            let q = q.lock();
            match q.mode {
                Some(Mode::Interrupts) => "interrupts",
                Some(Mode::Polling) => "polling",
                None if q.polled => "polled",
                None => "interrupts",
            }
        })
        .collect();
    let adaptive = all.iter().any(|q| q.lock().mode.is_some());
    let mode = match (adaptive, modes.as_slice()) {
        (true, [one]) => alloc::format!("adaptive (now {one})"),
        (true, many) => alloc::format!("adaptive per queue (now {})", many.join(", ")),
        (false, [one, ..]) => alloc::string::String::from(*one),
        (false, []) => alloc::string::String::from("none"),
    };
    crate::println!("ebbflow native: virtio-net mode {mode}, resets={resets}");
    for (pair, q) in all.iter().enumerate() {
        let q = q.lock();
        for (direction, stats) in [("rx", q.rx), ("tx", q.tx)] {
            crate::println!(
                "ebbflow native: virtio-net queue {direction}{pair}: packets={} bytes={} interrupts={} polls={} mode_switches={} dropped={} backlogged={} csum_offloaded={} notifications={} suppressed={} copied={}",
                stats.packets,
                stats.bytes,
                stats.interrupts,
                stats.polls,
                stats.mode_switches,
                stats.dropped,
                stats.backlogged,
                stats.csum_offloaded,
                stats.notifications,
                stats.notifications_suppressed,
                stats.copied
            );
        }
    }
}
