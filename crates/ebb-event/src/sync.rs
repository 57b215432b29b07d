//! The synchronisation the `loom` models check: the mailbox's sleep flag,
//! the RCU hash map's links, and the oneshot channel's shared state.
//!
//! Production builds use `core`'s atomics, `alloc`'s `Arc` and `spin`'s
//! mutex. A test build with `--cfg loom`
//! (`RUSTFLAGS="--cfg loom" cargo test --release -p ebb-event --lib loom`)
//! uses loom's, which explore every interleaving and memory ordering the
//! model allows; the code that uses them is the same either way.

#[cfg(not(all(test, loom)))]
pub(crate) use alloc::sync::Arc;
#[cfg(not(all(test, loom)))]
pub(crate) use core::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicUsize};
#[cfg(not(all(test, loom)))]
pub(crate) use spin::Mutex;

#[cfg(all(test, loom))]
extern crate std;
#[cfg(all(test, loom))]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicUsize};
#[cfg(all(test, loom))]
pub(crate) use loom::sync::Arc;

/// loom's mutex with `spin::Mutex`'s interface (`lock` returns the guard).
#[cfg(all(test, loom))]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(all(test, loom))]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        // A model thread that panics while holding the lock fails the model
        // anyway; poisoning adds nothing.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
