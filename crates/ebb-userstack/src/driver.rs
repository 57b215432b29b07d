//! One core's user-space stack, driven by the hosted event loop: frames are
//! read when the ring reports the TAP file readable (or, on an epoll core,
//! from an idle handler), each is processed run-to-completion into the
//! application's handler, and one core timer is kept at the stack's
//! `poll_at` (ARP retries and expiry, DHCP retransmissions and renewals).

use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

use ebb_event::now;
use ebb_hosted::ReadableWatch;
use ebb_netstack::poll_timer::PollTimer;
use ebb_netstack::{Config, IpConfig, IpSetup, Stack};

use crate::tap::{TapDevice, TapFile, TapStats};
use crate::Options;

/// The user-space stack on this core.
pub struct UserStack {
    stack: Stack<TapDevice>,
    tap: String,
    dhcp: bool,
    /// Frames one poll takes from the TAP device at most; if more wait,
    /// the next poll is queued behind the core's other events.
    batch: usize,
    /// The armed timer and its deadline.
    timer: PollTimer,
    /// Whether a reschedule is already queued (after a send).
    reschedule_queued: Cell<bool>,
    /// Whether a poll is already queued (after a batch hit its budget).
    poll_queued: Cell<bool>,
    watch: RefCell<Option<ReadableWatch>>,
    /// The address last reported to the user.
    reported: Cell<Option<IpConfig>>,
}

impl UserStack {
    /// Starts the stack over `file` on this core (which must be a core of a
    /// running node): watches the file, arms the timers, and for a static
    /// address reports it.
    #[must_use]
    pub fn start(file: TapFile, options: &Options) -> Rc<Self> {
        let tap = file.name().to_string();
        let device = TapDevice::new(file);
        let fd = device.raw_fd();
        let mut config = match options.ip {
            IpSetup::Static(ip) => Config::new_static(options.hardware_addr, ip),
            // The transaction ids need not be secret, only differ between
            // runs and clients.
            IpSetup::Dhcp => Config::new_dhcp(options.hardware_addr, seed()),
        };
        // Initial sequence numbers must differ between runs (RFC 9293
        // §3.4.1, RFC 6528): a restarted server on the same address must
        // not reuse the previous run's sequence space with a kernel peer
        // that still remembers it.
        config.tcp.seed = seed();
        let stack = Stack::new(device, config, now());
        // Sends from timer events after a halt are stamped with the time now.
        stack.set_clock(now);
        let user = Rc::new(UserStack {
            stack,
            tap,
            dhcp: options.ip == IpSetup::Dhcp,
            batch: options.batch,
            timer: PollTimer::new(),
            reschedule_queued: Cell::new(false),
            poll_queued: Cell::new(false),
            watch: RefCell::new(None),
            reported: Cell::new(None),
        });
        let weak = Rc::downgrade(&user);
        user.stack.with_device(|device| {
            device.set_on_transmit(Box::new(move || queue_reschedule(&weak)));
        });
        let weak = Rc::downgrade(&user);
        let on_readable = Box::new(move || {
            if let Some(user) = weak.upgrade() {
                user.poll();
            }
        });
        match ebb_hosted::watch_readable(fd, on_readable) {
            Ok(watch) => *user.watch.borrow_mut() = Some(watch),
            Err(_) => {
                // An epoll core: poll the device on every loop turn.
                let weak = Rc::downgrade(&user);
                ebb_event::add_idle_handler(move || {
                    if let Some(user) = weak.upgrade() {
                        user.poll();
                    }
                });
            }
        }
        user.poll();
        user
    }

    /// The stack (a handle: it is also this core's `NetStack`).
    #[must_use]
    pub fn stack(&self) -> &Stack<TapDevice> {
        &self.stack
    }

    /// The TAP device's counters.
    #[must_use]
    pub fn tap_stats(&self) -> TapStats {
        self.stack.with_device(|device| device.stats())
    }

    /// Processes what the device has (up to a batch) and what timers are
    /// due, then re-arms the timer, and queues another poll if frames may
    /// be left (the readiness poll reports new arrivals, not what is left).
    pub fn poll(self: &Rc<Self>) {
        self.stack
            .with_device(|device| device.start_batch(self.batch));
        self.stack.poll(now());
        self.report_address();
        self.schedule();
        let more = self.stack.with_device(|device| device.budget_ran_out());
        if more && !self.poll_queued.replace(true) {
            let weak = Rc::downgrade(self);
            ebb_event::spawn(move || {
                if let Some(user) = weak.upgrade() {
                    user.poll_queued.set(false);
                    user.poll();
                }
            });
        }
    }

    fn schedule(self: &Rc<Self>) {
        let weak = Rc::downgrade(self);
        self.timer.follow(self.stack.poll_at(), move || {
            if let Some(user) = weak.upgrade() {
                user.timer.fired();
                user.poll();
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
            Some(ip) => {
                let gateway = ip
                    .gateway
                    .map(|gateway| format!(", gateway {gateway}"))
                    .unwrap_or_default();
                eprintln!(
                    "ebbflow userstack: {} has address {}/{}{gateway} ({how})",
                    self.tap, ip.addr, ip.prefix_len
                );
            }
            None => eprintln!("ebbflow userstack: {} lost its address ({how})", self.tap),
        }
    }
}

/// After a send from outside `poll` (an application's timer, say), the
/// stack may have started ARP resolution: re-arm the timer once the
/// current event is done.
fn queue_reschedule(weak: &Weak<UserStack>) {
    let Some(user) = weak.upgrade() else { return };
    if user.reschedule_queued.replace(true) {
        return;
    }
    let weak = Rc::downgrade(&user);
    ebb_event::spawn(move || {
        if let Some(user) = weak.upgrade() {
            user.reschedule_queued.set(false);
            user.schedule();
        }
    });
}

fn seed() -> u64 {
    let clock = now().0;
    clock ^ u64::from(std::process::id()).rotate_left(32)
}
