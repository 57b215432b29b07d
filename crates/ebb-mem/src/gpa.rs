//! `GeneralPurposeAllocator`: `malloc`/`GlobalAlloc` over the slab
//! allocators of every size class and, for larger requests, virtual regions.
//!
//! The per-core state is reached through the [`CoreLocal`] platform hook, not
//! through `EbbRef`: resolving an `EbbRef` miss allocates, and the allocator
//! must never allocate to find itself. Each platform implements the hook
//! with whatever per-core pointer it has (hosted: a `thread_local!` with
//! constant initialization, i.e. one `%fs`-relative load; native: the
//! per-core page at a fixed virtual address).

use core::alloc::{GlobalAlloc, Layout};
use core::marker::PhantomData;
use core::ptr::{self, NonNull};

use crate::page::PageSource;
use crate::region_cache::RegionCache;
use crate::size_class::{class_for, ClassOf, CLASS_SIZE};
use crate::slab::{is_empty_cache, CoreCache, SlabAllocator};
use crate::vmem::{AddressSpace, FaultPolicy, VMemAllocator};

/// The memory Ebbs of one platform instance: the slab allocators (with their
/// nodes and page allocators) and the virtual region allocator.
pub struct MemoryRoot {
    /// Slab allocators of every size class, with their per-node levels.
    pub slabs: SlabAllocator,
    /// Virtual regions (large allocations, stacks, owner-managed ranges).
    pub vmem: VMemAllocator,
    /// Freed large allocations kept for the next of about their size.
    pub large: RegionCache,
}

impl MemoryRoot {
    /// A root whose page allocators grow from `pages` and whose regions are
    /// reserved in `space`.
    pub const fn new(pages: &'static dyn PageSource, space: &'static dyn AddressSpace) -> Self {
        Self {
            slabs: SlabAllocator::new(pages),
            vmem: VMemAllocator::new(space),
            large: RegionCache::new(),
        }
    }
}

/// The platform hook that gives the allocator its per-core state.
///
/// # Safety
/// `current_core_cache` must return either [`crate::slab::EMPTY_CACHE`] or a
/// cache from `root().slabs` that only the calling core uses for as long as
/// it stays installed; `attach_core_cache` must install (and return) such a
/// cache, or return null.
pub unsafe trait CoreLocal: 'static {
    /// The memory root of this platform.
    fn root() -> &'static MemoryRoot;
    /// This core's cache; the empty sentinel if it has none (yet). Called on
    /// every allocation and free: must be a load or two.
    fn current_core_cache() -> *mut CoreCache;
    /// Slow path: gives this core a cache (new or adopted) and returns it,
    /// or null if the core cannot have one now (e.g. its thread is exiting);
    /// the allocator then uses the shared fallback cache.
    fn attach_core_cache() -> *mut CoreCache;
}

/// The general-purpose allocator of platform `P`. A zero-sized handle: all
/// state lives in `P::root()` and the per-core caches.
pub struct GeneralPurposeAllocator<P>(PhantomData<fn() -> P>);

impl<P: CoreLocal> Default for GeneralPurposeAllocator<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: CoreLocal> GeneralPurposeAllocator<P> {
    /// The allocator handle (usable in a `static`).
    pub const fn new() -> Self {
        Self(PhantomData)
    }

    /// Allocates an object of size class `class` (see
    /// [`crate::size_class`]); null when out of memory.
    #[inline(always)]
    pub fn alloc_class(&self, class: usize) -> *mut u8 {
        assert!(class < crate::size_class::NUM_CLASSES);
        let cache = P::current_core_cache();
        // SAFETY: the hook guarantees `cache` is the sentinel or ours.
        let p = unsafe { SlabAllocator::alloc_fast(cache, class) };
        if !p.is_null() {
            return p;
        }
        Self::alloc_small_slow(class)
    }

    /// Frees an object of size class `class`.
    ///
    /// # Safety
    /// `ptr` must come from this allocator with the same class and be live.
    #[inline(always)]
    pub unsafe fn dealloc_class(&self, ptr: *mut u8, class: usize) {
        // SAFETY: forwarded contract; the hook guarantees the caches.
        unsafe {
            P::root().slabs.free_or_attach(
                P::current_core_cache(),
                ptr,
                class,
                P::attach_core_cache,
            )
        }
    }

    /// Allocates uninitialized memory for a `T`, choosing the size class at
    /// compile time.
    #[inline(always)]
    pub fn alloc_typed<T>(&self) -> Option<NonNull<T>> {
        match const { ClassOf::<T>::CLASS } {
            Some(c) => NonNull::new(self.alloc_class(c).cast()),
            // SAFETY: the layout of a sized type is valid; large types go to
            // virtual regions.
            None => NonNull::new(unsafe { self.alloc(Layout::new::<T>()) }.cast()),
        }
    }

    /// Frees memory from [`Self::alloc_typed`] (does not drop the value).
    ///
    /// # Safety
    /// `ptr` must come from `alloc_typed::<T>` on this allocator and be live.
    #[inline(always)]
    pub unsafe fn dealloc_typed<T>(&self, ptr: NonNull<T>) {
        match const { ClassOf::<T>::CLASS } {
            // SAFETY: forwarded contract.
            Some(c) => unsafe { self.dealloc_class(ptr.as_ptr().cast(), c) },
            // SAFETY: forwarded contract.
            None => unsafe { self.dealloc(ptr.as_ptr().cast(), Layout::new::<T>()) },
        }
    }

    /// Returns what this core's cache holds but does not use (unallocated
    /// objects of its current slabs, empty slabs) to the node level.
    pub fn flush_core_cache(&self) {
        let cache = P::current_core_cache();
        if !is_empty_cache(cache) {
            // SAFETY: the hook guarantees a non-sentinel cache is this core's.
            unsafe { P::root().slabs.flush_cache(cache) };
        }
    }

    #[cold]
    #[inline(never)]
    fn alloc_small_slow(class: usize) -> *mut u8 {
        let slabs = &P::root().slabs;
        let mut cache = P::current_core_cache();
        if is_empty_cache(cache) {
            cache = P::attach_core_cache();
            if cache.is_null() {
                return slabs
                    // SAFETY: the fallback cache is ours while its lock is held.
                    .with_fallback(|f| unsafe { slabs.alloc(f, class) })
                    .unwrap_or(ptr::null_mut());
            }
        }
        // SAFETY: a cache installed by the hook belongs to this core.
        unsafe { slabs.alloc(cache, class) }
    }

    /// A region for `layout`: a kept one if there is one of about its size
    /// (zeroed here if `zeroed`, as a fresh one is), else a fresh one.
    #[cold]
    fn alloc_large(layout: Layout, zeroed: bool) -> *mut u8 {
        let root = P::root();
        if let Some((start, _)) = root.large.take(layout.size(), layout.align()) {
            if zeroed {
                // SAFETY: a kept region is live, ours alone, and at least
                // `layout.size()` bytes long (`take` checks its length).
                unsafe { ptr::write_bytes(start.as_ptr(), 0, layout.size()) };
            }
            return start.as_ptr();
        }
        root.vmem
            .reserve(
                layout.size(),
                layout.align(),
                FaultPolicy::DemandZero,
                false,
            )
            .map_or(ptr::null_mut(), NonNull::as_ptr)
    }

    #[cold]
    unsafe fn dealloc_large(ptr: *mut u8) {
        let Some(p) = NonNull::new(ptr) else {
            return;
        };
        let root = P::root();
        // SAFETY: large allocations are regions of `vmem` (caller's
        // contract: `ptr` came from `alloc_large`).
        let len = unsafe { root.vmem.region_len(p) };
        if let Err(p) = root.large.keep(p, len) {
            // SAFETY: `p` is the start of a live `vmem` region no one uses:
            // this one (from `alloc_large`, freed by the caller), or one the
            // cache kept unused and gave back to make room.
            unsafe { root.vmem.release(p) };
        }
    }
}

// SAFETY: small requests get objects of a class whose size and alignment
// cover the layout (`class_for`); large requests get regions (fresh, or freed
// ones kept unused in `large`) aligned as asked. Objects are handed out once until freed (slab free lists), and
// failure returns null.
unsafe impl<P: CoreLocal> GlobalAlloc for GeneralPurposeAllocator<P> {
    #[inline(always)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_for(layout.size(), layout.align()) {
            Some(class) => self.alloc_class(class),
            None => Self::alloc_large(layout, false),
        }
    }

    #[inline(always)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_for(layout.size(), layout.align()) {
            // SAFETY: `ptr` was allocated with this layout, hence this class.
            Some(class) => unsafe { self.dealloc_class(ptr, class) },
            // SAFETY: `ptr` was allocated with this layout, hence a region.
            None => unsafe { Self::dealloc_large(ptr) },
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match class_for(layout.size(), layout.align()) {
            Some(class) => {
                let p = self.alloc_class(class);
                if !p.is_null() {
                    // SAFETY: `p` is a fresh object of at least `size` bytes.
                    unsafe { ptr::write_bytes(p, 0, layout.size()) };
                }
                p
            }
            // Fresh regions are demand-zero; kept ones are zeroed.
            None => Self::alloc_large(layout, true),
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return ptr::null_mut();
        };
        match (
            class_for(layout.size(), layout.align()),
            class_for(new_size, layout.align()),
        ) {
            (Some(a), Some(b)) if a == b => return ptr,
            (None, None) => {
                let Some(user) = NonNull::new(ptr) else {
                    return ptr::null_mut();
                };
                // SAFETY: `ptr` is a live region (caller's contract).
                let cap = unsafe { P::root().vmem.region_len(user) };
                if new_size <= cap && new_size >= cap / 2 {
                    return ptr;
                }
            }
            _ => {}
        }
        // SAFETY: `new_layout` has the old alignment and a valid size.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            let keep = layout.size().min(new_size);
            debug_assert!(class_for(new_size, layout.align()).is_none_or(|c| CLASS_SIZE[c] >= keep));
            // SAFETY: both blocks are live, distinct and at least `keep` long.
            unsafe { ptr::copy_nonoverlapping(ptr, new, keep) };
            // SAFETY: `ptr` is live with `layout` (caller's contract) and its
            // contents have been copied.
            unsafe { self.dealloc(ptr, layout) };
        }
        new
    }
}
