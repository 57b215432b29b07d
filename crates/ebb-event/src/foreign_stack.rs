//! A stack for a stackful event whose memory belongs to someone else: a
//! C thread's stack, which its C library mapped and will unmap
//! (`spawn_stackful_on`).

use core::num::NonZeroUsize;

use corosensei::stack::{Stack, StackPointer, STACK_ALIGNMENT};

/// The bounds of borrowed stack memory, `[limit, base)`; the stack grows
/// down from `base`.
#[derive(Debug, PartialEq, Eq)]
pub struct ForeignStack {
    base: NonZeroUsize,
    limit: NonZeroUsize,
    /// Where [`ForeignStack::with_canary`] wrote its canary, if it did.
    canary: Option<NonZeroUsize>,
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
    /// stays so until the event that runs on it has returned or ended and
    /// its task has been dropped (the last check of a canary comes then).
    pub unsafe fn new(limit: usize, base: usize) -> Option<Self> {
        let base = base & !(STACK_ALIGNMENT - 1);
        if base.checked_sub(limit)? < MIN_FOREIGN_STACK_BYTES {
            return None;
        }
        Some(ForeignStack {
            base: NonZeroUsize::new(base)?,
            limit: NonZeroUsize::new(limit)?,
            canary: None,
        })
    }

    /// The same stack with a canary in its lowest 16 bytes (the stack
    /// then ends above it): after every run of the event on it, the
    /// canary is checked, and an overwritten one (the stack overflowed)
    /// stops the core with a panic naming the stack, as heap stacks do.
    /// Stacks without a guard page need it; an overflow is caught after
    /// the fact, not prevented.
    ///
    /// # Safety
    ///
    /// The stack's memory is still what [`ForeignStack::new`]'s caller
    /// lent (writable, used by nothing else): the canary is written now.
    #[must_use]
    pub unsafe fn with_canary(self) -> ForeignStack {
        let at = self.limit.get().next_multiple_of(16);
        let limit = at + 16;
        if self.base.get().saturating_sub(limit) < MIN_FOREIGN_STACK_BYTES {
            return self;
        }
        // SAFETY: this function's and `new`'s contracts make `[limit,
        // base)` writable memory nobody else uses, now; `at` is 16-aligned and `at + 16` lies below
        // `base` (checked above), so the `u128` fits inside it.
        unsafe { (at as *mut u128).write(crate::blocking::CANARY) };
        ForeignStack {
            limit: NonZeroUsize::new(limit).unwrap_or(self.limit),
            canary: NonZeroUsize::new(at),
            ..self
        }
    }

    /// Where its canary is, if it has one.
    pub(crate) fn canary(&self) -> Option<*const u128> {
        self.canary.map(|at| at.get() as *const u128)
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

    #[test]
    fn a_canary_sits_below_the_usable_stack() {
        let mut memory = alloc::vec![0u128; 1024];
        let range = memory.as_mut_ptr_range();
        let (limit, base) = (range.start as usize, range.end as usize);
        // SAFETY: `memory` is ours and outlives the stack, never run on.
        let stack = unsafe { ForeignStack::new(limit, base) }.unwrap();
        // SAFETY: the same memory, still ours.
        let stack = unsafe { stack.with_canary() };
        assert_eq!(stack.limit().get(), limit + 16);
        assert_eq!(memory[0], crate::blocking::CANARY);
    }
}
