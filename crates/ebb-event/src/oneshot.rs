//! A one-value channel whose receiver is a future; works across cores.

use alloc::sync::Arc;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use spin::Mutex;

struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_gone: bool,
}

/// Sends one value to a [`Receiver`].
pub struct Sender<T> {
    state: Arc<Mutex<State<T>>>,
}

/// A future for the value a [`Sender`] sends.
pub struct Receiver<T> {
    state: Arc<Mutex<State<T>>>,
}

/// The sender was dropped without sending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvError;

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the sender was dropped before sending a value")
    }
}

impl core::error::Error for RecvError {}

/// A new channel.
pub fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let state = Arc::new(Mutex::new(State {
        value: None,
        waker: None,
        sender_gone: false,
    }));
    (
        Sender {
            state: Arc::clone(&state),
        },
        Receiver { state },
    )
}

impl<T> Sender<T> {
    /// Delivers `value` and wakes the receiver (on its own core).
    pub fn send(self, value: T) {
        let waker = {
            let mut state = self.state.lock();
            state.value = Some(value);
            state.waker.take()
        };
        // Wake outside the lock: waking may run code that touches it.
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.state.lock();
            state.sender_gone = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.state.lock();
        if let Some(value) = state.value.take() {
            return Poll::Ready(Ok(value));
        }
        if state.sender_gone {
            return Poll::Ready(Err(RecvError));
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}
