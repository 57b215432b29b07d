//! The allocation paths: the fast path (pop the core's allocation list)
//! and the refill that makes another slab current.

use crate::size_class::SLAB_ORDER;

use super::cache::{CoreCache, Owned};
use super::header::{pop_at, SlabRef, SlabState};
use super::{is_empty_cache, SlabAllocator, MAX_NODES};

impl SlabAllocator {
    /// Allocates an object of `class` from the cache's allocation list, or
    /// returns null if the list is empty (then call [`Self::refill`]).
    ///
    /// # Safety
    /// `cache` must be [`super::EMPTY_CACHE`] or a cache from this allocator
    /// owned by the calling thread; `class < NUM_CLASSES`.
    #[inline(always)]
    pub unsafe fn alloc_fast(cache: *mut CoreCache, class: usize) -> *mut u8 {
        // SAFETY: `cache` is the sentinel or a cache of this allocator and
        // `class` is in bounds (caller's contract).
        let slot = unsafe { CoreCache::free_slot(cache, class) };
        // SAFETY: the list is the sentinel's (always empty, so only read) or
        // the calling thread's own, which nothing else references meanwhile.
        unsafe { pop_at(slot) }.cast()
    }

    /// Allocates an object of `class` (fast path, then refill).
    ///
    /// # Safety
    /// As [`Self::refill`].
    #[inline(always)]
    pub unsafe fn alloc(&self, cache: *mut CoreCache, class: usize) -> *mut u8 {
        // SAFETY: `refill`'s contract, which the caller meets, implies
        // `alloc_fast`'s.
        let p = unsafe { Self::alloc_fast(cache, class) };
        if !p.is_null() {
            return p;
        }
        // SAFETY: the caller meets `refill`'s contract (this function's).
        unsafe { self.refill(cache, class) }
    }

    /// Slow path of allocation: drains remote frees, moves to another slab
    /// or takes a new one. Returns null when out of memory.
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the calling
    /// thread (not [`super::EMPTY_CACHE`]); `class < NUM_CLASSES`.
    #[cold]
    #[inline(never)]
    pub unsafe fn refill(&self, cache: *mut CoreCache, class: usize) -> *mut u8 {
        debug_assert!(!is_empty_cache(cache));
        // SAFETY: the caller owns `cache`, a real cache of this allocator, and
        // holds no other reference to it during the call.
        let mut c = unsafe { CoreCache::owned(cache) };
        self.refill_owned(&mut c, class)
    }

    /// An object of `class` through the held cache `c` (the allocator's own
    /// allocations: magazines). Null when out of memory.
    pub(super) fn alloc_owned(&self, c: &mut Owned<'_>, class: usize) -> *mut u8 {
        match c.local.free[class].pop() {
            Some(obj) => obj.as_ptr().cast(),
            None => self.refill_owned(c, class),
        }
    }

    fn refill_owned(&self, c: &mut Owned<'_>, class: usize) -> *mut u8 {
        let pending = c.id.inbox().pending();
        Self::flush_pending(c);
        if pending {
            self.drain_remote(c);
        }
        if let Some(cur) = c.local.current[class] {
            if cur.has_free() {
                Self::make_current(c, cur);
                return Self::pop(c, class);
            }
            cur.set_state(SlabState::Full);
            c.local.current[class] = None;
        }
        let s = match c.local.partial[class].first() {
            Some(s) => {
                c.local.partial[class].unlink(s);
                s
            }
            None => match self.acquire_slab(c, class) {
                Some(s) => s,
                None => return core::ptr::null_mut(),
            },
        };
        Self::make_current(c, s);
        Self::pop(c, class)
    }

    /// Pops from the allocation list (null if empty).
    fn pop(c: &mut Owned<'_>, class: usize) -> *mut u8 {
        c.local.free[class]
            .pop()
            .map_or(core::ptr::null_mut(), |obj| obj.as_ptr().cast())
    }

    /// Moves the free objects of `s` (the cache's, on no list) to the
    /// allocation list of its class.
    fn make_current(c: &mut Owned<'_>, s: SlabRef) {
        let class = s.class();
        debug_assert!(c.local.free[class].is_empty());
        c.local.free[class] = s.take_free();
        c.local.current[class] = Some(s);
    }

    /// A slab for `class`, owned by `c`: its spare, or one from the node
    /// depot, or fresh pages. `None` when out of memory.
    fn acquire_slab(&self, c: &mut Owned<'_>, class: usize) -> Option<SlabRef> {
        if let Some(spare) = c.local.spare[class].take() {
            return Some(spare);
        }
        let node = c.local.node;
        let order = SLAB_ORDER[class];
        let mut mem = self.nodes[node].depot_pop(order);
        if mem.is_none() {
            self.reclaim_abandoned();
            mem = self.nodes[node].depot_pop(order);
        }
        if mem.is_none() {
            mem = (0..MAX_NODES).find_map(|i| {
                let n = (node + i) % MAX_NODES;
                self.nodes[n].pages.alloc(order).map(|p| (p, n))
            });
        }
        let (mem, node) = mem?;
        // SAFETY: `mem` is an empty block of `order` pages (the slab size of
        // `class`), aligned to its size, now ours alone (from a depot or a
        // page allocator); `class` is a valid class.
        Some(unsafe { SlabRef::init(mem, class, c.id, node) })
    }
}
