//! Cooperative stackful blocking, for code that must look synchronous.
//!
//! A stackful event runs on a stack of its own (a `corosensei` coroutine).
//! When it calls [`block_on`] on a future that is not ready, it saves its
//! registers, switches back to the event loop's stack and the loop goes on;
//! when the future's waker fires, the event is resumed where it stopped,
//! with its stack intact. It is driven as an ordinary task, so it resumes
//! on its home core.

use alloc::vec::Vec;
use core::future::Future;
use core::mem::ManuallyDrop;
use core::num::NonZeroUsize;
use core::pin::{pin, Pin};
use core::task::{Context, Poll, Waker};

use corosensei::stack::{Stack, StackPointer, STACK_ALIGNMENT};
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::manager::manager;
use crate::{spawn_task, EventError, JoinHandle};

/// Stack size of a stackful event.
pub const DEFAULT_STACK_BYTES: usize = 256 * 1024;

/// A stack on the heap. It has no guard page: on native, guard pages come
/// from the virtual-region allocator; here an overflow is detected after
/// the fact by a canary at the limit (and reported by a panic).
struct HeapStack {
    memory: Vec<u128>,
}

const CANARY: u128 = 0x5afe_57ac_c0de_5afe_57ac_c0de_5afe_57ac;

impl HeapStack {
    fn new(bytes: usize) -> Self {
        let words = bytes.div_ceil(core::mem::size_of::<u128>());
        let mut memory = alloc::vec![0u128; words];
        memory[0] = CANARY;
        HeapStack { memory }
    }

    fn canary(&self) -> *const u128 {
        self.memory.as_ptr()
    }
}

// SAFETY: `base` and `limit` bound memory owned by `self.memory`, which
// neither moves (a `Vec`'s buffer stays put while the `Vec` is not resized,
// and it never is) nor is freed while the stack exists; both are aligned to
// 16 bytes (`u128` alignment is 16 on x86_64, checked below) and non-zero.
unsafe impl Stack for HeapStack {
    fn base(&self) -> StackPointer {
        let end = self.memory.as_ptr_range().end as usize;
        NonZeroUsize::new(end & !(STACK_ALIGNMENT - 1)).expect("stack memory at address 0")
    }

    fn limit(&self) -> StackPointer {
        // Leave the canary word below the usable range.
        let start = self.memory.as_ptr() as usize + core::mem::size_of::<u128>();
        let start = (start + STACK_ALIGNMENT - 1) & !(STACK_ALIGNMENT - 1);
        NonZeroUsize::new(start).expect("stack memory at address 0")
    }
}

const _: () = assert!(core::mem::align_of::<u128>() >= STACK_ALIGNMENT);

/// What `block_on` needs from the running stackful event: its yielder and
/// the waker of the task that drives it.
struct Current {
    yielder: *const Yielder<Waker, ()>,
    waker: Waker,
}

/// Drives a coroutine as a future. A coroutine still suspended when it is
/// dropped (its core shut down) is leaked, stack and all: unwinding it
/// needs the `unwind` feature, which a `no_std` build lacks.
struct Stackful<R: 'static> {
    coroutine: ManuallyDrop<Coroutine<Waker, (), R, HeapStack>>,
    /// The lowest word of the coroutine's stack.
    canary: *const u128,
}

impl<R: 'static> Future for Stackful<R> {
    type Output = R;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        let result = self.coroutine.resume(cx.waker().clone());
        // SAFETY: `canary` points into the stack the coroutine owns, which
        // lives as long as `self`; nothing runs on that stack now.
        let canary = unsafe { self.canary.read() };
        assert!(
            canary == CANARY,
            "a stackful event overflowed its {DEFAULT_STACK_BYTES}-byte stack"
        );
        match result {
            CoroutineResult::Yield(()) => Poll::Pending,
            CoroutineResult::Return(value) => Poll::Ready(value),
        }
    }
}

impl<R: 'static> Drop for Stackful<R> {
    fn drop(&mut self) {
        if self.coroutine.done() || !self.coroutine.started() {
            // SAFETY: dropped once, here, and not used afterwards.
            unsafe { ManuallyDrop::drop(&mut self.coroutine) };
        }
    }
}

/// Runs `body` as a stackful event on this core: it may call [`block_on`].
/// The handle yields `body`'s result.
///
/// # Panics
///
/// If the calling thread is not a core.
pub fn spawn_stackful<R: 'static>(body: impl FnOnce() -> R + 'static) -> JoinHandle<R> {
    let stack = HeapStack::new(DEFAULT_STACK_BYTES);
    let canary = stack.canary();
    let coroutine =
        Coroutine::with_stack(stack, move |yielder: &Yielder<Waker, ()>, waker: Waker| {
            let local = manager().expect("stackful events run on a core");
            let current = Current { yielder, waker };
            let outer = local.stackful.replace((&current as *const Current).cast());
            let result = body();
            local.stackful.set(outer);
            result
        });
    spawn_task(Stackful {
        coroutine: ManuallyDrop::new(coroutine),
        canary,
    })
}

/// Waits for `future` inside a stackful event: while it is pending, the
/// event's stack is parked and the core runs other events. Fails outside a
/// stackful event and inside an RCU read-side section.
pub fn block_on<F: Future>(future: F) -> Result<F::Output, EventError> {
    let local = manager().ok_or(EventError::NotOnCore)?;
    if local.rcu.in_read_section() {
        return Err(EventError::InsideRcuRead);
    }
    let current = local.stackful.get().cast::<Current>();
    if current.is_null() {
        return Err(EventError::NotStackful);
    }
    // `stackful` points at the `Current` on the running coroutine's stack:
    // set when it starts, restored before it returns; while it is suspended
    // only this function, on that coroutine, reads it.
    // SAFETY: so it is alive here; we only form shared references.
    let current = unsafe { &*current };
    let mut future = pin!(future);
    loop {
        // Every resume comes from polls of the same task, so the first
        // waker stays the right one.
        let mut context = Context::from_waker(&current.waker);
        if let Poll::Ready(value) = future.as_mut().poll(&mut context) {
            return Ok(value);
        }
        // Back to the loop: no stackful event runs there. Other stackful
        // events may run meanwhile, so put ours back when resumed.
        let ours = local.stackful.replace(core::ptr::null());
        // SAFETY: the yielder lives on this coroutine's stack frame for as
        // long as the coroutine runs, and we are running on it now.
        let _resumed_by: Waker = unsafe { &*current.yielder }.suspend(());
        local.stackful.set(ours);
    }
}
