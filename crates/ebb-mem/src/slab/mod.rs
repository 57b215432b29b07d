//! `SlabAllocator`: fixed-size objects from slabs, with a per-core
//! representative, a per-node level and a root.
//!
//! The design follows Bonwick's slab allocator (*The Slab Allocator: An
//! Object-Caching Kernel Memory Allocator*, USENIX Summer 1994) and its
//! per-CPU extension (Bonwick & Adams, *Magazines and Vmem*, USENIX 2001), with
//! Hoard's ownership rule (Berger et al., *Hoard*, ASPLOS 2000): every slab
//! is owned by one core, only the owner allocates from it, and frees from
//! other cores go back to the owner. As in mimalloc (Leijen et al., 2019),
//! free lists are sharded per slab and remote frees travel on a separate
//! lock-free list ([`crate::remote_free`]), so the owner's fast paths need no
//! atomic operation at all.
//!
//! Levels:
//! - **Per core** ([`CoreCache`]): for every size class, the *current* slab
//!   whose free objects are the allocation list `free[class]`, a list of
//!   *partial* slabs (some objects free), one *spare* empty slab; the
//!   magazines in which it collects its frees of other cores' objects; and
//!   the inbox where other cores push magazines of its objects.
//! - **Per node**: a small depot of empty slabs by slab size, in front of the
//!   node's [`PageAllocator`]; rebalancing between cores happens here, since a
//!   slab emptied on one core is reused by any core of the node.
//! - **Root** ([`SlabAllocator`]): the nodes, the caches of exited threads
//!   (adopted by new threads, drained by anyone needing memory) and a shared,
//!   locked cache for threads that can no longer have one of their own.
//!
//! Slabs are buddy blocks, so they are aligned to their size; the header
//! sits at the start and the slab of an object is `addr & !(slab_size - 1)`
//! (the slab size is a function of the class, which the caller knows).
//!
//! Files, one job each, and the invariants their handle types carry (the
//! raw pointers are dereferenced in those types' methods, so the paths
//! that use them are mostly safe code):
//! - `header.rs`: the slab header; `SlabRef` (a slab whose holder — the
//!   owning cache's thread, or a depot under its lock — may use its
//!   owner-only fields), `FreeList` (dead objects linked through their
//!   first word) and `PartialList` (a cache's partial slabs of one class).
//! - `cache.rs`: [`CoreCache`]; `CacheId` (any cache, for its shared inbox
//!   and returned stack) and `Owned` (the owning thread's `&mut` hold on
//!   its owner-only part, made once per entry point and passed down).
//! - `magazine.rs`: [`Magazine`]; `MagazineRef` (one magazine its holder
//!   owns), `MagazineChain` (a linked chain of them) and `MagazineRun`
//!   (drained magazines going back to one home).
//! - `depot.rs`: the per-node level (page allocator and depot).
//! - `alloc.rs`, `free.rs`: the allocation and free paths.
//!
//! Fast-path cost, with the class known: allocation is a load of the core's
//! cache pointer, a load of `free[class]`, a null test and a load/store to
//! pop. A local free is the cache pointer, a mask, a compare of the slab's
//! owner, a push on the slab's `local_free`, a counter increment and one
//! combined bounds test that catches both "slab was full" and "slab is now
//! empty". No atomic instruction, no lock, no call.

use core::ptr::NonNull;

use crate::page::{PageAllocator, PageSource};
use crate::sync::SpinLock;

mod alloc;
mod cache;
mod depot;
mod free;
mod header;
mod magazine;

pub use cache::{is_empty_cache, CoreCache, EmptyCache, EMPTY_CACHE};
pub use depot::DEPOT_SLABS;
pub use magazine::{Magazine, MAGAZINE_CLASS, MAGAZINE_SLOTS};

use cache::{CacheId, Owned};
use depot::NodeLevel;

/// NUMA nodes supported (representatives of the page allocator and depot).
pub const MAX_NODES: usize = 4;

/// Remote frees a core batches before pushing them to the owner (one
/// magazine). Objects wait at most until the batch fills, the core's next
/// refill, a flush, or the core's exit.
pub const REMOTE_BATCH: usize = MAGAZINE_SLOTS;

/// A root list of caches owned by no core (abandoned caches, or the
/// fallback cache), linked through `next_abandoned`.
struct CacheList(Option<CacheId>);

// SAFETY: a cache on a root list is owned by no core; the list's lock
// serializes who takes it.
unsafe impl Send for CacheList {}

/// Root of the slab allocators: nodes, their depots and page allocators, and
/// the caches of exited threads.
pub struct SlabAllocator {
    nodes: [NodeLevel; MAX_NODES],
    abandoned: SpinLock<CacheList>,
    fallback: SpinLock<CacheList>,
}

impl SlabAllocator {
    /// A slab allocator whose page allocators grow from `source`.
    pub const fn new(source: &'static dyn PageSource) -> Self {
        Self {
            nodes: [
                NodeLevel::new(source, 0),
                NodeLevel::new(source, 1),
                NodeLevel::new(source, 2),
                NodeLevel::new(source, 3),
            ],
            abandoned: SpinLock::new(CacheList(None)),
            fallback: SpinLock::new(CacheList(None)),
        }
    }

    /// The page allocator representative of `node` (clamped to the nodes
    /// supported).
    pub fn pages(&self, node: usize) -> &PageAllocator {
        &self.nodes[node % MAX_NODES].pages
    }

    /// Pages in use from all nodes' page allocators: slabs (including those
    /// kept in depots and as spares) and core caches.
    pub fn used_pages(&self) -> usize {
        self.nodes.iter().map(|n| n.pages.used_pages()).sum()
    }

    /// Returns the empty slabs kept in node depots to the page allocators.
    pub fn trim(&self) {
        for n in &self.nodes {
            n.trim();
        }
    }

    /// A cache for a core on `node`: an abandoned one if any (adopting its
    /// slabs), else a fresh one. `None` when out of memory.
    pub fn new_cache(&self, node: usize) -> Option<NonNull<CoreCache>> {
        {
            let mut list = self.abandoned.lock();
            if let Some(id) = list.0 {
                // SAFETY: a cache on the abandoned list is owned by no core, and we
                // hold the list's lock, so nobody else takes it; no hold on it is
                // live.
                let c = unsafe { CoreCache::owned(id.as_ptr()) };
                list.0 = c.local.next_abandoned.take();
                return NonNull::new(id.as_ptr());
            }
        }
        let node = node % MAX_NODES;
        let page = self.pages(node).alloc(0)?;
        let cache = page.cast::<CoreCache>();
        // SAFETY: a fresh page, exclusively ours, large and aligned enough
        // for a `CoreCache` (checked at compile time in `cache.rs`).
        unsafe { cache.as_ptr().write(CoreCache::new(node)) };
        Some(cache)
    }

    /// Pushes every batched remote free of this core to its owner.
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the caller.
    pub unsafe fn flush_remote(cache: *mut CoreCache) {
        // SAFETY: the caller owns `cache`, a real cache, and holds no other
        // reference to it during the call.
        let mut c = unsafe { CoreCache::owned(cache) };
        Self::flush_pending(&mut c);
    }

    /// Sends every pending magazine of `c` to its owner.
    fn flush_pending(c: &mut Owned<'_>) {
        for p in &mut c.local.pending {
            p.flush();
        }
    }

    /// Returns every object and slab the cache holds but does not need:
    /// drains remote frees, gives back the current slabs' unallocated
    /// objects, and sends empty slabs (spares included) to the node depot.
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the caller.
    pub unsafe fn flush_cache(&self, cache: *mut CoreCache) {
        // SAFETY: the caller owns `cache`, a real cache of this allocator, and
        // holds no other reference to it during the call.
        let mut c = unsafe { CoreCache::owned(cache) };
        self.flush_owned(&mut c);
    }

    /// Retires the cache of an exiting core: flushes it and puts it on the
    /// abandoned list, where a new core adopts it (with its partial slabs and
    /// whatever other cores free to it meanwhile).
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the caller, who
    /// must not use it afterwards.
    pub unsafe fn retire_cache(&self, cache: *mut CoreCache) {
        // SAFETY: the caller owns `cache`, a real cache of this allocator, and
        // gives it up with this call.
        let c = unsafe { CoreCache::owned(cache) };
        self.retire_owned(c);
    }

    /// Flushes the held cache `c` and gives it up to the abandoned list.
    fn retire_owned(&self, mut c: Owned<'_>) {
        self.flush_owned(&mut c);
        let mut list = self.abandoned.lock();
        c.local.next_abandoned = list.0;
        list.0 = Some(c.id);
    }

    /// Runs `f` with the shared fallback cache, under its lock: for threads
    /// that cannot have a cache of their own (e.g. while they exit). `None`
    /// if out of memory.
    pub fn with_fallback<R>(&self, f: impl FnOnce(*mut CoreCache) -> R) -> Option<R> {
        let mut g = self.fallback.lock();
        let id = match g.0 {
            Some(id) => id,
            None => {
                let fresh = self.new_cache(0)?;
                // SAFETY: `fresh` was just made by `new_cache`.
                let id = unsafe { CacheId::new(fresh.as_ptr()) };
                g.0 = Some(id);
                id
            }
        };
        Some(f(id.as_ptr()))
    }

    /// Drains one abandoned cache that has pending remote frees, so memory
    /// freed to exited threads is found again.
    fn reclaim_abandoned(&self) {
        let c = {
            let Some(mut list) = self.abandoned.try_lock() else {
                return;
            };
            let Some(id) = list.0 else {
                return;
            };
            if !id.inbox().pending() && id.returned().is_empty() {
                return;
            }
            // SAFETY: `id` heads the abandoned list, whose lock we hold: no core
            // owns it and nobody else can take it; no hold on it is live.
            let c = unsafe { CoreCache::owned(id.as_ptr()) };
            list.0 = c.local.next_abandoned.take();
            c
        };
        self.retire_owned(c);
    }
}
