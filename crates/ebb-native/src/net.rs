//! The network on native cores: `ebb-netstack`'s [`Stack`] over the
//! virtio-net device, installed as core 0's `NetStack` (the `NETWORK`
//! Ebb) when the node starts, so applications written against `ebb-net`
//! run unchanged. The same shape as `ebb-userstack`'s driver: frames are
//! processed run-to-completion when the device interrupts (or from an idle
//! handler with `net=poll-…`), and one core timer follows the stack's
//! `poll_at`. Other cores get a stack that refuses (one queue pair, one
//! core).

use alloc::boxed::Box;
use alloc::rc::{Rc, Weak};
use core::cell::{Cell, RefCell};
use core::net::{Ipv4Addr, SocketAddr};

use ebb_event::now;
use ebb_net::{
    AcceptFn, NetError, NetStack, TcpConnection, TcpHandler, UdpHandler, UdpSocket, NETWORK,
};
use ebb_netstack::poll_timer::PollTimer;
use ebb_netstack::{Config, IpConfig, Stack};

use crate::abi::NetMode;
use crate::virtio::net::{QueueStats, VirtioNet, DEVICE, VENDOR};
use crate::{apic, msix, pci_ecam};

/// QEMU user networking's addresses (its built-in DHCP server hands out
/// the same): the guest, its prefix, the gateway.
const GUEST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
const PREFIX: u8 = 24;
const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// Core 0's stack over the device.
pub struct NativeNet {
    stack: Stack<VirtioNet>,
    dhcp: bool,
    timer: PollTimer,
    reschedule_queued: Cell<bool>,
    reported: Cell<Option<IpConfig>>,
}

impl NativeNet {
    /// Processes received frames and due timers, then re-arms the timer.
    pub fn poll(self: &Rc<Self>) {
        self.stack.poll(now());
        self.report_address();
        self.schedule();
    }

    /// The device's receive and transmit counters.
    pub fn stats(&self) -> (QueueStats, QueueStats) {
        self.stack.with_device(|device| device.stats())
    }

    fn schedule(self: &Rc<Self>) {
        let weak = Rc::downgrade(self);
        self.timer.follow(self.stack.poll_at(), move || {
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

/// Installs this core's `NetStack`: on core 0 the stack over the first
/// modern virtio-net function, if there is one (its interrupt handler goes
/// into `on_interrupt`); elsewhere, or without a device, a stack that
/// refuses with the reason.
pub fn install(core: usize, mode: NetMode, verbose: bool, on_interrupt: &InterruptHook) {
    let stack: Box<dyn NetStack> = if core == 0 {
        match start(mode, verbose, on_interrupt) {
            Ok(net) => Box::new(net.stack.clone()),
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
    let device = VirtioNet::new(function, config, interrupts.then_some(0)).map_err(|error| {
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
    }
    let config = if mode.dhcp {
        Config::new_dhcp(mac, crate::clock::nanos() ^ 0x9e37_79b9_7f4a_7c15)
    } else {
        // `ip=` (a TAP link) or QEMU user networking's fixed address.
        let ip = mode.ip.map_or(
            IpConfig {
                addr: GUEST,
                prefix_len: PREFIX,
                gateway: Some(GATEWAY),
            },
            |ip| IpConfig {
                addr: ip.addr,
                prefix_len: ip.prefix_len,
                gateway: ip.gateway,
            },
        );
        Config::new_static(mac, ip)
    };
    let net = Rc::new(NativeNet {
        stack: Stack::new(device, config, now()),
        dhcp: mode.dhcp,
        timer: PollTimer::new(),
        reschedule_queued: Cell::new(false),
        reported: Cell::new(None),
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
            driver.poll();
        }));
    } else {
        ebb_event::add_idle_handler(move || driver.poll());
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
