//! Per-core remote-free queues: how an object freed on one core goes back to
//! the core that owns its slab without a lock.
//!
//! Each core cache has one multi-producer, single-consumer stack per size
//! class plus a bit mask saying which stacks may be non-empty. A remote
//! free is one compare-and-swap pushing the object (its first word becomes
//! the link) on the owner's stack for its class, plus one `fetch_or` when the
//! stack was empty. The owner drains on its own slow path: it swaps the mask
//! to zero, and for each set bit swaps that stack's head to null, taking the
//! whole chain at once. Taking everything (never popping one node) is what
//! makes the stack immune to ABA, as in mimalloc's `xthread_free` list
//! (Leijen et al., *Mimalloc: Free List Sharding in Action*, 2019) and
//! Hoard's remote frees (Berger et al., ASPLOS 2000).
//!
//! Why the mask protocol loses nothing: a pusher that finds its stack empty
//! sets the bit *after* its push. A drainer swaps the mask *before* swapping
//! the stacks it names. So a non-empty stack either has its bit set, or its
//! first push happened before the bit was consumed by a drainer that has yet
//! to swap that stack — and a swap, being a read-modify-write, always sees
//! the latest head. Release on push / Acquire on drain make the links (and
//! the object contents the freeing core wrote) visible to the owner.
//!
//! The queue is generic over its atomics and over how links are stored, so
//! the same code runs on `core` atomics in the allocator and on `loom`'s in
//! the model-checking tests (`tests::loom_*`).

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// A freed object on a free list: its first word is the link.
#[repr(C)]
pub struct FreeObject {
    /// Next object on the list, or null.
    pub next: *mut FreeObject,
}

/// A node that can be linked into a [`RemoteFreeQueues`].
pub trait Link {
    /// Stores `next` as this node's link.
    ///
    /// # Safety
    /// `this` must point at a node the caller may write.
    unsafe fn set_next(this: *mut Self, next: *mut Self);
    /// Reads this node's link.
    ///
    /// # Safety
    /// `this` must point at a node whose link was written by `set_next` and
    /// published to the caller.
    unsafe fn next(this: *mut Self) -> *mut Self;
}

impl Link for FreeObject {
    #[inline(always)]
    unsafe fn set_next(this: *mut Self, next: *mut Self) {
        // SAFETY: the caller guarantees `this` is writable.
        unsafe { (*this).next = next };
    }
    #[inline(always)]
    unsafe fn next(this: *mut Self) -> *mut Self {
        // SAFETY: the caller guarantees the link is initialized and visible.
        unsafe { (*this).next }
    }
}

/// The atomic pointer operations a queue head needs.
pub trait AtomicHead<N>: Sync {
    /// Loads the head.
    fn load(&self, order: Ordering) -> *mut N;
    /// Replaces the head, returning the old one.
    fn swap(&self, new: *mut N, order: Ordering) -> *mut N;
    /// Weak compare-and-swap of the head.
    fn compare_exchange_weak(
        &self,
        current: *mut N,
        new: *mut N,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut N, *mut N>;
}

/// The atomic word operations the pending-class mask needs.
pub trait AtomicMask: Sync {
    /// Loads the mask.
    fn load(&self, order: Ordering) -> u64;
    /// Replaces the mask, returning the old one.
    fn swap(&self, new: u64, order: Ordering) -> u64;
    /// Sets bits, returning the old mask.
    fn fetch_or(&self, bits: u64, order: Ordering) -> u64;
}

impl<N> AtomicHead<N> for AtomicPtr<N> {
    #[inline(always)]
    fn load(&self, order: Ordering) -> *mut N {
        AtomicPtr::load(self, order)
    }
    #[inline(always)]
    fn swap(&self, new: *mut N, order: Ordering) -> *mut N {
        AtomicPtr::swap(self, new, order)
    }
    #[inline(always)]
    fn compare_exchange_weak(
        &self,
        current: *mut N,
        new: *mut N,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut N, *mut N> {
        AtomicPtr::compare_exchange_weak(self, current, new, success, failure)
    }
}

impl AtomicMask for AtomicU64 {
    #[inline(always)]
    fn load(&self, order: Ordering) -> u64 {
        AtomicU64::load(self, order)
    }
    #[inline(always)]
    fn swap(&self, new: u64, order: Ordering) -> u64 {
        AtomicU64::swap(self, new, order)
    }
    #[inline(always)]
    fn fetch_or(&self, bits: u64, order: Ordering) -> u64 {
        AtomicU64::fetch_or(self, bits, order)
    }
}

/// `Q` multi-producer single-consumer stacks of `N` plus a pending mask.
pub struct RemoteFreeQueues<N, H, M, const Q: usize> {
    mask: M,
    heads: [H; Q],
    _node: core::marker::PhantomData<*mut N>,
}

// SAFETY: the queues only hold pointers to nodes handed over by `push`; all
// shared state is in the atomics `H` and `M`, which are `Sync`.
unsafe impl<N, H: Sync, M: Sync, const Q: usize> Sync for RemoteFreeQueues<N, H, M, Q> {}
// SAFETY: as above; the node pointers carry no thread affinity.
unsafe impl<N, H: Send, M: Send, const Q: usize> Send for RemoteFreeQueues<N, H, M, Q> {}

/// The queues of one core cache in the allocator.
pub type ObjectQueues<const Q: usize> =
    RemoteFreeQueues<FreeObject, AtomicPtr<FreeObject>, AtomicU64, Q>;

impl<const Q: usize> ObjectQueues<Q> {
    /// Empty queues.
    pub const fn new() -> Self {
        Self {
            mask: AtomicU64::new(0),
            heads: [const { AtomicPtr::new(ptr::null_mut()) }; Q],
            _node: core::marker::PhantomData,
        }
    }
}

impl<const Q: usize> Default for ObjectQueues<Q> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N: Link, H: AtomicHead<N>, M: AtomicMask, const Q: usize> RemoteFreeQueues<N, H, M, Q> {
    /// Builds queues from explicit atomics (used with `loom`).
    pub fn from_parts(mask: M, heads: [H; Q]) -> Self {
        const { assert!(Q <= 64, "the pending mask has 64 bits") };
        Self {
            mask,
            heads,
            _node: core::marker::PhantomData,
        }
    }

    /// Pushes the chain `first ..= last` (already linked from `first` to
    /// `last`) on queue `q`. Any core may call this.
    ///
    /// # Safety
    /// The nodes must be owned by the caller, linked `first` → … → `last`,
    /// and not on any other list; ownership passes to the queue's consumer.
    #[inline(always)]
    pub unsafe fn push_chain(&self, q: usize, first: *mut N, last: *mut N) {
        let head = &self.heads[q];
        let mut old = head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `last` is owned by the caller until the CAS succeeds.
            unsafe { N::set_next(last, old) };
            match head.compare_exchange_weak(old, first, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => old = now,
            }
        }
        if old.is_null() {
            self.mask.fetch_or(1 << q, Ordering::Release);
        }
    }

    /// Pushes one node on queue `q`.
    ///
    /// # Safety
    /// As [`Self::push_chain`] with a one-node chain.
    #[inline(always)]
    pub unsafe fn push(&self, q: usize, node: *mut N) {
        // SAFETY: forwarded contract.
        unsafe { self.push_chain(q, node, node) }
    }

    /// Whether some queue may hold nodes (cheap, may be stale).
    #[inline(always)]
    pub fn pending(&self) -> bool {
        self.mask.load(Ordering::Relaxed) != 0
    }

    /// Takes every queued node and passes each, with its queue index, to `f`
    /// (which may overwrite the node's link). Only the owning core may call
    /// this (single consumer), hence `unsafe`.
    ///
    /// # Safety
    /// No other thread may drain these queues concurrently.
    pub unsafe fn drain(&self, mut f: impl FnMut(usize, *mut N)) -> usize {
        let mut n = 0;
        let mut bits = self.mask.swap(0, Ordering::Acquire);
        while bits != 0 {
            let q = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let mut node = self.heads[q].swap(ptr::null_mut(), Ordering::Acquire);
            while !node.is_null() {
                // SAFETY: the node was pushed with Release and taken with
                // Acquire, so its link is initialized and visible; we read it
                // before `f` may reuse the node's memory.
                let next = unsafe { N::next(node) };
                f(q, node);
                n += 1;
                node = next;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::boxed::Box;
    use std::vec::Vec;

    /// A node for the loom model: the link lives in a loom cell so the model
    /// checker tracks every read and write of it for data races.
    struct LNode {
        next: loom::cell::UnsafeCell<*mut LNode>,
        id: usize,
    }

    impl Link for LNode {
        unsafe fn set_next(this: *mut Self, next: *mut Self) {
            // SAFETY: the caller owns `this`.
            let cell = unsafe { &(*this).next };
            // SAFETY: loom hands us the cell's pointer for the closure's
            // duration; the caller owns the node.
            cell.with_mut(|p| unsafe { *p = next });
        }
        unsafe fn next(this: *mut Self) -> *mut Self {
            // SAFETY: the link was published to the caller.
            let cell = unsafe { &(*this).next };
            // SAFETY: loom hands us the cell's pointer for the closure's
            // duration; the link was published to the caller.
            cell.with(|p| unsafe { *p })
        }
    }

    impl AtomicHead<LNode> for loom::sync::atomic::AtomicPtr<LNode> {
        fn load(&self, order: Ordering) -> *mut LNode {
            loom::sync::atomic::AtomicPtr::load(self, order)
        }
        fn swap(&self, new: *mut LNode, order: Ordering) -> *mut LNode {
            loom::sync::atomic::AtomicPtr::swap(self, new, order)
        }
        fn compare_exchange_weak(
            &self,
            current: *mut LNode,
            new: *mut LNode,
            success: Ordering,
            failure: Ordering,
        ) -> Result<*mut LNode, *mut LNode> {
            loom::sync::atomic::AtomicPtr::compare_exchange_weak(
                self, current, new, success, failure,
            )
        }
    }

    impl AtomicMask for loom::sync::atomic::AtomicU64 {
        fn load(&self, order: Ordering) -> u64 {
            loom::sync::atomic::AtomicU64::load(self, order)
        }
        fn swap(&self, new: u64, order: Ordering) -> u64 {
            loom::sync::atomic::AtomicU64::swap(self, new, order)
        }
        fn fetch_or(&self, bits: u64, order: Ordering) -> u64 {
            loom::sync::atomic::AtomicU64::fetch_or(self, bits, order)
        }
    }

    type LoomQueues = RemoteFreeQueues<
        LNode,
        loom::sync::atomic::AtomicPtr<LNode>,
        loom::sync::atomic::AtomicU64,
        2,
    >;

    fn new_loom_queues() -> LoomQueues {
        RemoteFreeQueues::from_parts(
            loom::sync::atomic::AtomicU64::new(0),
            core::array::from_fn(|_| loom::sync::atomic::AtomicPtr::new(ptr::null_mut())),
        )
    }

    fn node(id: usize) -> *mut LNode {
        Box::into_raw(Box::new(LNode {
            next: loom::cell::UnsafeCell::new(ptr::null_mut()),
            id,
        }))
    }

    /// Model check: two remote cores free objects (of two classes) to one
    /// owner while the owner drains; every object reaches the owner exactly
    /// once, and no link is read before it was published.
    #[test]
    fn loom_remote_free_two_producers() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let queues = loom::sync::Arc::new(new_loom_queues());
            let producers: Vec<_> = (0..2)
                .map(|t| {
                    let queues = queues.clone();
                    loom::thread::spawn(move || {
                        let a = node(10 * t + 1);
                        // SAFETY: the node is fresh and owned by this thread.
                        unsafe { queues.push(t, a) };
                        let b = node(10 * t + 2);
                        // SAFETY: as above; both go on queue 1 to contend.
                        unsafe { queues.push(1, b) };
                    })
                })
                .collect();
            let mut seen = Vec::new();
            let mut take = |_q: usize, n: *mut LNode| {
                // SAFETY: a drained node belongs to the consumer.
                let b = unsafe { Box::from_raw(n) };
                seen.push(b.id);
            };
            // SAFETY: this thread is the only consumer.
            unsafe { queues.drain(&mut take) };
            for p in producers {
                p.join().unwrap();
            }
            // SAFETY: as above.
            unsafe { queues.drain(&mut take) };
            seen.sort_unstable();
            assert_eq!(seen, [1, 2, 11, 12]);
        });
    }

    /// Model check of the chain push used for batched remote frees.
    #[test]
    fn loom_remote_free_chain_push() {
        loom::model(|| {
            let queues = loom::sync::Arc::new(new_loom_queues());
            let q2 = queues.clone();
            let producer = loom::thread::spawn(move || {
                let a = node(1);
                let b = node(2);
                // SAFETY: fresh nodes, linked a -> b, owned by this thread.
                unsafe { LNode::set_next(a, b) };
                // SAFETY: the chain a -> b is ours and on no list.
                unsafe { q2.push_chain(0, a, b) };
            });
            let mut seen = Vec::new();
            let mut take = |q: usize, n: *mut LNode| {
                assert_eq!(q, 0);
                // SAFETY: a drained node belongs to the consumer.
                seen.push(unsafe { Box::from_raw(n) }.id);
            };
            // SAFETY: single consumer.
            unsafe { queues.drain(&mut take) };
            producer.join().unwrap();
            // SAFETY: single consumer.
            unsafe { queues.drain(&mut take) };
            seen.sort_unstable();
            assert_eq!(seen, [1, 2]);
        });
    }

    #[test]
    fn drain_reports_queue_index() {
        let queues = ObjectQueues::<4>::new();
        let mut objs = [
            FreeObject {
                next: ptr::null_mut(),
            },
            FreeObject {
                next: ptr::null_mut(),
            },
        ];
        let (a, b) = objs.split_at_mut(1);
        // SAFETY: the objects live on this stack frame and are on no list.
        unsafe { queues.push(3, &mut a[0]) };
        // SAFETY: as above.
        unsafe { queues.push(1, &mut b[0]) };
        assert!(queues.pending());
        let mut got = Vec::new();
        // SAFETY: single consumer.
        let n = unsafe { queues.drain(|q, _| got.push(q)) };
        assert_eq!(n, 2);
        assert_eq!(got, [1, 3]);
        assert!(!queues.pending());
    }
}
