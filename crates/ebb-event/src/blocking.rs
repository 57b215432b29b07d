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

use crate::foreign_stack::ForeignStack;
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

pub(crate) const CANARY: u128 = 0x5afe_57ac_c0de_5afe_57ac_c0de_5afe_57ac;

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

/// What `block_on` needs from the running stackful event: its yielder, the
/// waker of the task that drives it, and whether it may end early.
struct Current {
    yielder: *const Yielder<Waker, Suspend>,
    waker: Waker,
    /// Started by [`spawn_stackful_on`], so [`end_stackful`] may end it.
    endable: bool,
}

/// Why a stackful event gave its core back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Suspend {
    /// It waits in `block_on`; its waker resumes it.
    Blocked,
    /// It called `end_stackful`: it is never resumed.
    Ended,
}

/// Drives a coroutine as a future; `None` if it ended early
/// ([`end_stackful`]). A coroutine still suspended when it is dropped (its
/// core shut down) is leaked, stack and all: unwinding it needs the
/// `unwind` feature, which a `no_std` build lacks.
struct Stackful<R: 'static, S: Stack + 'static> {
    coroutine: ManuallyDrop<Coroutine<Waker, Suspend, R, S>>,
    /// The lowest word of the coroutine's stack, on stacks that have one.
    canary: Option<*const u128>,
}

// The coroutine's state lives on its own stack and in the heap, never in
// `Stackful` by address: moving it is harmless.
impl<R: 'static, S: Stack + 'static> Unpin for Stackful<R, S> {}

impl<R: 'static, S: Stack + 'static> Future for Stackful<R, S> {
    type Output = Option<R>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<R>> {
        let result = self.coroutine.resume(cx.waker().clone());
        if let Some(canary) = self.canary {
            // A heap stack owns that memory; a foreign stack's owner lends
            // it for as long as the coroutine exists (`ForeignStack::new`).
            // SAFETY: so the coroutine's lowest stack word is valid here,
            // and nothing runs on it between resumes.
            let canary = unsafe { canary.read() };
            assert!(
                canary == CANARY,
                "a stackful event overflowed its stack (the canary at its lowest word was overwritten)"
            );
        }
        match result {
            CoroutineResult::Yield(Suspend::Blocked) => Poll::Pending,
            CoroutineResult::Yield(Suspend::Ended) => {
                // SAFETY: `end_stackful`'s caller promised that nothing on
                // the coroutine's stack needs its destructor run; the
                // coroutine is never resumed again.
                unsafe { self.coroutine.force_reset() };
                Poll::Ready(None)
            }
            CoroutineResult::Return(value) => Poll::Ready(Some(value)),
        }
    }
}

impl<R: 'static, S: Stack + 'static> Drop for Stackful<R, S> {
    fn drop(&mut self) {
        if self.coroutine.done() || !self.coroutine.started() {
            // SAFETY: dropped once, here, and not used afterwards.
            unsafe { ManuallyDrop::drop(&mut self.coroutine) };
        }
    }
}

/// `body` as a coroutine on `stack`, to be driven as a task on a core.
fn on_stack<R: 'static, S: Stack + 'static>(
    stack: S,
    canary: Option<*const u128>,
    endable: bool,
    body: impl FnOnce() -> R + 'static,
) -> Stackful<R, S> {
    let coroutine = Coroutine::with_stack(
        stack,
        move |yielder: &Yielder<Waker, Suspend>, waker: Waker| {
            let local = manager().expect("stackful events run on a core");
            let current = Current {
                yielder,
                waker,
                endable,
            };
            let outer = local.stackful.replace((&current as *const Current).cast());
            let result = body();
            local.stackful.set(outer);
            result
        },
    );
    Stackful {
        coroutine: ManuallyDrop::new(coroutine),
        canary,
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
    let event = on_stack(stack, Some(canary), false, body);
    spawn_task(async move {
        match event.await {
            Some(value) => value,
            // `end_stackful` refuses events that are not endable.
            None => unreachable!("an event of spawn_stackful ended early"),
        }
    })
}

/// Runs `body` as a stackful event on this core, on a stack the caller
/// provides (a C thread's, which its C library mapped): it may call
/// [`block_on`] and end early with [`end_stackful`]. The handle yields
/// `Some` of `body`'s result, or `None` if it ended early.
///
/// # Panics
///
/// If the calling thread is not a core.
pub fn spawn_stackful_on<R: 'static>(
    stack: ForeignStack,
    body: impl FnOnce() -> R + 'static,
) -> JoinHandle<Option<R>> {
    let canary = stack.canary();
    spawn_task(on_stack(stack, canary, true, body))
}

/// Ends the running stackful event now, without returning to its body:
/// its handle yields `None`. Only events of [`spawn_stackful_on`] may end
/// early; it returns (an error) only when it cannot end the caller.
///
/// # Safety
///
/// Every frame between the event's body and this call is abandoned, as by
/// `longjmp`: no destructor on them runs. None of them may own anything
/// whose destructor soundness depends on (a pinned future registered with
/// a timer or a wait list, a lock guard); what they own is leaked.
pub unsafe fn end_stackful() -> EventError {
    let Some(local) = manager() else {
        return EventError::NotOnCore;
    };
    if local.rcu.in_read_section() {
        return EventError::InsideRcuRead;
    }
    let current = local.stackful.get().cast::<Current>();
    if current.is_null() {
        return EventError::NotStackful;
    }
    // `stackful` points at the `Current` in the running coroutine's first
    // frame: set when it starts, restored before it returns, and only read
    // on that coroutine while it is suspended.
    // SAFETY: so the `Current` is alive here; only shared references.
    let current = unsafe { &*current };
    if !current.endable {
        return EventError::NotEndable;
    }
    // The frame holding `current` is abandoned, so its waker (a reference
    // to the task) would leak: move it out and drop it here, once.
    // SAFETY: `current.waker` is valid, and the abandoned frame never uses
    // or drops it again.
    drop(unsafe { core::ptr::read(&current.waker) });
    local.stackful.set(core::ptr::null());
    // SAFETY: the yielder lives on this coroutine's stack while it runs.
    let yielder = unsafe { &*current.yielder };
    yielder.suspend(Suspend::Ended);
    unreachable!("an ended stackful event was resumed")
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
        let _resumed_by: Waker = unsafe { &*current.yielder }.suspend(Suspend::Blocked);
        local.stackful.set(ours);
    }
}
