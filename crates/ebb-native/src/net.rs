//! The network on native cores: `ebb-netstack`'s [`Stack`] over the
//! virtio-net device, installed as core 0's `NetStack` (the `NETWORK`
//! Ebb) when the node starts, so applications written against `ebb-net`
//! run unchanged. The same shape as `ebb-userstack`'s driver: frames are
//! processed run-to-completion when the device interrupts (or from an idle
//! handler with `net=poll-…`), and one core timer follows the stack's
//! `poll_at`. By default polling is adaptive (`virtio::adaptive`): above
//! `poll_above` packets/s the receive interrupt is masked and an idle
//! handler polls, below `poll_below` interrupts come back (`net=irq-…`
//! keeps interrupts). Other cores get a stack that refuses (one queue
//! pair, one core). With `verbose`, [`report`] prints the negotiated
//! features and the per-queue counters when the node ends.

use alloc::boxed::Box;
use alloc::rc::{Rc, Weak};
use core::cell::{Cell, RefCell};
use core::net::{Ipv4Addr, SocketAddr};
use core::time::Duration;

use ebb_event::{now, IdleId};
use ebb_net::{
    AcceptFn, NetError, NetStack, TcpConnection, TcpHandler, UdpHandler, UdpSocket, NETWORK,
};
use ebb_netstack::poll_timer::PollTimer;
use ebb_netstack::{Config, IpConfig, Stack};

use crate::abi::NetMode;
use crate::cpu_features::{CpuFeatures, HardwareCpuid};
use crate::virtio::adaptive::{Adaptive, Mode, Thresholds};
use crate::virtio::net::{QueueStats, VirtioNet, DEVICE, FEATURE_NAMES, VENDOR};
use crate::{apic, msix, pci_ecam};

/// QEMU user networking's addresses (its built-in DHCP server hands out
/// the same): the guest, its prefix, the gateway.
const GUEST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
const PREFIX: u8 = 24;
const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
/// How soon to poll again while frames wait for transmit room: a few
/// full-size frames' time on a 1 Gb/s wire (12 µs each).
const TX_RETRY: Duration = Duration::from_micros(50);

/// Core 0's stack over the device.
pub struct NativeNet {
    stack: Stack<VirtioNet>,
    dhcp: bool,
    timer: PollTimer,
    reschedule_queued: Cell<bool>,
    reported: Cell<Option<IpConfig>>,
    /// Adaptive polling's state; `None` with a forced mode.
    adaptive: Option<RefCell<Adaptive>>,
    /// The idle handler that polls while in polling mode.
    idle: Cell<Option<IdleId>>,
    /// Frames after which to reset the device once (`virtio_reset_after`).
    reset_after: Cell<Option<u64>>,
}

impl NativeNet {
    /// Processes received frames and due timers, then re-arms the timer.
    pub fn poll(self: &Rc<Self>) {
        self.stack.poll(now());
        self.report_address();
        self.reset_if_asked();
        self.schedule();
    }

    /// Polls after an interrupt (or from the idle handler), then lets
    /// adaptive polling look at the rate.
    fn poll_and_adapt(self: &Rc<Self>) {
        self.poll();
        let Some(adaptive) = &self.adaptive else {
            return;
        };
        let packets = self.stack.with_device(|device| device.stats().0.packets);
        let change = adaptive.borrow_mut().observe(now().0, packets);
        match change {
            Some(Mode::Polling) => {
                self.stack
                    .with_device(|device| device.set_rx_interrupts(false));
                let weak = Rc::downgrade(self);
                let id = ebb_event::add_idle_handler(move || {
                    if let Some(net) = weak.upgrade() {
                        net.poll_and_adapt();
                    }
                });
                self.idle.set(Some(id));
            }
            Some(Mode::Interrupts) => {
                if let Some(id) = self.idle.take() {
                    ebb_event::remove_idle_handler(id);
                }
                // Frames that came while masked raise no interrupt: poll
                // for them now (the lost-wakeup check).
                if self
                    .stack
                    .with_device(|device| device.set_rx_interrupts(true))
                {
                    let weak = Rc::downgrade(self);
                    ebb_event::spawn(move || {
                        if let Some(net) = weak.upgrade() {
                            net.poll_and_adapt();
                        }
                    });
                }
            }
            None => {}
        }
    }

    /// The test hook `virtio_reset_after=N`: resets the device once after
    /// N received frames, in the middle of whatever traffic there is.
    fn reset_if_asked(&self) {
        let Some(after) = self.reset_after.get() else {
            return;
        };
        let (rx, _) = self.stats();
        if rx.packets < after {
            return;
        }
        self.reset_after.set(None);
        match self.stack.with_device(VirtioNet::reset) {
            Ok(()) => crate::println!(
                "ebbflow native: virtio-net reset after {} frames received",
                rx.packets
            ),
            Err(error) => crate::println!("ebbflow native: virtio-net reset failed: {error}"),
        }
    }

    /// The device's receive and transmit counters.
    pub fn stats(&self) -> (QueueStats, QueueStats) {
        self.stack.with_device(|device| device.stats())
    }

    fn schedule(self: &Rc<Self>) {
        let weak = Rc::downgrade(self);
        let mut at = self.stack.poll_at();
        if self.stack.with_device(|device| device.tx_waiting()) {
            // Frames wait for transmit room, and the transmit queue raises
            // no interrupt when the device frees it: look again soon, even
            // if nothing is received meanwhile.
            let soon = now() + TX_RETRY;
            at = Some(at.map_or(soon, |t| t.min(soon)));
        }
        self.timer.follow(at, move || {
            if let Some(net) = weak.upgrade() {
                net.timer.fired();
                net.poll();
            }
        });
    }

    fn report_address(&self) {
        let ip = self.stack.ip_config();
        if ip == self.reported.get() {
            return;
        }
        self.reported.set(ip);
        let how = if self.dhcp { "DHCP" } else { "static" };
        match ip {
            Some(ip) => crate::println!(
                "ebbflow native: virtio-net has address {}/{}{}{} ({how})",
                ip.addr,
                ip.prefix_len,
                if ip.gateway.is_some() {
                    ", gateway "
                } else {
                    ""
                },
                ip.gateway.map_or(Ipv4Addr::UNSPECIFIED, |g| g)
            ),
            None => crate::println!("ebbflow native: virtio-net lost its address ({how})"),
        }
    }
}

/// Where core 0's driver hands device interrupts.
pub type InterruptHook = Rc<RefCell<Option<Box<dyn FnMut()>>>>;

/// Core 0's driver, kept for [`report`] once the node has ended.
pub type NetSlot = Rc<RefCell<Option<Rc<NativeNet>>>>;

/// Prints the device's negotiated features and its per-queue counters (the
/// feature and counter dump tests read; `verbose`, at exit).
pub fn report(net: &NativeNet) {
    let (offered, accepted, resets) = net
        .stack
        .with_device(|device| (device.offered(), device.features(), device.resets()));
    crate::print!(
        "ebbflow native: virtio-net features offered={offered:#x} accepted={accepted:#x}:"
    );
    for (bit, name) in FEATURE_NAMES {
        if accepted & bit != 0 {
            crate::print!(" {name}");
        }
    }
    crate::println!();
    let mode = match &net.adaptive {
        Some(adaptive) => match adaptive.borrow().mode() {
            Mode::Interrupts => "adaptive (now interrupts)",
            Mode::Polling => "adaptive (now polling)",
        },
        None if net.idle.get().is_some() => "polled",
        None => "interrupts",
    };
    crate::println!("ebbflow native: virtio-net mode {mode}, resets={resets}");
    let (rx, tx) = net.stats();
    for (name, q) in [("rx0", rx), ("tx0", tx)] {
        crate::println!(
            "ebbflow native: virtio-net queue {name}: packets={} bytes={} interrupts={} polls={} mode_switches={} dropped={} backlogged={} csum_offloaded={}",
            q.packets, q.bytes, q.interrupts, q.polls, q.mode_switches, q.dropped, q.backlogged, q.csum_offloaded
        );
    }
}

/// Installs this core's `NetStack`: on core 0 the stack over the first
/// modern virtio-net function, if there is one (its interrupt handler goes
/// into `on_interrupt`); elsewhere, or without a device, a stack that
/// refuses with the reason.
pub fn install(
    core: usize,
    mode: NetMode,
    verbose: bool,
    on_interrupt: &InterruptHook,
    slot: &NetSlot,
) {
    let stack: Box<dyn NetStack> = if core == 0 {
        match start(mode, verbose, on_interrupt) {
            Ok(net) => {
                let stack = Box::new(net.stack.clone());
                *slot.borrow_mut() = Some(net);
                stack
            }
            Err(why) => Box::new(NoNet(why)),
        }
    } else {
        Box::new(NoNet(
            "the virtio-net stack runs on core 0 only (one queue pair)",
        ))
    };
    if let Err(error) = NETWORK.install(Box::leak(Box::new(stack))) {
        crate::println!("ebbflow native: cannot install the network stack on core {core}: {error}");
    }
}

fn start(
    mode: NetMode,
    verbose: bool,
    on_interrupt: &InterruptHook,
) -> Result<Rc<NativeNet>, &'static str> {
    let function = pci_ecam::functions()
        .iter()
        .find(|f| f.vendor == VENDOR && f.device == DEVICE)
        .ok_or("no virtio-net device (modern, disable-legacy=on) on PCI")?;
    let config = pci_ecam::config_space().ok_or("no PCI")?;
    let interrupts =
        !mode.poll && msix::route(function, config, 0, apic::DEVICE_VECTOR as u8, apic::id());
    let options = crate::runtime::options();
    let tx_queue = options.virtio_tx_queue.unwrap_or(256);
    // KVM's paravirtual clock stands for KVM (every KVM offers it).
    let kvm = CpuFeatures::detect(&HardwareCpuid).kvmclock;
    let mut thresholds = Thresholds::choose(kvm, options.poll_above, options.poll_below);
    if !thresholds.valid() {
        // The wrong way round, the mode would flap at every window.
        crate::println!(
            "ebbflow native: poll_below={} is not below poll_above={}: using the defaults",
            thresholds.poll_below,
            thresholds.poll_above
        );
        thresholds = Thresholds::choose(kvm, None, None);
    }
    let device = VirtioNet::with_tx_queue(function, config, interrupts.then_some(0), tx_queue)
        .map_err(|error| {
            crate::println!("ebbflow native: virtio-net at {}: {error}", function.bdf);
            "the virtio-net device could not be set up"
        })?;
    let mac = device.mac();
    if verbose {
        crate::println!(
            "ebbflow native: virtio-net at {}: MAC {mac}, features {:#x}, link {}, {}",
            function.bdf,
            device.features(),
            if device.link_up() { "up" } else { "down" },
            if interrupts {
                "MSI-X interrupts"
            } else {
                "polled"
            }
        );
        if interrupts && !mode.irq {
            crate::println!(
                "ebbflow native: virtio-net adaptive polling above {} packets/s, interrupts below {}",
                thresholds.poll_above,
                thresholds.poll_below
            );
        }
    }
    let config = if mode.dhcp {
        Config::new_dhcp(mac, crate::clock::nanos() ^ 0x9e37_79b9_7f4a_7c15)
    } else {
        Config::new_static(
            mac,
            IpConfig {
                addr: GUEST,
                prefix_len: PREFIX,
                gateway: Some(GATEWAY),
            },
        )
    };
    let net = Rc::new(NativeNet {
        stack: Stack::new(device, config, now()),
        dhcp: mode.dhcp,
        timer: PollTimer::new(),
        reschedule_queued: Cell::new(false),
        reported: Cell::new(None),
        adaptive: (interrupts && !mode.irq)
            .then(|| RefCell::new(Adaptive::new(thresholds, now().0, 0))),
        idle: Cell::new(None),
        reset_after: Cell::new(options.virtio_reset_after),
    });
    let weak = Rc::downgrade(&net);
    net.stack.with_device(|device| {
        device.set_on_transmit(Box::new(move || queue_reschedule(&weak)));
    });
    // The interrupt hook (or idle handler) keeps the driver alive for the
    // node's life; timers and the transmit hook hold weak references.
    let driver = Rc::clone(&net);
    if interrupts {
        *on_interrupt.borrow_mut() = Some(Box::new(move || {
            driver.stack.with_device(VirtioNet::count_interrupt);
            driver.poll_and_adapt();
        }));
    } else {
        let id = ebb_event::add_idle_handler(move || driver.poll());
        net.idle.set(Some(id));
    }
    net.poll();
    Ok(net)
}

/// After a send from outside `poll` (an application's event), the stack
/// may have armed a retransmission or started ARP: re-arm the timer once
/// the current event is done.
fn queue_reschedule(weak: &Weak<NativeNet>) {
    let Some(net) = weak.upgrade() else { return };
    if net.reschedule_queued.replace(true) {
        return;
    }
    let weak = Rc::downgrade(&net);
    ebb_event::spawn(move || {
        if let Some(net) = weak.upgrade() {
            net.reschedule_queued.set(false);
            net.schedule();
        }
    });
}

/// The `NetStack` of cores without the device.
struct NoNet(&'static str);

impl NetStack for NoNet {
    fn listen(&self, _: SocketAddr, _: AcceptFn) -> Result<SocketAddr, NetError> {
        Err(NetError::Unsupported(self.0))
    }

    fn connect(&self, _: SocketAddr, _: Box<dyn TcpHandler>) -> Result<TcpConnection, NetError> {
        Err(NetError::Unsupported(self.0))
    }

    fn udp_bind(&self, _: SocketAddr, _: Box<dyn UdpHandler>) -> Result<UdpSocket, NetError> {
        Err(NetError::Unsupported(self.0))
    }
}
