//! Which calls are the program's: those made on the program's main
//! stack. The process has one C library, which the program and this
//! library's Rust (std, the event loop, the TAP device's I/O) both call;
//! every call reaches `__ebb_syscall`. The program's main function runs
//! as a stackful event on a stack of its own, and this library's own
//! work runs on the core's stack, so the stack pointer tells them apart
//! at no cost: a call made on the program's stack is the program's, any
//! other is this library's or another thread's. This library's own work
//! inside a program's call also runs on the program's stack; the entry
//! sends such nested calls to Linux (`entry.rs`'s `IN_CALL`).

use core::sync::atomic::{AtomicUsize, Ordering};

/// The program's stack, `[LIMIT, BASE)`; empty until it starts.
static LIMIT: AtomicUsize = AtomicUsize::new(0);
static BASE: AtomicUsize = AtomicUsize::new(0);

/// Records the program's stack (once, before it starts).
pub fn set(limit: usize, base: usize) {
    LIMIT.store(limit, Ordering::Release);
    BASE.store(base, Ordering::Release);
}

/// Whether the caller runs on the program's stack.
#[inline]
#[must_use]
pub fn on_it() -> bool {
    let marker = 0u8;
    let here = core::ptr::from_ref(&marker).addr();
    (LIMIT.load(Ordering::Relaxed)..BASE.load(Ordering::Relaxed)).contains(&here)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_frame_inside_the_recorded_stack_is_on_it() {
        assert!(!on_it(), "nothing recorded");
        let marker = 0u8;
        let here = core::ptr::from_ref(&marker).addr();
        set(here - 4096, here + 4096);
        assert!(on_it());
        set(here + 4096, here + 8192);
        assert!(!on_it());
        set(0, 0);
    }
}
