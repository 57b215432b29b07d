//! A call's bound: the FileSystem's calls race a timer, so that a hosted
//! node that stops answering without the connection ending (a frozen
//! process) is an error, never a hang. The Messenger has no per-call
//! deadline on purpose (`docs/messenger.md`, "Losing a node"); a file
//! operation knows its size, so it can choose one.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

/// A future and a timer; the first to end decides.
pub(crate) struct Bounded<F> {
    work: Pin<alloc::boxed::Box<F>>,
    timer: Pin<alloc::boxed::Box<dyn Future<Output = ()>>>,
}

/// `work`'s output, or `None` once `limit` has passed (on this core's
/// timers; `work` is dropped then).
pub(crate) fn bounded<F: Future>(limit: Duration, work: F) -> Bounded<F> {
    Bounded {
        work: alloc::boxed::Box::pin(work),
        timer: alloc::boxed::Box::pin(ebb_event::sleep(limit)),
    }
}

impl<F: Future> Future for Bounded<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(output) = self.work.as_mut().poll(context) {
            return Poll::Ready(Some(output));
        }
        self.timer.as_mut().poll(context).map(|()| None)
    }
}
