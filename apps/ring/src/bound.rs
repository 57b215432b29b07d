//! Bounds on the ring's calls, so that a node that freezes without dying
//! (a stopped VM, a livelocked guest: its connection stays open and
//! nothing answers) is a failure, never a hang (issue 16: "failures are
//! values, never hangs").
//!
//! One unit, [`WorkPlan::call_timeout`](crate::WorkPlan::call_timeout)
//! (10 s by default, `--call-timeout`), scaled by what the call carries:
//! a [`WORK`](crate::WORK) call gets one unit per started MiB of its slice
//! plus one; a [`TOKEN`](crate::TOKEN) call one unit per node still to
//! visit, the called one included. So each hop's bound is one unit under
//! its caller's, and the call nearest the frozen node gives up first: the
//! ring is reported broken there, not at its first node.

use core::future::{poll_fn, Future};
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;

/// The unit's default.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The bound of a [`WORK`](crate::WORK) call carrying `bytes`.
#[must_use]
pub fn work_bound(unit: Duration, bytes: usize) -> Duration {
    let mibs = u32::try_from(bytes.div_ceil(1 << 20)).unwrap_or(u32::MAX);
    unit.saturating_mul(mibs.saturating_add(1))
}

/// The bound of a [`TOKEN`](crate::TOKEN) call whose token still lists
/// `hops` nodes after the called one.
#[must_use]
pub fn token_bound(unit: Duration, hops: usize) -> Duration {
    let visits = u32::try_from(hops).unwrap_or(u32::MAX).saturating_add(1);
    unit.saturating_mul(visits)
}

/// `work`'s output, or `None` if `limit` passes first (on this core's
/// timers; `work` is dropped then).
pub async fn within<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    let mut work = pin!(work);
    let mut timer = pin!(ebb_event::sleep(limit));
    poll_fn(|context| {
        if let Poll::Ready(output) = work.as_mut().poll(context) {
            return Poll::Ready(Some(output));
        }
        match timer.as_mut().poll(context) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// What a call that timed out reports: "node 2 did not answer within 3 s".
#[must_use]
pub fn silence(node: ebb_core::NodeId, limit: Duration) -> alloc::string::String {
    alloc::format!("node {node} did not answer within {} ms", limit.as_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_grow_with_bytes_and_hops() {
        let unit = Duration::from_secs(10);
        assert_eq!(work_bound(unit, 1), Duration::from_secs(20));
        assert_eq!(work_bound(unit, 0), unit);
        assert_eq!(work_bound(unit, 16 << 20), Duration::from_secs(170));
        assert_eq!(token_bound(unit, 0), unit);
        assert_eq!(token_bound(unit, 2), Duration::from_secs(30));
        assert_eq!(
            silence(ebb_core::NodeId(2), Duration::from_millis(1500)),
            "node 2 did not answer within 1500 ms"
        );
    }
}
