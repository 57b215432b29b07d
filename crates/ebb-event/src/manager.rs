//! The per-core event manager and its loop.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::Pin;
use core::time::Duration;

use ebb_core::{enter_core, CoreId, Ebb, EbbError, EbbId, EbbRef, FaultContext, Node};

use crate::idle::{IdleHandlers, IdleId};
use crate::mailbox::Message;
use crate::oneshot::oneshot;
use crate::rcu::RcuLocal;
use crate::root::EventRoot;
use crate::task::{poll_task, TaskHeader, TaskTable};
use crate::timer::{Callback, TimerId, TimerQueue};
use crate::{CoreDriver, CpuTime, EventError, Instant};

/// How many queued events and ready tasks one loop turn runs at most before
/// idle handlers get their turn.
pub const EVENT_BATCH: usize = 64;

/// How many timers one loop turn fires at most (a timer callback that sets
/// a due timer must not keep the loop from polling).
const TIMER_BATCH: usize = 256;

/// How long a core with RCU callbacks waiting sleeps at most before it looks
/// again whether their grace period has ended.
const RCU_POLL: Duration = Duration::from_millis(1);

/// The Ebb type of the event manager: one representative per core,
/// installed by the platform when the core starts ([`run_core`]).
pub struct EventManagerEbb;

impl Ebb for EventManagerEbb {
    type Rep = EventManager;

    fn fault(ctx: &FaultContext<'_>) -> Result<&'static EventManager, EbbError> {
        Err(EbbError::Fault {
            id: ctx.id,
            reason: "this core runs no event loop: the event manager is installed by run_core",
        })
    }
}

/// The event manager Ebb (reserved id 1).
// SAFETY: reserved id 1 belongs to the event manager and is used with no
// other Ebb type anywhere.
pub const EVENT_MANAGER: EbbRef<EventManagerEbb> = unsafe { EbbRef::reserved(EbbId::reserved(1)) };

pub(crate) enum Runnable {
    Event(Box<dyn FnOnce()>),
    Task(Arc<TaskHeader>),
}

/// One core's event loop state: its queue, timers, idle handlers, tasks and
/// RCU bookkeeping. Touched only by its own core.
pub struct EventManager {
    core: CoreId,
    root: &'static EventRoot,
    /// Dropped when the loop ends, releasing the platform's resources.
    driver: RefCell<Option<Box<dyn CoreDriver>>>,
    queue: RefCell<VecDeque<Runnable>>,
    timers: RefCell<TimerQueue>,
    idle: RefCell<IdleHandlers>,
    tasks: RefCell<TaskTable>,
    pub(crate) rcu: RcuLocal,
    /// The stackful event running now, if any (see `blocking`).
    pub(crate) stackful: Cell<*const ()>,
    events_run: Cell<u64>,
    halts: Cell<u64>,
}

/// This core's event manager, if the thread runs an event loop.
#[inline]
pub(crate) fn manager() -> Option<&'static EventManager> {
    EVENT_MANAGER.get().ok()
}

#[track_caller]
fn local(what: &str) -> &'static EventManager {
    match manager() {
        Some(manager) => manager,
        None => panic!("ebb_event::{what} called on a thread that is not an Ebbflow core"),
    }
}

impl EventManager {
    fn new(core: CoreId, root: &'static EventRoot, driver: Box<dyn CoreDriver>) -> Self {
        EventManager {
            core,
            root,
            driver: RefCell::new(Some(driver)),
            queue: RefCell::new(VecDeque::new()),
            timers: RefCell::new(TimerQueue::default()),
            idle: RefCell::new(IdleHandlers::default()),
            tasks: RefCell::new(TaskTable::default()),
            rcu: RcuLocal::default(),
            stackful: Cell::new(core::ptr::null()),
            events_run: Cell::new(0),
            halts: Cell::new(0),
        }
    }

    /// This manager's core.
    pub fn core(&self) -> CoreId {
        self.core
    }

    /// The node-wide root.
    pub fn root(&self) -> &'static EventRoot {
        self.root
    }

    /// Events and task polls run on this core so far.
    pub fn events_run(&self) -> u64 {
        self.events_run.get()
    }

    /// How many times this core halted (slept) so far.
    pub fn halts(&self) -> u64 {
        self.halts.get()
    }

    /// Live tasks on this core.
    pub fn tasks(&self) -> usize {
        self.tasks.borrow().len()
    }

    pub(crate) fn enqueue(&self, runnable: Runnable) {
        self.queue.borrow_mut().push_back(runnable);
    }

    pub(crate) fn spawn_future(&self, future: Pin<Box<dyn Future<Output = ()>>>) {
        let header = self.tasks.borrow_mut().insert(self.core, self.root, future);
        self.enqueue(Runnable::Task(header));
    }

    fn run_loop(&self) {
        loop {
            self.rcu.quiescent(self.core, &self.root.rcu);
            if self.root.is_stopping() {
                break;
            }
            if let Some(driver) = self.driver.borrow().as_ref() {
                driver.dispatch();
            }
            self.drain_mailbox();
            self.fire_timers();
            self.run_batch();
            self.run_idle_handlers();
            if !self.halt_if_idle() {
                if let Some(driver) = self.driver.borrow().as_ref() {
                    driver.flush();
                }
            }
        }
    }

    fn drain_mailbox(&self) {
        let mailbox = self.root.mailbox(self.core);
        while let Some(message) = mailbox.pop() {
            let runnable = match message {
                Message::Event(event) => Runnable::Event(event),
                Message::Wake(header) => Runnable::Task(header),
            };
            self.enqueue(runnable);
        }
    }

    fn fire_timers(&self) {
        let now = self.root.platform().now();
        for _ in 0..TIMER_BATCH {
            let due = self.timers.borrow_mut().take_due(now);
            match due {
                None => break,
                Some((_, Callback::Once(callback))) => callback(),
                Some((id, Callback::Every(mut callback))) => {
                    callback();
                    self.timers
                        .borrow_mut()
                        .restore(id, Callback::Every(callback));
                }
            }
            self.events_run.set(self.events_run.get() + 1);
        }
    }

    fn run_batch(&self) {
        for _ in 0..EVENT_BATCH {
            let next = self.queue.borrow_mut().pop_front();
            match next {
                None => break,
                Some(Runnable::Event(event)) => event(),
                Some(Runnable::Task(header)) => {
                    let future = self.tasks.borrow_mut().start_poll(&header);
                    if let Some(mut future) = future {
                        let ready = poll_task(&header, &mut future);
                        self.tasks.borrow_mut().finish_poll(&header, future, ready);
                    }
                }
            }
            self.events_run.set(self.events_run.get() + 1);
        }
    }

    fn run_idle_handlers(&self) {
        let slots = self.idle.borrow().len_slots();
        for index in 0..slots {
            let handler = self.idle.borrow_mut().start(index);
            if let Some(mut handler) = handler {
                handler();
                self.idle.borrow_mut().finish(index, handler);
            }
        }
    }

    /// Halts if there is nothing to do; whether it did.
    fn halt_if_idle(&self) -> bool {
        if !self.queue.borrow().is_empty() || !self.idle.borrow().is_empty() {
            return false;
        }
        let mut deadline = self.timers.borrow_mut().next_deadline();
        if self.rcu.has_pending() {
            let poll = self.root.platform().now() + RCU_POLL;
            deadline = Some(deadline.map_or(poll, |deadline| deadline.min(poll)));
        }
        let mailbox = self.root.mailbox(self.core);
        if !mailbox.prepare_to_sleep() {
            return false;
        }
        let halted = !self.root.is_stopping();
        if halted {
            self.rcu.go_idle(self.core, &self.root.rcu);
            self.halts.set(self.halts.get() + 1);
            if let Some(driver) = self.driver.borrow().as_ref() {
                driver.halt(deadline);
            }
        }
        mailbox.woke_up();
        halted
    }

    /// Drops everything still queued when the loop ends.
    fn teardown(&self) {
        self.rcu.go_idle(self.core, &self.root.rcu);
        let queued = core::mem::take(&mut *self.queue.borrow_mut());
        drop(queued);
        self.timers.borrow_mut().clear();
        self.idle.borrow_mut().clear();
        let futures = self.tasks.borrow_mut().clear();
        drop(futures);
        let mailbox = self.root.mailbox(self.core);
        while mailbox.pop().is_some() {}
        self.rcu.abandon();
        let driver = self.driver.borrow_mut().take();
        drop(driver);
    }
}

/// Runs core `core` of `node`: makes the calling thread that core, installs
/// its event manager with `driver`, queues `init` as its first event, and
/// runs the loop until the node shuts down. Returns the node's exit code.
///
/// [`crate::start_node`] must have been called for `node` first.
pub fn run_core(
    core: CoreId,
    node: &'static Node,
    driver: Box<dyn CoreDriver>,
    init: Option<Box<dyn FnOnce()>>,
) -> Result<i32, EventError> {
    let root = node.local_ids().get::<EventRoot>(EVENT_MANAGER.id())?;
    let _core = enter_core(core, node)?;
    let manager: &'static EventManager = Box::leak(Box::new(EventManager::new(core, root, driver)));
    EVENT_MANAGER.install(manager)?;
    if let Some(init) = init {
        manager.enqueue(Runnable::Event(init));
    }
    manager.run_loop();
    manager.teardown();
    Ok(root.exit_code())
}

/// Queues `event` to run on this core after what is already queued.
///
/// # Panics
///
/// If the calling thread is not a core.
#[track_caller]
pub fn spawn(event: impl FnOnce() + 'static) {
    local("spawn").enqueue(Runnable::Event(Box::new(event)));
}

/// Queues `event` on `core` (this core or another: cross-core work is done
/// by sending an event). Fails if `core` does not exist or the calling
/// thread is not a core.
pub fn spawn_on(core: CoreId, event: impl FnOnce() + Send + 'static) -> Result<(), EventError> {
    let local = manager().ok_or(EventError::NotOnCore)?;
    local.root.check_core(core)?;
    if core == local.core {
        local.enqueue(Runnable::Event(Box::new(event)));
    } else {
        local.root.send(core, Message::Event(Box::new(event)));
    }
    Ok(())
}

impl EventRoot {
    /// [`spawn_on`] for threads that are not cores (signal watchers, tests,
    /// foreign threads).
    pub fn spawn_on(
        &self,
        core: CoreId,
        event: impl FnOnce() + Send + 'static,
    ) -> Result<(), EventError> {
        self.check_core(core)?;
        self.send(core, Message::Event(Box::new(event)));
        Ok(())
    }
}

/// This core.
///
/// # Panics
///
/// If the calling thread is not a core.
#[track_caller]
pub fn current_core() -> CoreId {
    local("current_core").core
}

/// How many cores this node has.
///
/// # Panics
///
/// If the calling thread is not a core.
#[track_caller]
pub fn core_count() -> usize {
    local("core_count").root.cores()
}

/// The platform's monotonic clock.
///
/// # Panics
///
/// If the calling thread is not a core.
#[track_caller]
pub fn now() -> Instant {
    local("now").root.platform().now()
}

/// The platform's id for this node's process ([`Platform::process_id`];
/// 0 off a core or where there are no processes).
pub fn process_id() -> u32 {
    manager().map_or(0, |manager| manager.root.platform().process_id())
}

/// The CPU time this node has used, if the platform measures it
/// ([`Platform::cpu_time`]; `None` off a core).
pub fn cpu_time() -> Option<CpuTime> {
    manager().and_then(|manager| manager.root.platform().cpu_time())
}

/// The RAM this node may use, where it has a fixed amount
/// ([`Platform::memory_bytes`]; `None` hosted or off a core).
pub fn memory_bytes() -> Option<usize> {
    manager().and_then(|manager| manager.root.platform().memory_bytes())
}

/// Asks every core of this node to stop; the node exits with `code`.
/// Fails if the node is already stopping (shutdown called twice).
pub fn shutdown(code: i32) -> Result<(), EventError> {
    manager().ok_or(EventError::NotOnCore)?.root.shutdown(code)
}

/// Calls `callback` once, `delay` from now, on this core.
///
/// # Panics
///
/// If the calling thread is not a core.
#[track_caller]
pub fn timer_after(delay: Duration, callback: impl FnOnce() + 'static) -> TimerId {
    let local = local("timer_after");
    let deadline = local.root.platform().now() + delay;
    local
        .timers
        .borrow_mut()
        .add(deadline, 0, Callback::Once(Box::new(callback)))
}

/// Calls `callback` every `period` on this core, first one period from now.
/// Periods missed while the core was busy are skipped, not made up.
///
/// # Panics
///
/// If the calling thread is not a core, or `period` is zero.
#[track_caller]
pub fn timer_every(period: Duration, callback: impl FnMut() + 'static) -> TimerId {
    let period_ns = crate::time::nanos(period);
    assert!(
        period_ns > 0,
        "ebb_event::timer_every needs a period above zero"
    );
    let local = local("timer_every");
    let deadline = local.root.platform().now() + period;
    local
        .timers
        .borrow_mut()
        .add(deadline, period_ns, Callback::Every(Box::new(callback)))
}

/// Cancels a timer of this core; true if it had not fired (or, periodic,
/// was still armed). A cancelled timer never fires.
pub fn cancel_timer(timer: TimerId) -> bool {
    manager().is_some_and(|local| local.timers.borrow_mut().cancel(timer))
}

/// Completes after `duration` (on this core's timers).
///
/// # Panics
///
/// If polled on a thread that is not a core.
pub async fn sleep(duration: Duration) {
    struct CancelOnDrop(TimerId);
    impl Drop for CancelOnDrop {
        fn drop(&mut self) {
            cancel_timer(self.0);
        }
    }
    /// The receiver, then the timer: fields drop in declaration order,
    /// so a sleep dropped before its time forgets its waker before the
    /// cancelled timer drops the sender, which would otherwise wake the
    /// task for nothing. A waiter that sleeps again after every wake-up
    /// (a C thread's `epoll_wait` with a timeout) then spun until its
    /// deadline, each dropped sleep waking the next.
    struct Waiting {
        receiver: crate::oneshot::Receiver<()>,
        _timer: CancelOnDrop,
    }
    let (sender, receiver) = oneshot();
    let mut waiting = Waiting {
        receiver,
        _timer: CancelOnDrop(timer_after(duration, move || sender.send(()))),
    };
    // The sender lives in the timer, which this future cancels when dropped,
    // so the only way to get `Err` here is a core shutting down.
    // Awaited through a reference, so that `waiting` stays whole and its
    // fields drop in their order.
    let _ = (&mut waiting.receiver).await;
}

/// Lets the other queued events and tasks of this core run, then resumes:
/// the task goes to the back of the queue.
pub async fn yield_now() {
    let mut yielded = false;
    core::future::poll_fn(move |cx| {
        if yielded {
            core::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            core::task::Poll::Pending
        }
    })
    .await;
}

/// Runs `handler` once per loop turn on this core, after the event batch,
/// until removed. While any idle handler is installed the core never halts
/// (it polls).
///
/// # Panics
///
/// If the calling thread is not a core.
#[track_caller]
pub fn add_idle_handler(handler: impl FnMut() + 'static) -> IdleId {
    local("add_idle_handler")
        .idle
        .borrow_mut()
        .add(Box::new(handler))
}

/// Removes an idle handler of this core (it may be running: it will not run
/// again); false if it was already gone.
pub fn remove_idle_handler(id: IdleId) -> bool {
    manager().is_some_and(|local| local.idle.borrow_mut().remove(id))
}
