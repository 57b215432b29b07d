//! The bridge from Ebbflow's event loops to etcd-client's tokio futures.
//!
//! etcd-client (tonic, hyper) needs a tokio runtime; the map's futures
//! are polled by Ebbflow's own event loops, which are not tokio. So the
//! map owns a current-thread tokio runtime on a thread of its own: each
//! operation is spawned there, and the map's future awaits a tokio
//! oneshot receiver, which is an ordinary future that any executor can
//! poll (it wakes the waker it was polled with).

use std::future::Future;
use std::thread::JoinHandle;

use ebb_core::MapError;
use tokio::runtime::Handle;

use crate::classify::Effect;
use tokio::sync::oneshot;

/// A tokio runtime on its own thread, ended when dropped.
pub struct Bridge {
    handle: Handle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Bridge {
    /// Starts the runtime's thread.
    ///
    /// # Errors
    ///
    /// The runtime or its thread could not be made (out of threads or
    /// file descriptors).
    pub fn start() -> std::io::Result<Bridge> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("ebb-etcd")
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("ebb-etcd".to_owned())
            .spawn(move || {
                // Runs the spawned operations until the bridge is dropped;
                // dropping the runtime then cancels whatever is left.
                let _ = runtime.block_on(stopped);
            })?;
        Ok(Bridge {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Runs `work` on the runtime; the returned future, pollable by any
    /// executor, gives its result. If the runtime ended first, the error
    /// names the store `endpoint` and is, as `effect` says, an unknown
    /// outcome for a write (it may have been sent) or unreachable for a
    /// read.
    pub fn run<T: Send + 'static>(
        &self,
        endpoint: String,
        effect: Effect,
        work: impl Future<Output = Result<T, MapError>> + Send + 'static,
    ) -> impl Future<Output = Result<T, MapError>> + Send + 'static {
        let (done, result) = oneshot::channel();
        self.handle.spawn(async move {
            let _ = done.send(work.await);
        });
        async move {
            result.await.unwrap_or_else(|_| {
                Err(effect.unanswered(&endpoint, "the map's etcd client thread ended".to_owned()))
            })
        }
    }

    /// The runtime, for tasks that outlive one operation (watches).
    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::{Context, Poll, Waker};

    /// Polls `future` on this (non-tokio) thread until it is ready.
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(value) = future.as_mut().poll(&mut cx) {
                return value;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    #[test]
    fn work_runs_on_the_runtime_and_its_result_comes_back() {
        let bridge = Bridge::start().unwrap();
        let answer = bridge.run("nowhere".to_owned(), Effect::Reads, async {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            Ok(std::thread::current().name().map(str::to_owned))
        });
        assert_eq!(block_on(answer), Ok(Some("ebb-etcd".to_owned())));
    }

    #[test]
    fn work_cut_short_by_the_end_of_the_runtime_is_an_error_naming_the_store() {
        let bridge = Bridge::start().unwrap();
        let pending = |effect| {
            bridge.run("etcd at nowhere".to_owned(), effect, async {
                std::future::pending::<Result<(), MapError>>().await
            })
        };
        let (read, write) = (pending(Effect::Reads), pending(Effect::Writes));
        drop(bridge);
        match block_on(read) {
            Err(MapError::Unreachable { endpoint, .. }) => assert_eq!(endpoint, "etcd at nowhere"),
            other => panic!("{other:?}"),
        }
        // A write may have gone out before its thread ended.
        match block_on(write) {
            Err(MapError::OutcomeUnknown { endpoint, reason }) => {
                assert_eq!(endpoint, "etcd at nowhere");
                assert!(reason.contains("thread ended"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
