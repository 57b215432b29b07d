//! The bytes the POSIX API forces us to copy, counted (issue 19: "every
//! copy the POSIX API forces is counted and documented").
//!
//! - **Received:** a socket's data arrives as views into the receive
//!   buffers; `read`/`recv` must put it in the program's own buffer.
//! - **Sent:** `write`/`send` return with the program free to reuse its
//!   buffer, and the stack keeps what it sent until acknowledged, so the
//!   bytes are copied into one new buffer per call.
//!
//! Pipes and eventfds copy by nature (their data lives in the kernel
//! object); they are not counted here.

use core::sync::atomic::{AtomicU64, Ordering};

static RECEIVED: AtomicU64 = AtomicU64::new(0);
static SENT: AtomicU64 = AtomicU64::new(0);

/// Bytes copied so far: (received into the program, sent from it).
#[must_use]
pub fn copied() -> (u64, u64) {
    (
        RECEIVED.load(Ordering::Relaxed),
        SENT.load(Ordering::Relaxed),
    )
}

pub(crate) fn count_received(bytes: usize) {
    RECEIVED.fetch_add(bytes as u64, Ordering::Relaxed);
}

pub(crate) fn count_sent(bytes: usize) {
    SENT.fetch_add(bytes as u64, Ordering::Relaxed);
}
