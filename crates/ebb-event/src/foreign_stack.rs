//! A stack for a stackful event whose memory belongs to someone else: a
//! C thread's stack, which its C library mapped and will unmap
//! (`spawn_stackful_on`).

use core::num::NonZeroUsize;

use corosensei::stack::{Stack, StackPointer, STACK_ALIGNMENT};

/// The bounds of borrowed stack memory, `[limit, base)`; the stack grows
/// down from `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForeignStack {
    base: NonZeroUsize,
    limit: NonZeroUsize,
}

/// Fewer bytes than this is no stack: the coroutine's start frame and a
/// few calls must fit.
pub const MIN_FOREIGN_STACK_BYTES: usize = 4096;

impl ForeignStack {
    /// The stack `[limit, base)`, its top aligned down to the 16 bytes the
    /// System V ABI wants (AMD64 supplement §3.2.2); `None` if fewer than
    /// [`MIN_FOREIGN_STACK_BYTES`] remain or `limit` is 0.
    ///
    /// # Safety
    ///
    /// `[limit, base)` is writable memory that nothing else uses, and it
    /// stays so until the event that runs on it has returned or ended.
    pub unsafe fn new(limit: usize, base: usize) -> Option<Self> {
        let base = base & !(STACK_ALIGNMENT - 1);
        if base.checked_sub(limit)? < MIN_FOREIGN_STACK_BYTES {
            return None;
        }
        Some(ForeignStack {
            base: NonZeroUsize::new(base)?,
            limit: NonZeroUsize::new(limit)?,
        })
    }
}

// SAFETY: `new`'s caller promised that `[limit, base)` is writable memory
// nobody else uses for as long as the coroutine runs on it; `base` is
// aligned to `STACK_ALIGNMENT` and both are non-zero.
unsafe impl Stack for ForeignStack {
    fn base(&self) -> StackPointer {
        self.base
    }

    fn limit(&self) -> StackPointer {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_top_is_aligned_down_and_tiny_or_null_stacks_are_refused() {
        // SAFETY: the stacks are never run on.
        let stack = unsafe { ForeignStack::new(0x1000, 0x9009) }.expect("a stack");
        assert_eq!(stack.base().get(), 0x9000);
        assert_eq!(stack.limit().get(), 0x1000);
        // SAFETY: never run on.
        assert_eq!(unsafe { ForeignStack::new(0x1000, 0x1800) }, None);
        // SAFETY: never run on.
        assert_eq!(unsafe { ForeignStack::new(0, 0x9000) }, None);
        // SAFETY: never run on.
        assert_eq!(unsafe { ForeignStack::new(0x9000, 0x1000) }, None);
    }
}
