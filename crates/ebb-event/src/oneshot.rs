//! A one-value channel whose receiver is a future; works across cores.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use crate::sync::{Arc, Mutex};

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

impl<T> Drop for Receiver<T> {
    /// Forgets the waker: nobody waits any more, so a later send or a
    /// dropped sender must not wake the task that once polled.
    fn drop(&mut self) {
        // Dropped outside the lock: a waker's drop may run arbitrary code.
        let stale = self.state.lock().waker.take();
        drop(stale);
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

/// Models of the channel's races (`RUSTFLAGS="--cfg loom" cargo test -p
/// ebb-event --lib loom`): the state's lock and `Arc` are loom's, so every
/// interleaving of send, drop and poll is explored; `block_on` parks the
/// receiving thread, so a lost wake-up shows as a deadlock.
#[cfg(all(test, loom))]
mod tests {
    use super::{oneshot, RecvError};
    use crate::sync::{Arc, AtomicUsize};
    use core::sync::atomic::Ordering;
    use loom::future::block_on;
    use loom::thread;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn loom_oneshot_send_wakes_receiver_and_delivers_once() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let (sender, receiver) = oneshot();
            let value = Counted(Arc::clone(&drops));
            let sending = thread::spawn(move || sender.send(value));
            let received = block_on(receiver);
            assert_eq!(drops.load(Ordering::SeqCst), 0, "dropped before delivery");
            drop(received.expect("the value arrives"));
            sending.join().unwrap();
            assert_eq!(drops.load(Ordering::SeqCst), 1, "delivered exactly once");
        });
    }

    #[test]
    fn loom_oneshot_sender_dropped_wakes_receiver_with_error() {
        loom::model(|| {
            let (sender, receiver) = oneshot::<u32>();
            let dropping = thread::spawn(move || drop(sender));
            assert_eq!(block_on(receiver), Err(RecvError));
            dropping.join().unwrap();
        });
    }

    #[test]
    fn loom_oneshot_receiver_dropped_value_dropped_once() {
        loom::model(|| {
            let drops = Arc::new(AtomicUsize::new(0));
            let (sender, receiver) = oneshot();
            let value = Counted(Arc::clone(&drops));
            let sending = thread::spawn(move || sender.send(value));
            drop(receiver);
            sending.join().unwrap();
            assert_eq!(
                drops.load(Ordering::SeqCst),
                1,
                "the unreceived value is dropped once"
            );
        });
    }
}
