//! Lock-free structures that carry freed memory from one core back to the
//! core that owns it.
//!
//! **Magazine stacks** ([`TakeAllStack`]). The normal remote-free path
//! (see [`crate::slab`]): a freeing core collects pointers to objects of one
//! owner and class in a *magazine* (an array it owns; the objects themselves
//! are never written by it) and pushes the full magazine on the owner's
//! inbox with one compare-and-swap. The owner takes the whole inbox with one
//! swap, empties the magazines, and pushes each back on its home core's
//! *returned* stack. Both stacks are multi-producer, single-consumer
//! [`TakeAllStack`]s: the consumer only ever takes everything, never pops
//! one node, which makes them immune to ABA. Release on push and Acquire on
//! take publish what the pusher wrote into a magazine (its slots and count)
//! to the taker, and — on the way back — order the owner's reads of the
//! slots before the home core overwrites them.
//!
//! **Per-class object stacks** ([`RemoteFreeQueues`]), the fallback for a
//! core that has no cache of its own or cannot get a magazine (out of
//! memory): one multi-producer, single-consumer stack per size
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
//! The structures are generic over their atomics and over how links are
//! stored, so the same code runs on `core` atomics in the allocator and on
//! `loom`'s in the model-checking tests (`tests::loom_*`).

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
// SAFETY: the queues own nothing but pointers to nodes handed over by
// `push`, which carry no thread affinity; the atomics are `Send`.
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

/// A multi-producer, single-consumer stack whose consumer takes all nodes
/// at once (so it has no ABA problem). Used for magazines: a remote core's
/// inbox and a home core's returned magazines.
pub struct TakeAllStack<N, H> {
    head: H,
    _node: core::marker::PhantomData<*mut N>,
}

// SAFETY: the stack only holds pointers to nodes handed over by `push_chain`;
// all shared state is in the atomic `H`, which is `Sync`.
unsafe impl<N, H: Sync> Sync for TakeAllStack<N, H> {}
// SAFETY: the stack owns nothing but pointers to nodes handed over by
// `push_chain`, which carry no thread affinity; `H` is `Send`.
unsafe impl<N, H: Send> Send for TakeAllStack<N, H> {}

impl<N> TakeAllStack<N, AtomicPtr<N>> {
    /// An empty stack.
    pub const fn new() -> Self {
        Self {
            head: AtomicPtr::new(ptr::null_mut()),
            _node: core::marker::PhantomData,
        }
    }
}

impl<N> Default for TakeAllStack<N, AtomicPtr<N>> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N: Link, H: AtomicHead<N>> TakeAllStack<N, H> {
    /// A stack on an explicit atomic head (used with `loom`), which must be
    /// null.
    pub fn from_head(head: H) -> Self {
        Self {
            head,
            _node: core::marker::PhantomData,
        }
    }

    /// Pushes the chain `first ..= last` (already linked from `first` to
    /// `last`). Any core may call this. Everything the caller wrote into the
    /// nodes before the push is visible to the consumer that takes them.
    ///
    /// # Safety
    /// The nodes must be owned by the caller, linked `first` → … → `last`,
    /// and on no other list; ownership passes to the consumer.
    #[inline(always)]
    pub unsafe fn push_chain(&self, first: *mut N, last: *mut N) {
        let mut old = self.head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `last` is owned by the caller until the CAS succeeds.
            unsafe { N::set_next(last, old) };
            match self
                .head
                .compare_exchange_weak(old, first, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => old = now,
            }
        }
    }

    /// Whether the stack is empty (cheap, may be stale).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
    }

    /// Takes every node: returns the first (linked through `Link::next`
    /// to the last, whose link is null), or null. Does not write the shared
    /// line when the stack is empty. Each pushed node is taken exactly once,
    /// by whichever thread's swap saw it; by design only the owning core
    /// takes.
    #[inline(always)]
    pub fn take_all(&self) -> *mut N {
        if self.is_empty() {
            return ptr::null_mut();
        }
        self.head.swap(ptr::null_mut(), Ordering::Acquire)
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

    impl<N> AtomicHead<N> for loom::sync::atomic::AtomicPtr<N> {
        fn load(&self, order: Ordering) -> *mut N {
            loom::sync::atomic::AtomicPtr::load(self, order)
        }
        fn swap(&self, new: *mut N, order: Ordering) -> *mut N {
            loom::sync::atomic::AtomicPtr::swap(self, new, order)
        }
        fn compare_exchange_weak(
            &self,
            current: *mut N,
            new: *mut N,
            success: Ordering,
            failure: Ordering,
        ) -> Result<*mut N, *mut N> {
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
    #[cfg_attr(
        miri,
        ignore = "loom needs system calls Miri lacks (getrlimit); the model checks this code"
    )]
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
                        // SAFETY: `b` is fresh and owned by this thread; both threads push to
                        // queue 1 to contend.
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
            // Drain while the producers push: a single drain before the
            // joins would let loom's search skip the concurrent case.
            let mut n = 0;
            while n < 4 {
                // SAFETY: this thread is the only consumer.
                n += unsafe { queues.drain(&mut take) };
                loom::thread::yield_now();
            }
            for p in producers {
                p.join().unwrap();
            }
            seen.sort_unstable();
            assert_eq!(seen, [1, 2, 11, 12]);
        });
    }

    /// Model check of the chain push used for batched remote frees.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "loom needs system calls Miri lacks (getrlimit); the model checks this code"
    )]
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

    /// A magazine for the loom model: its link and its (one) slot live in
    /// loom cells, so every access is checked for data races; `home` is the
    /// index of the core that owns it.
    struct LMag {
        next: loom::cell::UnsafeCell<*mut LMag>,
        home: usize,
        slot: loom::cell::UnsafeCell<usize>,
    }

    impl Link for LMag {
        unsafe fn set_next(this: *mut Self, next: *mut Self) {
            // SAFETY: the caller owns `this`.
            let cell = unsafe { &(*this).next };
            // SAFETY: loom hands us the cell's pointer for the closure's
            // duration; the caller owns the magazine.
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

    type LStack = TakeAllStack<LMag, loom::sync::atomic::AtomicPtr<LMag>>;

    fn lstack() -> LStack {
        TakeAllStack::from_head(loom::sync::atomic::AtomicPtr::new(ptr::null_mut()))
    }

    fn magazine(home: usize) -> *mut LMag {
        Box::into_raw(Box::new(LMag {
            next: loom::cell::UnsafeCell::new(ptr::null_mut()),
            home,
            slot: loom::cell::UnsafeCell::new(0),
        }))
    }

    /// Fills the one slot of a magazine the caller owns.
    fn fill(m: *mut LMag, v: usize) {
        // SAFETY: the caller owns `m`.
        let cell = unsafe { &(*m).slot };
        // SAFETY: loom hands us the cell's pointer; the caller owns `m`.
        cell.with_mut(|p| unsafe { *p = v });
    }

    /// Reads the one slot of a magazine the caller took.
    fn read(m: *mut LMag) -> usize {
        // SAFETY: the caller took `m` from a stack.
        let cell = unsafe { &(*m).slot };
        // SAFETY: loom hands us the cell's pointer; the slot was published.
        cell.with(|p| unsafe { *p })
    }

    /// The owner's drain, as in `SlabAllocator::drain_remote`: takes the
    /// inbox, reads every magazine, and gives runs of magazines with the
    /// same home back to that home's returned stack as one chain.
    fn drain_magazines(inbox: &LStack, returned: &[LStack], seen: &mut Vec<usize>) {
        let mut m = inbox.take_all();
        let mut run: Option<(usize, *mut LMag, *mut LMag)> = None;
        while !m.is_null() {
            // SAFETY: a taken magazine is ours; its link was published.
            let next = unsafe { LMag::next(m) };
            seen.push(read(m));
            // SAFETY: `m` is a taken magazine, ours until given back; `take_all`'s
            // Acquire made its fields visible.
            let home = unsafe { (*m).home };
            run = match run {
                Some((h, first, last)) if h == home => {
                    // SAFETY: `m` is ours and on no list; `first` heads our run.
                    unsafe { LMag::set_next(m, first) };
                    Some((h, m, last))
                }
                other => {
                    if let Some((h, first, last)) = other {
                        // SAFETY: the chain is linked and ours.
                        unsafe { returned[h].push_chain(first, last) };
                    }
                    Some((home, m, m))
                }
            };
            m = next;
        }
        if let Some((h, first, last)) = run {
            // SAFETY: the run's magazines are ours, linked by us, all with home `h`.
            unsafe { returned[h].push_chain(first, last) };
        }
    }

    /// Model check of a magazine's round trip: the home fills it, pushes it
    /// to the owner, waits for it to come back and reuses it, while the
    /// owner drains. Loom reports a data race if the owner's read of a slot
    /// were not ordered before the home's rewrite (or the home's write
    /// before the owner's read).
    #[test]
    #[cfg_attr(
        miri,
        ignore = "loom needs system calls Miri lacks (getrlimit); the model checks this code"
    )]
    fn loom_magazine_round_trip() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let inbox = loom::sync::Arc::new(lstack());
            let returned = loom::sync::Arc::new([lstack()]);
            let (inbox2, returned2) = (inbox.clone(), returned.clone());
            let home = loom::thread::spawn(move || {
                let m = magazine(0);
                fill(m, 1);
                // SAFETY: `m` is ours and on no list.
                unsafe { inbox2.push_chain(m, m) };
                loop {
                    let back = returned2[0].take_all();
                    if !back.is_null() {
                        assert_eq!(back, m);
                        break;
                    }
                    loom::thread::yield_now();
                }
                fill(m, 2);
                // SAFETY: `m` came back to its home, this thread: ours and on no list.
                unsafe { inbox2.push_chain(m, m) };
            });
            let mut seen = Vec::new();
            while seen.len() < 2 {
                drain_magazines(&inbox, &returned[..], &mut seen);
                loom::thread::yield_now();
            }
            home.join().unwrap();
            assert_eq!(seen, [1, 2]);
            let m = returned[0].take_all();
            assert!(!m.is_null());
            // SAFETY: the magazine is back home and nobody else uses it.
            drop(unsafe { Box::from_raw(m) });
        });
    }

    /// Model check: two homes push magazines (one of them two) to one owner
    /// while it drains; every magazine is read once and returns to its own
    /// home, runs of one home as one chain.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "loom needs system calls Miri lacks (getrlimit); the model checks this code"
    )]
    fn loom_magazines_two_homes() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            let inbox = loom::sync::Arc::new(lstack());
            let returned = [lstack(), lstack()];
            let homes: Vec<_> = (0..2)
                .map(|h| {
                    let inbox = inbox.clone();
                    loom::thread::spawn(move || {
                        for k in 0..=(1 - h) {
                            let m = magazine(h);
                            fill(m, 10 * h + k + 1);
                            // SAFETY: `m` is ours and on no list.
                            unsafe { inbox.push_chain(m, m) };
                        }
                    })
                })
                .collect();
            // The owner drains while the homes push (loom explores every
            // interleaving of the drains with the pushes).
            let mut seen = Vec::new();
            while seen.len() < 3 {
                drain_magazines(&inbox, &returned, &mut seen);
                loom::thread::yield_now();
            }
            for h in homes {
                h.join().unwrap();
            }
            seen.sort_unstable();
            assert_eq!(seen, [1, 2, 11]);
            for (h, want) in [(0, 2), (1, 1)] {
                let mut m = returned[h].take_all();
                let mut n = 0;
                while !m.is_null() {
                    // SAFETY: back home; nobody else uses it.
                    let b = unsafe { Box::from_raw(m) };
                    assert_eq!(b.home, h);
                    // SAFETY: `b` is a live box of a magazine back home; its link cell is
                    // valid.
                    m = unsafe { LMag::next(&raw const *b as *mut LMag) };
                    n += 1;
                }
                assert_eq!(n, want);
            }
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
        // SAFETY: `b[0]` lives on this stack frame and is on no list.
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
