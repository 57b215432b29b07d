//! A core driver over io_uring. The ring is a small reactor: every
//! operation is submitted with a completion handler, and `dispatch` runs
//! the handlers of what completed. The core's wake-up eventfd is one such
//! operation; networking (`crate::net`) submits its own. Submissions are
//! batched: what a loop turn queues goes to the kernel in one
//! `io_uring_enter`, at the next turn's dispatch or at halt. Before it
//! sleeps, a core polls the ring for a window that tunes itself
//! (`poll_window.rs`).

use std::cell::{Cell, RefCell, UnsafeCell};
use std::io;
use std::os::fd::AsRawFd;
use std::rc::Rc;

use ebb_core::CoreId;
use ebb_event::{CoreDriver, Instant, Platform};
use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::poll_window::{Ended, PollWindow};
use crate::{sys, HostedPlatform};

/// How many looks at the ring between two readings of the clock while
/// polling: reading it costs more than a look (and is a system call where
/// the vDSO is not used, as in the user-space stack personality).
const LOOKS_PER_CLOCK_READ: u32 = 16;

/// One blocking halt in this many asks the kernel whether the thread
/// really slept (two `getrusage` calls): enough to learn the chance, at a
/// quarter of the cost.
const MEASURE_SLEEP_EVERY: u32 = 4;

/// How a poll of the ring ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Polled {
    /// A completion is in the ring, or the kernel holds some for us.
    Work,
    /// The halt's deadline came first.
    Deadline,
    /// The window ended with nothing.
    Nothing,
}

/// Runs when an operation completes, with the result (`res`: bytes, fd or
/// `-errno`) and the completion flags. For a multishot operation it runs
/// once per completion; it returns whether it wants more (the operation is
/// forgotten when it says no or the kernel ends it).
pub(crate) type Completion = Box<dyn FnMut(i32, u32) -> bool>;

/// Names a submitted operation (its `user_data`), for cancelling it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpToken(u64);

pub(crate) struct Reactor {
    ring: RefCell<IoUring>,
    /// Completion handlers by slot; `user_data` = slot. A handler is taken
    /// out while it runs (it may submit more operations).
    handlers: RefCell<Vec<Option<Completion>>>,
    free: RefCell<Vec<usize>>,
    /// The completions `reap` copies out of the ring before running their
    /// handlers, kept so that reaping allocates nothing. Taken while in
    /// use: a handler that reaps again gets a vector of its own.
    reaped: Cell<Vec<(u64, i32, u32)>>,
    unsubmitted: Cell<bool>,
    /// Runs at the start of every dispatch (buffer recycling, re-arming).
    on_dispatch: RefCell<Option<Box<dyn Fn()>>>,
    /// Runs once every operation is cancelled, when the core ends.
    on_shutdown: RefCell<Vec<Box<dyn FnOnce()>>>,
}

impl Reactor {
    fn new() -> io::Result<Self> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .build(256)
            .or_else(|_| IoUring::new(256))?;
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring lacks IORING_FEAT_EXT_ARG (Linux 5.11+)",
            ));
        }
        Ok(Reactor {
            ring: RefCell::new(ring),
            handlers: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            reaped: Cell::new(Vec::new()),
            unsubmitted: Cell::new(false),
            on_dispatch: RefCell::new(None),
            on_shutdown: RefCell::new(Vec::new()),
        })
    }

    /// Queues `entry`; `on_complete` runs when it completes.
    ///
    /// # Safety
    ///
    /// Every buffer and structure `entry` points to must stay valid (and
    /// unused by Rust code, for buffers the kernel writes) until the
    /// operation's last completion; keeping them in `on_complete` does that.
    pub unsafe fn submit(&self, entry: squeue::Entry, on_complete: Completion) -> OpToken {
        let slot = {
            let mut handlers = self.handlers.borrow_mut();
            match self.free.borrow_mut().pop() {
                Some(slot) => {
                    handlers[slot] = Some(on_complete);
                    slot
                }
                None => {
                    handlers.push(Some(on_complete));
                    handlers.len() - 1
                }
            }
        };
        let entry = entry.user_data(slot as u64);
        let mut ring = self.ring.borrow_mut();
        loop {
            // SAFETY: the caller guarantees what the entry points to
            // outlives the operation.
            if unsafe { ring.submission().push(&entry) }.is_ok() {
                break;
            }
            // The submission queue is full: hand it to the kernel first.
            if let Err(error) = ring.submit() {
                panic!("io_uring_enter (submitting a full queue) failed: {error}");
            }
        }
        self.unsubmitted.set(true);
        OpToken(slot as u64)
    }

    /// Asks the kernel to cancel `token`'s operation; its handler then sees
    /// `-ECANCELED` (or its normal completion if it was already done).
    pub fn cancel(&self, token: OpToken) {
        let entry = opcode::AsyncCancel::new(token.0).build();
        // SAFETY: a cancel request points to no memory.
        unsafe { self.submit(entry, Box::new(|_, _| false)) };
    }

    /// Registers a provided-buffer ring of `entries` entries at `address`
    /// as buffer group `group`.
    ///
    /// # Safety
    ///
    /// `address` must be page-aligned memory for `entries` ring entries that
    /// stays valid until `unregister_buffer_ring`.
    pub unsafe fn register_buffer_ring(
        &self,
        address: u64,
        entries: u16,
        group: u16,
    ) -> io::Result<()> {
        let ring = self.ring.borrow();
        // SAFETY: forwarded from the caller.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(address, entries, group, 0)
        }
    }

    /// Stops the kernel from using buffer group `group`.
    pub fn unregister_buffer_ring(&self, group: u16) -> io::Result<()> {
        self.ring.borrow().submitter().unregister_buf_ring(group)
    }

    /// Cancels every operation and waits (up to a second) for their
    /// completions, so that no buffer an operation uses is freed while the
    /// kernel may still touch it. Handlers of operations that did not
    /// finish in time are leaked, with what they keep alive.
    pub fn shut_down(&self, platform: &HostedPlatform) {
        let entry = opcode::AsyncCancel2::new(types::CancelBuilder::any()).build();
        // SAFETY: a cancel request points to no memory.
        unsafe { self.submit(entry, Box::new(|_, _| false)) };
        let deadline = Instant(platform.now().0 + 1_000_000_000);
        while self.handlers.borrow().iter().any(Option::is_some) && platform.now() < deadline {
            self.enter(true, Some(deadline), platform);
            self.reap();
        }
        let left = std::mem::take(&mut *self.handlers.borrow_mut());
        if left.iter().any(Option::is_some) {
            std::mem::forget(left);
        }
        let hooks = std::mem::take(&mut *self.on_shutdown.borrow_mut());
        for hook in hooks {
            hook();
        }
    }

    /// Runs `hook` when the core ends, after every operation was cancelled.
    pub fn on_shutdown(&self, hook: Box<dyn FnOnce()>) {
        self.on_shutdown.borrow_mut().push(hook);
    }

    pub fn set_on_dispatch(&self, hook: Box<dyn Fn()>) {
        *self.on_dispatch.borrow_mut() = Some(hook);
    }

    fn enter(&self, wait: bool, deadline: Option<Instant>, platform: &HostedPlatform) {
        let ring = self.ring.borrow();
        let submitter = ring.submitter();
        let result = match (wait, deadline) {
            (false, _) => submitter.submit(),
            (true, None) => submitter.submit_and_wait(1),
            (true, Some(deadline)) => {
                let left = deadline.0.saturating_sub(platform.now().0);
                if left == 0 {
                    submitter.submit()
                } else {
                    let timeout = types::Timespec::new()
                        .sec(left / 1_000_000_000)
                        .nsec(u32::try_from(left % 1_000_000_000).unwrap_or(0));
                    submitter.submit_with_args(1, &types::SubmitArgs::new().timespec(&timeout))
                }
            }
        };
        self.unsubmitted.set(false);
        match result {
            Ok(_) => {}
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                ) => {}
            Err(error) => panic!("io_uring_enter failed: {error}"),
        }
    }

    /// Enters the kernel without waiting if this turn queued submissions,
    /// or the kernel holds completions that it posts only on an entry
    /// (cooperative task running raises a flag then).
    fn enter_if_needed(&self, platform: &HostedPlatform) {
        let work_waiting = self.ring.borrow_mut().submission().taskrun();
        if self.unsubmitted.get() || work_waiting {
            self.enter(false, None, platform);
        }
    }

    /// Whether a completion waits: in the ring, or held by the kernel until
    /// we enter it (cooperative task running raises the flag).
    fn has_work(&self) -> bool {
        let mut ring = self.ring.borrow_mut();
        !ring.completion().is_empty() || ring.submission().taskrun()
    }

    /// Looks at the ring until work comes, `deadline` passes, or `until`.
    fn poll(&self, until: u64, deadline: Option<Instant>, platform: &HostedPlatform) -> Polled {
        loop {
            for _ in 0..LOOKS_PER_CLOCK_READ {
                if self.has_work() {
                    return Polled::Work;
                }
                // No `spin_loop()` (PAUSE) here: under KVM a PAUSE loop
                // can trigger pause-loop exiting, which takes the vCPU away.
            }
            let now = platform.now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                return Polled::Deadline;
            }
            if now.0 >= until {
                return Polled::Nothing;
            }
        }
    }

    /// Runs the handlers of every completion that arrived.
    fn reap(&self) {
        let mut completions = self.reaped.take();
        loop {
            completions.clear();
            completions.extend(
                self.ring
                    .borrow_mut()
                    .completion()
                    .map(|cqe| (cqe.user_data(), cqe.result(), cqe.flags())),
            );
            if completions.is_empty() {
                self.reaped.set(completions);
                return;
            }
            for (user_data, result, flags) in completions.drain(..) {
                let Ok(slot) = usize::try_from(user_data) else {
                    continue;
                };
                let handler = self
                    .handlers
                    .borrow_mut()
                    .get_mut(slot)
                    .and_then(Option::take);
                let Some(mut handler) = handler else { continue };
                let wants_more = handler(result, flags);
                if wants_more && cqueue::more(flags) {
                    self.handlers.borrow_mut()[slot] = Some(handler);
                } else {
                    self.free.borrow_mut().push(slot);
                }
            }
        }
    }
}

pub(crate) struct UringDriver {
    platform: &'static HostedPlatform,
    core: CoreId,
    reactor: Rc<Reactor>,
    wakeup_armed: Rc<Cell<bool>>,
    /// The ring may write here until the read completes, even after the
    /// driver is gone, so it is leaked (8 bytes per core).
    wakeup_buffer: &'static UnsafeCell<u64>,
    /// How long to poll before sleeping.
    poll_window: RefCell<PollWindow>,
    /// Blocking halts so far, for sampling whether they slept.
    blocking_halts: Cell<u32>,
}

impl UringDriver {
    /// A driver for `core` that polls for at most `poll_max_ns` before
    /// it sleeps (0: never).
    pub fn new(
        platform: &'static HostedPlatform,
        core: CoreId,
        poll_max_ns: u64,
    ) -> io::Result<Self> {
        Ok(UringDriver {
            platform,
            core,
            reactor: Rc::new(Reactor::new()?),
            wakeup_armed: Rc::new(Cell::new(false)),
            wakeup_buffer: Box::leak(Box::new(UnsafeCell::new(0))),
            poll_window: RefCell::new(PollWindow::new(poll_max_ns)),
            blocking_halts: Cell::new(0),
        })
    }

    /// Polls for up to `window` from `start`; whether the halt is over
    /// (work came, or the deadline) without sleeping.
    fn poll_instead_of_sleeping(
        &self,
        start: Instant,
        window: u64,
        deadline: Option<Instant>,
    ) -> bool {
        // What this turn queued (a reply, typically) goes out first: the
        // work polled for is often the peer's answer to it.
        self.reactor.enter_if_needed(self.platform);
        let polled = self.reactor.poll(start.0 + window, deadline, self.platform);
        if polled == Polled::Nothing {
            return false;
        }
        if polled == Polled::Work {
            let gap = self.platform.now().0.saturating_sub(start.0);
            self.poll_window
                .borrow_mut()
                .record_gap(gap, Ended::Polling);
        }
        self.reactor.enter_if_needed(self.platform);
        true
    }

    /// Sleeps in the kernel until work or `deadline`, and tells the
    /// window how long the gap was (from `start`) and, on a sample of
    /// halts, whether the thread really slept.
    fn sleep(&self, start: Instant, polled: bool, deadline: Option<Instant>) {
        let tuning = self.poll_window.borrow().is_tuning();
        if !tuning {
            self.reactor.enter(true, deadline, self.platform);
            return;
        }
        let after_ns = if polled {
            self.platform.now().0.saturating_sub(start.0)
        } else {
            0
        };
        let halts = self.blocking_halts.get().wrapping_add(1);
        self.blocking_halts.set(halts);
        let sleeps_before = halts
            .is_multiple_of(MEASURE_SLEEP_EVERY)
            .then(sys::thread_sleeps);
        self.reactor.enter(true, deadline, self.platform);
        let gap = self.platform.now().0.saturating_sub(start.0);
        let slept = sleeps_before.map(|before| sys::thread_sleeps() > before);
        self.poll_window
            .borrow_mut()
            .record_gap(gap, Ended::Entered { after_ns, slept });
    }

    pub fn reactor(&self) -> Rc<Reactor> {
        Rc::clone(&self.reactor)
    }

    fn arm_wakeup(&self) {
        if self.wakeup_armed.get() {
            return;
        }
        let fd = self.platform.wakeup_fd(self.core).as_raw_fd();
        let read = opcode::Read::new(types::Fd(fd), self.wakeup_buffer.get().cast(), 8).build();
        let armed = Rc::clone(&self.wakeup_armed);
        // SAFETY: the buffer is leaked, so it outlives the read; the fd
        // lives as long as the platform, which is never freed.
        unsafe {
            self.reactor.submit(
                read,
                Box::new(move |_, _| {
                    armed.set(false);
                    false
                }),
            )
        };
        self.wakeup_armed.set(true);
    }
}

impl CoreDriver for UringDriver {
    /// Completions are already in the ring (the kernel posts them without
    /// a system call), so dispatching only reaps; what the turn queues is
    /// submitted once at its end, by `flush` or `halt`.
    fn dispatch(&self) {
        if let Some(hook) = self.reactor.on_dispatch.borrow().as_ref() {
            hook();
        }
        self.reactor.reap();
    }

    fn flush(&self) {
        self.reactor.enter_if_needed(self.platform);
    }

    fn halt(&self, deadline: Option<Instant>) {
        self.arm_wakeup();
        // Work already waiting is no gap: entering the kernel finds it
        // without sleeping, polled or not.
        if self.reactor.has_work() {
            self.reactor.enter_if_needed(self.platform);
        } else {
            let start = self.platform.now();
            let window = self.poll_window.borrow().window_ns();
            let polled = window > 0;
            if !(polled && self.poll_instead_of_sleeping(start, window, deadline)) {
                self.sleep(start, polled, deadline);
            }
        }
        self.reactor.reap();
    }
}

impl Drop for UringDriver {
    fn drop(&mut self) {
        self.reactor.on_dispatch.borrow_mut().take();
        self.reactor.shut_down(self.platform);
    }
}
