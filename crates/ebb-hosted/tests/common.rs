//! Shared helpers for the hosted integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use ebb_hosted::{Backend, Config};

/// A node that has not finished by then has hung: the test fails instead of
/// hanging the suite.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `body` as a task on core 0 of a fresh `cores`-core node (not
/// pinned, no signal handling: tests run side by side in one process),
/// stops the node when it completes, and returns its output.
pub fn on_node<F, Fut, R>(cores: usize, backend: Backend, body: F) -> R
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = R> + 'static,
    R: Send + 'static,
{
    let config = Config {
        cores: Some(cores),
        backend,
        pin: false,
        handle_signals: false,
        ..Config::default()
    };
    let (result_tx, result_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let code = ebb_hosted::run_with(
        config,
        move || {
            ebb_event::spawn_task(async move {
                let output = body().await;
                result_tx.send(output).expect("test thread waits");
                ebb_event::shutdown(0).expect("first shutdown");
            });
        },
        move |handle| {
            thread::spawn(move || {
                if done_rx.recv_timeout(WATCHDOG).is_err() {
                    let _ = handle.events.shutdown(99);
                }
            });
        },
    )
    .expect("node runs");
    let _ = done_tx.send(());
    assert_eq!(code, 0, "the node hit the watchdog or failed");
    result_rx.recv().expect("the body finished")
}

/// Both event-loop backends.
pub const BACKENDS: [Backend; 2] = [Backend::IoUring, Backend::Epoll];

/// Waits (on this core's timers) until `done()` holds, for at most 10 s.
pub async fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..10_000 {
        if done() {
            return true;
        }
        ebb_event::sleep(Duration::from_millis(1)).await;
    }
    done()
}
