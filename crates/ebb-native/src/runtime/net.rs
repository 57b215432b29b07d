//! The network on native cores: `ebb-netstack`'s [`Stack`] over one
//! virtio-net queue pair per core, installed as that core's `NetStack`
//! (the `NETWORK` Ebb), so applications written against `ebb-net` run
//! unchanged. The same shape as `ebb-userstack`'s driver: frames are
//! processed run-to-completion on the core whose queue they reached, when
//! the device interrupts it (or from an idle handler with `net=poll-…`),
//! and one core timer per stack follows the stack's `poll_at`. By default
//! polling is adaptive (`virtio::adaptive`), each core for its own queue:
//! above `poll_above` packets/s its receive interrupt is masked and an
//! idle handler polls, below `poll_below` interrupts come back (`net=irq-…`
//! keeps interrupts). How the queue pairs are set up and shared out, what
//! the stacks tell each other, and the feature and counter dump at exit
//! are in `net_cores.rs`.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::rc::{Rc, Weak};
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::net::{Ipv4Addr, SocketAddr};
use core::time::Duration;

use ebb_event::{now, IdleId, Instant};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_net::{AcceptFn, NetError, NetStack, TcpConnection, TcpHandler, UdpHandler, UdpSocket};
use ebb_netstack::poll_timer::PollTimer;
use ebb_netstack::{Device, DeviceCapabilities, EthernetAddress, IpConfig, RxChecksum, Stack};

use crate::drivers::virtio::net::device::VirtioNet;
use crate::drivers::virtio::net::stats::QueueStats;
use crate::drivers::virtio::queue::adaptive::{Adaptive, Mode};
use crate::runtime::frame_kind::{classify, FrameKind};
use crate::runtime::net_cores;

pub use crate::runtime::net_cores::{install, report, report_queues, InterruptHook};

/// A received frame and what the device knew of its checksum.
pub(crate) type Checked = (IoBuf, RxChecksum);

/// How soon to poll again while frames wait for transmit room: a few
/// full-size frames' time on a 1 Gb/s wire (12 µs each).
const TX_RETRY: Duration = Duration::from_micros(50);

/// One core's queue pair as the stack's device: the virtio-net pair, plus
/// what concerns the other cores' stacks when several share the device.
pub struct CoreDevice {
    nic: VirtioNet,
    /// Look at received frames for ARP and DHCP (more than one stack).
    shared: bool,
    /// Hand DHCP messages from a server to core 0 (not core 0, `net=dhcp`).
    forward_dhcp: bool,
    /// Frames other cores handed to this one (DHCP for core 0, TCP
    /// segments of this core's connections), received before the device's,
    /// with what the receiving core knew of their checksum.
    injected: VecDeque<Checked>,
    /// Senders of the ARP packets received since the last poll.
    arp_senders: Vec<(Ipv4Addr, EthernetAddress)>,
    /// DHCP messages from a server that reached this core: for core 0.
    for_dhcp: Vec<Checked>,
    /// Called after each frame handed to the device (the driver re-arms
    /// its timer: a send from outside a poll may start one).
    on_transmit: Option<Box<dyn FnMut()>>,
}

impl CoreDevice {
    pub(crate) fn new(nic: VirtioNet, shared: bool, forward_dhcp: bool) -> Self {
        CoreDevice {
            nic,
            shared,
            forward_dhcp,
            injected: VecDeque::new(),
            arp_senders: Vec::new(),
            for_dhcp: Vec::new(),
            on_transmit: None,
        }
    }

    /// Queues a frame another core received for this core's stack, with
    /// what that core's device (or stack) knew of its checksum.
    pub(crate) fn inject(&mut self, frame: IoBuf, checksum: RxChecksum) {
        self.injected.push_back((frame, checksum));
    }

    /// The queue pair.
    pub(crate) fn nic(&mut self) -> &mut VirtioNet {
        &mut self.nic
    }

    /// The ARP senders and DHCP messages seen since the last call.
    pub(crate) fn take_shared(&mut self) -> (Vec<(Ipv4Addr, EthernetAddress)>, Vec<Checked>) {
        (
            core::mem::take(&mut self.arp_senders),
            core::mem::take(&mut self.for_dhcp),
        )
    }
}

impl Device for CoreDevice {
    fn receive(&mut self, now: Instant) -> Option<IoBuf> {
        self.receive_checked(now).map(|(frame, _)| frame)
    }

    fn receive_checked(&mut self, now: Instant) -> Option<(IoBuf, RxChecksum)> {
        if let Some(injected) = self.injected.pop_front() {
            return Some(injected);
        }
        loop {
            let (frame, checksum) = self.nic.receive_checked(now)?;
            if !self.shared {
                return Some((frame, checksum));
            }
            match classify(frame.as_slice()) {
                FrameKind::Arp {
                    sender_ip,
                    sender_mac,
                } => {
                    self.arp_senders
                        .push((sender_ip, EthernetAddress(sender_mac)));
                    return Some((frame, checksum));
                }
                FrameKind::DhcpToClient if self.forward_dhcp => {
                    // A copy: the receive buffer stays with this core's pool.
                    self.for_dhcp
                        .push((IoBuf::from_vec(frame.to_vec()), checksum));
                }
                _ => return Some((frame, checksum)),
            }
        }
    }

    fn transmit(&mut self, now: Instant, frame: IoChain) {
        self.nic.transmit(now, frame);
        if let Some(hook) = self.on_transmit.as_mut() {
            hook();
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.nic.capabilities()
    }
}

/// One core's stack over its queue pair.
pub struct NativeNet {
    pub(crate) stack: Stack<CoreDevice>,
    /// The queue pair (= the core).
    pub(crate) queue: u16,
    /// This stack says when the address changes (core 0), and, with
    /// DHCP, tells the other cores.
    pub(crate) owns_address: bool,
    pub(crate) dhcp: bool,
    timer: PollTimer,
    reschedule_queued: Cell<bool>,
    reported: Cell<Option<IpConfig>>,
    /// Adaptive polling's state for this core's queue; `None` with a
    /// forced mode.
    adaptive: Option<RefCell<Adaptive>>,
    /// The idle handler that polls (polling mode, or `net=poll-…`).
    pub(crate) idle: Cell<Option<IdleId>>,
    /// Frames after which to reset the device once (`virtio_reset_after`).
    reset_after: Cell<Option<u64>>,
}

impl NativeNet {
    pub(crate) fn new(
        stack: Stack<CoreDevice>,
        queue: u16,
        owns_address: bool,
        dhcp: bool,
        adaptive: Option<Adaptive>,
        reset_after: Option<u64>,
    ) -> Rc<Self> {
        let net = Rc::new(NativeNet {
            stack,
            queue,
            owns_address,
            dhcp,
            timer: PollTimer::new(),
            reschedule_queued: Cell::new(false),
            reported: Cell::new(None),
            adaptive: adaptive.map(RefCell::new),
            idle: Cell::new(None),
            reset_after: Cell::new(reset_after),
        });
        let weak = Rc::downgrade(&net);
        net.stack.with_device(|device| {
            device.on_transmit = Some(Box::new(move || queue_reschedule(&weak)));
        });
        net
    }

    /// Processes received frames and due timers, tells the other cores
    /// what concerns them, then re-arms the timer.
    pub fn poll(self: &Rc<Self>) {
        self.stack.poll(now());
        self.after_poll();
    }

    pub(crate) fn after_poll(self: &Rc<Self>) {
        net_cores::share(self);
        if self.owns_address {
            self.report_address();
        }
        self.reset_if_asked();
        net_cores::publish(self);
        self.schedule();
    }

    /// Polls after an interrupt (or from the idle handler), then lets
    /// adaptive polling look at this queue's rate.
    pub(crate) fn poll_and_adapt(self: &Rc<Self>) {
        self.poll();
        let Some(adaptive) = &self.adaptive else {
            return;
        };
        let packets = self.stats().0.packets;
        let change = adaptive.borrow_mut().observe(now().0, packets);
        match change {
            Some(Mode::Polling) => {
                self.stack
                    .with_device(|device| device.nic.set_rx_interrupts(false));
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
                    .with_device(|device| device.nic.set_rx_interrupts(true))
                {
                    let weak = Rc::downgrade(self);
                    ebb_event::spawn(move || {
                        if let Some(net) = weak.upgrade() {
                            net.poll_and_adapt();
                        }
                    });
                }
            }
            None => return,
        }
        // The switch is counted now; publish it, not after the next poll.
        net_cores::publish(self);
    }

    /// Adaptive polling's current mode for this queue (`None`: forced).
    pub(crate) fn adaptive_mode(&self) -> Option<Mode> {
        self.adaptive
            .as_ref()
            .map(|adaptive| adaptive.borrow().mode())
    }

    /// The test hook `virtio_reset_after=N`: resets the device once after
    /// N frames received on this queue, in the middle of whatever traffic
    /// there is (single-queue devices; a pair of a multi-queue device
    /// refuses and says so).
    fn reset_if_asked(&self) {
        let Some(after) = self.reset_after.get() else {
            return;
        };
        let (rx, _) = self.stats();
        if rx.packets < after {
            return;
        }
        self.reset_after.set(None);
        match self.stack.with_device(|device| device.nic.reset()) {
            Ok(()) => crate::println!(
                "ebbflow native: virtio-net reset after {} frames received",
                rx.packets
            ),
            Err(error) => crate::println!("ebbflow native: virtio-net reset failed: {error}"),
        }
    }

    /// The queue pair's receive and transmit counters.
    pub fn stats(&self) -> (QueueStats, QueueStats) {
        self.stack.with_device(|device| device.nic.stats())
    }

    /// Counts an interrupt that led to a poll.
    pub(crate) fn count_interrupt(&self) {
        self.stack
            .with_device(|device| device.nic.count_interrupt());
    }

    /// Hands the frames of this batch to the device (one notification for
    /// all of them), then re-arms the timer. Runs at the end of each poll
    /// and, through the transmit hook's queued event, after sends from
    /// outside one.
    pub(crate) fn schedule(self: &Rc<Self>) {
        self.stack.with_device(|device| device.nic.kick_tx());
        let weak = Rc::downgrade(self);
        let mut at = self.stack.poll_at();
        if self.stack.with_device(|device| device.nic.tx_waiting()) {
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
        if self.dhcp {
            net_cores::lease_changed(ip);
        }
        let how = if self.dhcp { "DHCP" } else { "static" };
        match ip {
            Some(IpConfig {
                addr,
                prefix_len,
                gateway: Some(gateway),
            }) => crate::println!(
                "ebbflow native: virtio-net has address {addr}/{prefix_len}, gateway {gateway} ({how})"
            ),
            Some(IpConfig {
                addr, prefix_len, ..
            }) => crate::println!(
                "ebbflow native: virtio-net has address {addr}/{prefix_len} ({how})"
            ),
            None => crate::println!("ebbflow native: virtio-net lost its address ({how})"),
        }
    }
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

/// The `NetStack` of cores when there is no usable device.
pub(crate) struct NoNet(pub(crate) &'static str);

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

/// The `NetStack` of cores beyond the device's queue pairs: the device
/// never steers a flow here, so a listener here would accept nothing, and
/// `listen` says yes to keep `listen_on_all_cores` working on any number
/// of cores (the cores with queues accept the connections); what would
/// need this core's own traffic (connect, UDP) is refused.
pub(crate) struct NoQueue;

const NO_QUEUE: &str =
    "this core has no virtio-net queue pair (the device has fewer than the cores)";

impl NetStack for NoQueue {
    fn listen(&self, addr: SocketAddr, _: AcceptFn) -> Result<SocketAddr, NetError> {
        Ok(addr)
    }

    fn connect(&self, _: SocketAddr, _: Box<dyn TcpHandler>) -> Result<TcpConnection, NetError> {
        Err(NetError::Unsupported(NO_QUEUE))
    }

    fn udp_bind(&self, _: SocketAddr, _: Box<dyn UdpHandler>) -> Result<UdpSocket, NetError> {
        Err(NetError::Unsupported(NO_QUEUE))
    }
}
