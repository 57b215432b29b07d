//! A future bounded in time: the calls of the Messenger's services (the
//! map's, the command line's) and the map's watch polls never wait for
//! ever.

use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;

/// `future`'s output, or `None` once `limit` passed first (an
/// `ebb_event` timer of the polling core).
pub(crate) async fn within<F: Future>(limit: Duration, future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut timer = pin!(ebb_event::sleep(limit));
    poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}
