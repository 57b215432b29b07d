//! The per-core executor's tasks, their wakers and join handles.
//!
//! A task's future lives in its home core's task table and is only touched
//! there, so futures need not be `Send`. What travels is the task's header:
//! an `Arc` that wakers hold. Waking on the home core queues the task
//! locally; waking from anywhere else sends the header to the home core's
//! inbox, so the task always resumes at home.

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::task::Wake;
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicBool, Ordering};
use core::task::{Context, Poll};

use ebb_core::CoreId;

use crate::mailbox::Message;
use crate::manager::{manager, Runnable};
use crate::oneshot::{oneshot, Receiver, RecvError};
use crate::root::EventRoot;
use crate::{spawn_on, EventError};

/// What wakers hold.
pub(crate) struct TaskHeader {
    home: CoreId,
    root: &'static EventRoot,
    slot: usize,
    /// Set while the task is queued to be polled (or for good once it is
    /// done), so that a burst of wake-ups queues it once.
    scheduled: AtomicBool,
}

impl Wake for TaskHeader {
    fn wake(self: Arc<Self>) {
        if self.scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        match manager() {
            Some(local) if local.core() == self.home && core::ptr::eq(local.root(), self.root) => {
                local.enqueue(Runnable::Task(self));
            }
            _ => {
                let (root, home) = (self.root, self.home);
                root.send(home, Message::Wake(self));
            }
        }
    }
}

type LocalFuture = Pin<Box<dyn Future<Output = ()>>>;

struct Entry {
    header: Arc<TaskHeader>,
    /// `None` while the future is being polled.
    future: Option<LocalFuture>,
}

/// A core's live tasks.
#[derive(Default)]
pub(crate) struct TaskTable {
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
}

impl TaskTable {
    /// Stores `future` and returns its header, already marked scheduled
    /// (the caller queues it for its first poll).
    pub fn insert(
        &mut self,
        home: CoreId,
        root: &'static EventRoot,
        future: LocalFuture,
    ) -> Arc<TaskHeader> {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.entries.push(None);
            self.entries.len() - 1
        });
        let header = Arc::new(TaskHeader {
            home,
            root,
            slot,
            scheduled: AtomicBool::new(true),
        });
        self.entries[slot] = Some(Entry {
            header: Arc::clone(&header),
            future: Some(future),
        });
        header
    }

    /// Takes the future of `header`'s task out to poll it; `None` if the
    /// task is finished (a stale wake-up).
    pub fn start_poll(&mut self, header: &Arc<TaskHeader>) -> Option<LocalFuture> {
        let entry = self.entries.get_mut(header.slot)?.as_mut()?;
        if !Arc::ptr_eq(&entry.header, header) {
            return None;
        }
        header.scheduled.store(false, Ordering::Release);
        entry.future.take()
    }

    pub fn finish_poll(&mut self, header: &Arc<TaskHeader>, future: LocalFuture, ready: bool) {
        if ready {
            // Keep `scheduled` set so wakers of a finished task do nothing.
            header.scheduled.store(true, Ordering::Release);
            self.entries[header.slot] = None;
            self.free.push(header.slot);
        } else if let Some(entry) = self.entries[header.slot].as_mut() {
            entry.future = Some(future);
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    /// Drops every future (at shutdown).
    pub fn clear(&mut self) -> Vec<LocalFuture> {
        self.free.clear();
        self.entries
            .drain(..)
            .flatten()
            .filter_map(|entry| {
                entry.header.scheduled.store(true, Ordering::Release);
                entry.future
            })
            .collect()
    }
}

/// Polls a task's future with a waker for it.
pub(crate) fn poll_task(header: &Arc<TaskHeader>, future: &mut LocalFuture) -> bool {
    let waker = Arc::clone(header).into();
    let mut context = Context::from_waker(&waker);
    future.as_mut().poll(&mut context).is_ready()
}

/// The result of a task, as a future. Dropping the handle detaches the
/// task: it runs to completion and its result is dropped.
pub struct JoinHandle<T> {
    result: Receiver<T>,
}

/// The task ended without producing its value: it was dropped because its
/// node shut down first.
pub type JoinError = RecvError;

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.get_mut().result).poll(cx)
    }
}

/// Runs `future` as a task on this core; its result is the handle's output.
///
/// # Panics
///
/// If the calling thread is not a core (programmer error).
pub fn spawn_task<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
{
    let (sender, result) = oneshot();
    let local =
        manager().expect("ebb_event::spawn_task called on a thread that is not an Ebbflow core");
    local.spawn_future(Box::pin(async move {
        sender.send(future.await);
    }));
    JoinHandle { result }
}

/// Runs `future` as a task on `core` and returns a handle that can be
/// awaited here. Fails if `core` does not exist.
pub fn spawn_task_on<F>(core: CoreId, future: F) -> Result<JoinHandle<F::Output>, EventError>
where
    F: Future + Send + 'static,
    F::Output: Send,
{
    let (sender, result) = oneshot();
    spawn_on(core, move || {
        if let Some(local) = manager() {
            local.spawn_future(Box::pin(async move {
                sender.send(future.await);
            }));
        }
    })?;
    Ok(JoinHandle { result })
}
