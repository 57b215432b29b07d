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
//! Fast-path cost, with the class known: allocation is a load of the core's
//! cache pointer, a load of `free[class]`, a null test and a load/store to
//! pop. A local free is the cache pointer, a mask, a compare of the slab's
//! owner, a push on the slab's `local_free`, a counter increment and one
//! combined bounds test that catches both "slab was full" and "slab is now
//! empty". No atomic instruction, no lock, no call.

use core::mem::{align_of, size_of, MaybeUninit};
use core::ptr::{self, NonNull};
use core::sync::atomic::AtomicPtr;

use crate::page::{PageAllocator, PageSource};
use crate::remote_free::{FreeObject, Link, ObjectQueues, TakeAllStack};
use crate::size_class::{
    class_for_aligned, CAPACITY, CLASS_SIZE, FIRST_OFFSET, NUM_CLASSES, SLAB_HEADER_BYTES,
    SLAB_ORDER,
};
use crate::sync::SpinLock;
use crate::PAGE_SIZE;

/// NUMA nodes supported (representatives of the page allocator and depot).
pub const MAX_NODES: usize = 4;
/// Empty slabs a node's depot keeps per slab size before returning pages.
pub const DEPOT_SLABS: usize = 16;
/// Smallest slab order (64 KiB); the depot is indexed from it.
const MIN_SLAB_ORDER: usize = 4;
/// Distinct slab orders (64 KiB .. 512 KiB).
const DEPOT_ORDERS: usize = 4;

const CURRENT: u8 = 0;
const PARTIAL: u8 = 1;
const FULL: u8 = 2;
const SPARE: u8 = 3;

/// The header at the start of every slab.
#[repr(C)]
struct Slab {
    /// Fields only the owning core touches.
    local: SlabLocal,
    /// Fields other cores read, on their own cache line so that the owner's
    /// frees do not take the line away from remote freers.
    shared: SlabShared,
}

#[repr(C, align(64))]
struct SlabShared {
    /// The core cache that owns the slab; read by any core freeing one of its
    /// objects, written only while the slab has no live object.
    owner: *mut CoreCache,
    class: u8,
    node: u8,
}

#[repr(C)]
struct SlabLocal {
    /// Objects freed by the owner (or drained from its remote queue).
    local_free: *mut FreeObject,
    /// Length of `local_free`.
    nfree: u32,
    /// `capacity - 2`: `nfree - 2 >= cap_m2` (wrapping) tests both
    /// `nfree == 1` (was full) and `nfree == capacity` (now empty).
    cap_m2: u32,
    prev: *mut Slab,
    next: *mut Slab,
    capacity: u32,
    state: u8,
}

const _: () = assert!(size_of::<Slab>() <= SLAB_HEADER_BYTES);

/// The per-core representative of the slab allocators of every size class.
///
/// One structure per core holds the representatives of all classes, so a
/// single per-core pointer (see [`crate::CoreLocal`]) reaches them.
#[repr(C, align(64))]
pub struct CoreCache {
    /// Touched only by the owning core.
    local: CacheLocal,
    /// Written by cores freeing this core's objects: kept on its own cache
    /// lines.
    remote: Padded<Inbox>,
    /// This core's magazines, given back by the cores it sent them to.
    returned: Padded<MagazineStack>,
}

/// What other cores send to a core: magazines of its objects, and (rarely)
/// single objects.
struct Inbox {
    /// Full magazines of objects this core owns (the normal path).
    magazines: MagazineStack,
    /// Single objects, per class: from cores without a cache, or without a
    /// magazine (out of memory).
    objects: ObjectQueues<NUM_CLASSES>,
}

impl Inbox {
    /// Whether something may be waiting (cheap, may be stale).
    #[inline(always)]
    fn pending(&self) -> bool {
        !self.magazines.is_empty() || self.objects.pending()
    }
}

type MagazineStack = TakeAllStack<Magazine, AtomicPtr<Magazine>>;

/// Object pointers in one magazine.
pub const MAGAZINE_SLOTS: usize = 61;

/// A batch of remote frees: pointers to dead objects of one class, all
/// owned by one core, collected by another core (the magazine's *home*).
///
/// A magazine is itself an object of [`MAGAZINE_CLASS`] allocated by its
/// home from its own slabs. The home fills it and pushes it on the owner's
/// inbox; the owner frees the objects it points to and pushes it back on the
/// home's `returned` stack. So the freeing core never writes a freed object,
/// and the owner reads the pointers sequentially.
#[repr(C, align(64))]
pub struct Magazine {
    /// Link on an inbox, a `returned` stack or the home's pool.
    next: *mut Magazine,
    /// The core cache that allocated the magazine (and owns its slab).
    home: *mut CoreCache,
    class: u32,
    count: u32,
    /// The first `count` are dead objects of `class`; the rest unused.
    slots: [MaybeUninit<*mut FreeObject>; MAGAZINE_SLOTS],
}

const _: () = assert!(size_of::<Magazine>() == 512);

/// The size class magazines are allocated from.
pub const MAGAZINE_CLASS: usize =
    match class_for_aligned(size_of::<Magazine>(), align_of::<Magazine>()) {
        Some(c) => c,
        None => panic!("magazines must be small objects"),
    };

/// Empty magazines a core keeps; more are freed when they come back.
const MAGAZINE_POOL: usize = 16;

impl Link for Magazine {
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

/// A magazine the caller holds.
///
/// # Safety
/// `m` must be an initialized magazine that the caller owns (its home's
/// pool, filling it, or taken from an inbox), with no other reference live.
#[inline(always)]
unsafe fn mag<'a>(m: *mut Magazine) -> &'a mut Magazine {
    // SAFETY: the caller's contract.
    unsafe { &mut *m }
}

#[repr(C)]
struct CacheLocal {
    /// Allocation list per class: free objects of the current slab.
    free: [*mut FreeObject; NUM_CLASSES],
    current: [*mut Slab; NUM_CLASSES],
    partial: [*mut Slab; NUM_CLASSES],
    spare: [*mut Slab; NUM_CLASSES],
    /// Remote frees waiting to be sent to one owner, per class (batching:
    /// one compare-and-swap per [`REMOTE_BATCH`] objects).
    pending: [Pending; NUM_CLASSES],
    /// Empty magazines of this core (linked through `next`).
    magazines: *mut Magazine,
    /// Length of `magazines`.
    nmagazines: usize,
    node: usize,
    next_abandoned: *mut CoreCache,
}

/// The magazine this core is filling with objects of one class that belong
/// to `owner` (null when none).
#[derive(Clone, Copy)]
struct Pending {
    owner: *mut CoreCache,
    magazine: *mut Magazine,
}

const NO_PENDING: Pending = Pending {
    owner: ptr::null_mut(),
    magazine: ptr::null_mut(),
};

/// Remote frees a core batches before pushing them to the owner (one
/// magazine). Objects wait at most until the batch fills, the core's next
/// refill, a flush, or the core's exit.
pub const REMOTE_BATCH: usize = MAGAZINE_SLOTS;

#[repr(C, align(64))]
struct Padded<T>(T);

const _: () = assert!(size_of::<CoreCache>() <= PAGE_SIZE);

impl CoreCache {
    const fn new(node: usize) -> Self {
        Self {
            local: CacheLocal {
                free: [ptr::null_mut(); NUM_CLASSES],
                current: [ptr::null_mut(); NUM_CLASSES],
                partial: [ptr::null_mut(); NUM_CLASSES],
                spare: [ptr::null_mut(); NUM_CLASSES],
                pending: [NO_PENDING; NUM_CLASSES],
                magazines: ptr::null_mut(),
                nmagazines: 0,
                node,
                next_abandoned: ptr::null_mut(),
            },
            remote: Padded(Inbox {
                magazines: MagazineStack::new(),
                objects: ObjectQueues::new(),
            }),
            returned: Padded(MagazineStack::new()),
        }
    }
}

/// A cache with nothing in it, never written: the value a core's cache
/// pointer holds before the core has a cache. Allocation from it always
/// takes the slow path; no slab is owned by it, so frees through it are
/// remote frees to the real owner.
pub struct EmptyCache(CoreCache);

// SAFETY: the empty cache is never written (nothing is ever pushed to its
// queues, as no slab names it as owner), so sharing it is sound.
unsafe impl Sync for EmptyCache {}

/// See [`EmptyCache`].
pub static EMPTY_CACHE: EmptyCache = EmptyCache(CoreCache::new(0));

impl EmptyCache {
    /// The sentinel as a cache pointer (only ever read through).
    #[inline(always)]
    pub const fn as_ptr(&'static self) -> *mut CoreCache {
        ptr::from_ref(&self.0).cast_mut()
    }
}

/// Whether `cache` is the [`EMPTY_CACHE`] sentinel.
#[inline(always)]
pub fn is_empty_cache(cache: *mut CoreCache) -> bool {
    ptr::eq(cache, EMPTY_CACHE.as_ptr())
}

/// The owner-only part of a cache.
///
/// # Safety
/// `cache` must be a real cache (not the sentinel) owned by the caller, and
/// no other reference to its local part may be live.
#[inline(always)]
unsafe fn cl<'a>(cache: *mut CoreCache) -> &'a mut CacheLocal {
    // SAFETY: the caller's contract.
    unsafe { &mut (*cache).local }
}

/// The owner-only part of a slab header.
///
/// # Safety
/// `s` must be a slab owned by the caller's cache (or free and held by the
/// caller), and no other reference to its local part may be live.
#[inline(always)]
unsafe fn sl<'a>(s: *mut Slab) -> &'a mut SlabLocal {
    // SAFETY: the caller's contract.
    unsafe { &mut (*s).local }
}

/// The class of a slab (immutable while the caller holds it or one of its
/// objects).
#[inline(always)]
unsafe fn class_of(s: *mut Slab) -> usize {
    // SAFETY: the caller's contract: the header is initialized.
    unsafe { (*s).shared.class as usize }
}

/// Pushes a pending magazine to its owner and empties the slot.
///
/// # Safety
/// The magazine (and the objects it names) must be the caller's.
#[inline(always)]
unsafe fn flush_pending(p: &mut Pending) {
    let m = p.magazine;
    if !m.is_null() {
        // SAFETY: caches are never deallocated, so `owner` is valid.
        let inbox = unsafe { &(*p.owner).remote.0 };
        // SAFETY: the magazine is ours and on no list; it passes to the
        // owner (the Release push publishes its slots and count).
        unsafe { inbox.magazines.push_chain(m, m) };
    }
    *p = NO_PENDING;
}

/// Pushes the magazines `first ..= last` (linked) on `home`'s returned
/// stack.
///
/// # Safety
/// The magazines must be empty, owned by the caller and have home `home`.
unsafe fn give_back(home: *mut CoreCache, first: *mut Magazine, last: *mut Magazine) {
    // SAFETY: caches are never deallocated, so `home` is valid.
    let returned = unsafe { &(*home).returned.0 };
    // SAFETY: the chain is the caller's and passes to its home (the Release
    // push orders our reads of the slots before the home's reuse).
    unsafe { returned.push_chain(first, last) };
}

/// The first word of a free object.
///
/// # Safety
/// `obj` must be a dead object the caller holds.
#[inline(always)]
unsafe fn link<'a>(obj: *mut FreeObject) -> &'a mut *mut FreeObject {
    // SAFETY: the caller's contract.
    unsafe { &mut (*obj).next }
}

struct CachePtr(*mut CoreCache);
// SAFETY: a cache on a root list is owned by no core; the list's lock
// serializes who takes it.
unsafe impl Send for CachePtr {}

struct Depot {
    lists: [*mut Slab; DEPOT_ORDERS],
    counts: [usize; DEPOT_ORDERS],
}
// SAFETY: slabs in the depot are empty and owned by the depot; its lock
// serializes access.
unsafe impl Send for Depot {}

struct NodeLevel {
    pages: PageAllocator,
    depot: SpinLock<Depot>,
}

/// Root of the slab allocators: nodes, their depots and page allocators, and
/// the caches of exited threads.
pub struct SlabAllocator {
    nodes: [NodeLevel; MAX_NODES],
    abandoned: SpinLock<CachePtr>,
    fallback: SpinLock<CachePtr>,
}

#[inline(always)]
fn slab_of(obj: *mut u8, class: usize) -> *mut Slab {
    let mask = (PAGE_SIZE << SLAB_ORDER[class]) - 1;
    obj.map_addr(|a| a & !mask).cast()
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
            abandoned: SpinLock::new(CachePtr(ptr::null_mut())),
            fallback: SpinLock::new(CachePtr(ptr::null_mut())),
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
            let mut d = n.depot.lock();
            for i in 0..DEPOT_ORDERS {
                let mut s = core::mem::replace(&mut d.lists[i], ptr::null_mut());
                d.counts[i] = 0;
                while let Some(slab) = NonNull::new(s) {
                    // SAFETY: depot slabs are empty and owned by the depot,
                    // whose lock we hold.
                    s = unsafe { sl(s) }.next;
                    // SAFETY: a depot slab is a block of `MIN_SLAB_ORDER + i`
                    // pages from this node's page allocator.
                    unsafe { n.pages.free(slab.cast(), MIN_SLAB_ORDER + i) };
                }
            }
        }
    }

    /// A cache for a core on `node`: an abandoned one if any (adopting its
    /// slabs), else a fresh one. `None` when out of memory.
    pub fn new_cache(&self, node: usize) -> Option<NonNull<CoreCache>> {
        {
            let mut list = self.abandoned.lock();
            let c = list.0;
            if !c.is_null() {
                // SAFETY: caches on the abandoned list are valid and owned by
                // the list, whose lock we hold.
                list.0 = unsafe { cl(c) }.next_abandoned;
                return NonNull::new(c);
            }
        }
        let node = node % MAX_NODES;
        let page = self.pages(node).alloc(0)?;
        let cache = page.cast::<CoreCache>();
        // SAFETY: a fresh page, exclusively ours, large and aligned enough
        // for a `CoreCache` (checked at compile time above).
        unsafe { cache.as_ptr().write(CoreCache::new(node)) };
        Some(cache)
    }

    /// Allocates an object of `class` from the cache's allocation list, or
    /// returns null if the list is empty (then call [`Self::refill`]).
    ///
    /// # Safety
    /// `cache` must be [`EMPTY_CACHE`] or a cache from this allocator owned
    /// by the calling thread; `class < NUM_CLASSES`.
    #[inline(always)]
    pub unsafe fn alloc_fast(cache: *mut CoreCache, class: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `cache` is valid; this only computes
        // a field address (the sentinel is never written: its lists are null).
        let slot = unsafe { &raw mut (*cache).local.free[class] };
        // SAFETY: `slot` is a valid, initialized field of the cache.
        let head = unsafe { *slot };
        if !head.is_null() {
            // SAFETY: `head` is a free object of the current slab, which
            // only this core pops from: its first word links to the next.
            let next = unsafe { *link(head) };
            // SAFETY: non-null list, so `cache` is a real cache we own.
            unsafe { *slot = next };
        }
        head.cast()
    }

    /// Allocates an object of `class` (fast path, then refill).
    ///
    /// # Safety
    /// As [`Self::refill`].
    #[inline(always)]
    pub unsafe fn alloc(&self, cache: *mut CoreCache, class: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { Self::alloc_fast(cache, class) };
        if !p.is_null() {
            return p;
        }
        // SAFETY: forwarded contract.
        unsafe { self.refill(cache, class) }
    }

    /// Slow path of allocation: drains remote frees, moves to another slab
    /// or takes a new one. Returns null when out of memory.
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the calling
    /// thread (not [`EMPTY_CACHE`]); `class < NUM_CLASSES`.
    #[cold]
    #[inline(never)]
    pub unsafe fn refill(&self, cache: *mut CoreCache, class: usize) -> *mut u8 {
        debug_assert!(!is_empty_cache(cache));
        // SAFETY: the caller owns `cache`, so reading its inbox's pending
        // flag races no other reader of this cache; the reference ends with
        // the call.
        let pending = unsafe { &(*cache).remote.0 }.pending();
        // SAFETY: the caller owns `cache`, so its pending magazines (and the
        // objects in them) are ours to push to their owners.
        unsafe { Self::flush_remote(cache) };
        if pending {
            // SAFETY: the caller owns `cache`, so this thread is the only consumer
            // of its inbox, and every slab whose objects arrive there is ours.
            unsafe { self.drain_remote(cache) };
        }
        // SAFETY: `cache` is the caller's; the reference to its local part ends
        // with this statement.
        let cur = unsafe { cl(cache) }.current[class];
        if !cur.is_null() {
            // SAFETY: `cur` is this cache's current slab, so its local part is ours;
            // no other reference to it is live.
            let l = unsafe { sl(cur) };
            if !l.local_free.is_null() {
                // SAFETY: `cur` is owned by `cache`, which the caller owns, and has free
                // objects, as `make_current` needs; `l` is not used again.
                unsafe { Self::make_current(cache, cur) };
                // SAFETY: `cache` is the caller's and `class < NUM_CLASSES` (contract);
                // `make_current` just filled its free list.
                return unsafe { Self::alloc_fast(cache, class) };
            }
            l.state = FULL;
            // SAFETY: `cache` is the caller's; `l` is not used after this.
            unsafe { cl(cache) }.current[class] = ptr::null_mut();
        }
        // SAFETY: `cache` is the caller's; the reference ends with the statement.
        let mut s = unsafe { cl(cache) }.partial[class];
        if !s.is_null() {
            // SAFETY: `s` heads this cache's partial list, so it is an owned slab
            // on that list, as `unlink_partial` needs; no local reference is live.
            unsafe { Self::unlink_partial(cache, s) };
        } else {
            // SAFETY: `cache` is a cache of this allocator owned by the caller and
            // `class < NUM_CLASSES` (contract); no local reference is live.
            s = unsafe { self.acquire_slab(cache, class) };
            if s.is_null() {
                return ptr::null_mut();
            }
        }
        // SAFETY: `s` was just unlinked or acquired: owned by `cache`, on no
        // list, with free objects.
        unsafe { Self::make_current(cache, s) };
        // SAFETY: `cache` is the caller's and `class < NUM_CLASSES`;
        // `make_current` just filled its free list.
        unsafe { Self::alloc_fast(cache, class) }
    }

    /// Frees an object of `class` allocated from this allocator by any core.
    ///
    /// # Safety
    /// `cache` must be [`EMPTY_CACHE`] or a cache from this allocator owned by
    /// the calling thread; `ptr` must be a live object of `class` from this
    /// allocator, not used after this call.
    #[inline(always)]
    pub unsafe fn free(&self, cache: *mut CoreCache, ptr: *mut u8, class: usize) {
        // SAFETY: forwarded contract.
        unsafe { self.free_or_attach(cache, ptr, class, ptr::null_mut) }
    }

    /// [`Self::free`], where a core without a cache (the sentinel) may get
    /// one from `attach` (which returns null if it cannot) to batch its
    /// remote frees.
    ///
    /// # Safety
    /// As [`Self::free`]; a cache `attach` returns must be owned by the caller.
    #[inline(always)]
    pub unsafe fn free_or_attach(
        &self,
        cache: *mut CoreCache,
        ptr: *mut u8,
        class: usize,
        attach: impl FnOnce() -> *mut CoreCache,
    ) {
        let slab = slab_of(ptr, class);
        let obj = ptr.cast::<FreeObject>();
        // SAFETY: `ptr` is a live object, so its slab's header is valid and
        // its owner field is fixed while the object lives (written before the
        // object was handed out, which happens-before this free).
        let owner = unsafe { (*slab).shared.owner };
        if owner == cache {
            // SAFETY: we own the slab and the dead object.
            unsafe { self.free_owned(cache, slab, obj) };
        } else {
            // SAFETY: forwarded contract; the object is dead.
            unsafe { self.free_remote(cache, owner, obj, class, attach) };
        }
    }

    /// Puts a dead object on its slab's `local_free` list: the free of an
    /// object whose slab `cache` owns (by the owner, or drained from its
    /// inbox).
    ///
    /// # Safety
    /// `cache` must be owned by the caller and own `slab`, the slab of the
    /// dead object `obj`; no reference to either's local part may be live.
    #[inline(always)]
    unsafe fn free_owned(&self, cache: *mut CoreCache, slab: *mut Slab, obj: *mut FreeObject) {
        // SAFETY: the caller's contract: we own the slab (so no other core
        // touches its local part, and no other reference to it is live).
        let l = unsafe { sl(slab) };
        // SAFETY: the object is dead: its first word may hold the link.
        unsafe { *link(obj) = l.local_free };
        l.local_free = obj;
        let n = l.nfree + 1;
        l.nfree = n;
        if n.wrapping_sub(2) >= l.cap_m2 {
            // SAFETY: we own `cache` and the slab; `l` is dead now.
            unsafe { self.transition(cache, slab) };
        }
    }

    /// A free of an object owned by another core: its pointer goes into
    /// this core's magazine for that owner and class (the object itself is
    /// not written); a full magazine goes to the owner's inbox.
    ///
    /// This is the common case, kept small (few registers, no calls) so it
    /// costs a handful of instructions; everything else is in
    /// [`Self::free_remote_slow`].
    #[inline(never)]
    unsafe fn free_remote(
        &self,
        cache: *mut CoreCache,
        owner: *mut CoreCache,
        obj: *mut FreeObject,
        class: usize,
        attach: impl FnOnce() -> *mut CoreCache,
    ) {
        if !is_empty_cache(cache) {
            // SAFETY: a cache other than the sentinel is ours (caller's
            // contract); no other reference to its local part is live.
            let p = unsafe { &cl(cache).pending[class] };
            let m = p.magazine;
            if p.owner == owner && !m.is_null() {
                // SAFETY: `m` is the magazine we are filling.
                let mg = unsafe { mag(m) };
                // Not full: a full magazine is pushed at once.
                let n = mg.count as usize;
                if n + 1 < MAGAZINE_SLOTS {
                    mg.slots[n].write(obj);
                    mg.count += 1;
                    return;
                }
            }
        }
        // SAFETY: forwarded contract.
        unsafe { self.free_remote_slow(cache, owner, obj, class, attach) };
    }

    /// [`Self::free_remote`] when the core has no cache yet, or no magazine
    /// for this owner and class, or the magazine becomes full.
    #[cold]
    #[inline(never)]
    unsafe fn free_remote_slow(
        &self,
        cache: *mut CoreCache,
        owner: *mut CoreCache,
        obj: *mut FreeObject,
        class: usize,
        attach: impl FnOnce() -> *mut CoreCache,
    ) {
        if is_empty_cache(cache) {
            let cache = attach();
            if cache.is_null() || is_empty_cache(cache) {
                // SAFETY: the object is dead and passes to its owner (caches
                // are never deallocated, so `owner` is valid).
                unsafe { Self::push_object(owner, obj, class) };
                return;
            }
            // SAFETY: `cache` was just installed for this core (it may even
            // own the object: an adopted cache); the object is dead.
            unsafe { self.free_or_attach(cache, obj.cast(), class, ptr::null_mut) };
            return;
        }
        // SAFETY: `cache` is ours (caller's contract); no other reference to
        // its local part is live here or below.
        let p = unsafe { &mut cl(cache).pending[class] };
        let mut m = p.magazine;
        if p.owner != owner || m.is_null() {
            // SAFETY: the magazine is ours.
            unsafe { flush_pending(p) };
            // SAFETY: `cache` is ours (caller's contract) and `p`, the only
            // reference to its local part, is not used again before it is rebuilt.
            m = unsafe { self.take_magazine(cache, class) };
            if m.is_null() {
                // SAFETY: no magazine to batch into (out of memory): the dead object
                // passes to its owner alone; caches are never deallocated, so `owner` is
                // valid.
                unsafe { Self::push_object(owner, obj, class) };
                return;
            }
            // SAFETY: `cache` is ours; `p` is dead, so this is the only reference
            // to its local part.
            unsafe { cl(cache) }.pending[class] = Pending { owner, magazine: m };
        }
        // SAFETY: `m` is the magazine we are filling.
        let mg = unsafe { mag(m) };
        // Not full: a full magazine is pushed at once.
        let n = mg.count as usize;
        mg.slots[n].write(obj);
        mg.count += 1;
        if n + 1 == MAGAZINE_SLOTS {
            // SAFETY: `cache` is ours; `mg` points into the magazine, not the
            // cache, and `p` from above is dead: this is the only local reference.
            let p = unsafe { &mut cl(cache).pending[class] };
            // SAFETY: the magazine is ours.
            unsafe { flush_pending(p) };
        }
    }

    /// The unbatched remote free: one compare-and-swap on the owner's stack
    /// for the class.
    #[cold]
    unsafe fn push_object(owner: *mut CoreCache, obj: *mut FreeObject, class: usize) {
        // SAFETY: caches are never deallocated, so `owner` is valid.
        let queues = unsafe { &(*owner).remote.0.objects };
        // SAFETY: the object is dead (caller's contract) and passes to the
        // owner.
        unsafe { queues.push(class, obj) };
    }

    /// An empty magazine for objects of `class`: from this core's pool, or
    /// those other cores gave back, or a new one. Null when out of memory.
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the caller, with
    /// no reference to its local part live.
    #[cold]
    #[inline(never)]
    unsafe fn take_magazine(&self, cache: *mut CoreCache, class: usize) -> *mut Magazine {
        // SAFETY: the caller's contract.
        let c = unsafe { cl(cache) };
        if c.magazines.is_null() {
            // SAFETY: `cache` is valid; only its owner takes its returned
            // magazines.
            let mut m = unsafe { &(*cache).returned.0 }.take_all();
            // Keep up to `MAGAZINE_POOL`; free the rest (they are objects of
            // our own slabs). The Acquire in `take_all` orders the last
            // user's reads of their slots before our reuse.
            while !m.is_null() {
                // SAFETY: a returned magazine is ours again.
                let mg = unsafe { mag(m) };
                let next = mg.next;
                if c.nmagazines < MAGAZINE_POOL {
                    mg.next = c.magazines;
                    c.magazines = m;
                    c.nmagazines += 1;
                } else {
                    // SAFETY: `m` is a returned magazine of `cache` (ours again, on no
                    // list); `free_magazine` takes the local part itself and `c` is not
                    // used during the call.
                    unsafe { self.free_magazine(cache, m) };
                }
                m = next;
            }
        }
        // SAFETY: the caller's contract; `c` from the loop above is dead, so
        // this is the only reference to the local part.
        let c = unsafe { cl(cache) };
        let m = c.magazines;
        if m.is_null() {
            // SAFETY: `cache` is ours; nothing references its local part.
            let m = unsafe { self.alloc(cache, MAGAZINE_CLASS) }.cast::<Magazine>();
            if !m.is_null() {
                // Class indices are small.
                #[allow(clippy::cast_possible_truncation)]
                let fresh = Magazine {
                    next: ptr::null_mut(),
                    home: cache,
                    class: class as u32,
                    count: 0,
                    slots: [MaybeUninit::uninit(); MAGAZINE_SLOTS],
                };
                // SAFETY: a fresh object of `MAGAZINE_CLASS`, which has the
                // size and alignment of a `Magazine`.
                unsafe { m.write(fresh) };
            }
            return m;
        }
        // SAFETY: pool magazines are ours.
        let mg = unsafe { mag(m) };
        c.magazines = mg.next;
        c.nmagazines -= 1;
        // Class indices are small.
        #[allow(clippy::cast_possible_truncation)]
        {
            mg.class = class as u32;
        }
        mg.count = 0;
        m
    }

    /// Frees one of this core's magazines (a local free).
    ///
    /// # Safety
    /// `m` must be an empty magazine whose home is `cache`, owned by the
    /// caller, with no reference to the cache's local part live.
    unsafe fn free_magazine(&self, cache: *mut CoreCache, m: *mut Magazine) {
        let obj = m.cast::<u8>();
        let slab = slab_of(obj, MAGAZINE_CLASS);
        // SAFETY: the magazine is a live object of the slab (its header is
        // valid), allocated by `cache`.
        debug_assert_eq!(unsafe { (*slab).shared.owner }, cache);
        // SAFETY: `cache` owns the slab of its magazines (it allocated them
        // and they are still live), and the magazine is dead now.
        unsafe { self.free_owned(cache, slab, obj.cast()) };
    }

    /// Pushes every batched remote free of this core to its owner.
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the caller.
    pub unsafe fn flush_remote(cache: *mut CoreCache) {
        // SAFETY: the caller's contract.
        let c = unsafe { cl(cache) };
        for p in &mut c.pending {
            // SAFETY: the magazines are ours.
            unsafe { flush_pending(p) };
        }
    }

    /// Returns every object and slab the cache holds but does not need:
    /// drains remote frees, gives back the current slabs' unallocated
    /// objects, and sends empty slabs (spares included) to the node depot.
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the caller.
    pub unsafe fn flush_cache(&self, cache: *mut CoreCache) {
        // SAFETY: the caller owns `cache`, so its pending magazines (and the
        // objects in them, dead and ours) are ours to push to their owners.
        unsafe { Self::flush_remote(cache) };
        // SAFETY: the caller owns `cache`: this thread is the only consumer of
        // its inbox and owns every slab whose objects arrive there.
        unsafe { self.drain_remote(cache) };
        // Our empty magazines, pooled and given back, return to their slabs.
        // SAFETY: the caller owns `cache`; no other reference to its local part
        // is live.
        let c = unsafe { cl(cache) };
        let pool = core::mem::replace(&mut c.magazines, ptr::null_mut());
        c.nmagazines = 0;
        // SAFETY: `cache` is valid; only its owner, the caller, takes its
        // returned magazines.
        let back = unsafe { &(*cache).returned.0 }.take_all();
        for mut m in [pool, back] {
            while !m.is_null() {
                // SAFETY: these magazines are ours.
                let next = unsafe { mag(m) }.next;
                // SAFETY: `m` is one of our own magazines, pooled or given back, on no
                // list now; `c` is not used again, so `free_magazine` may take the
                // local part.
                unsafe { self.free_magazine(cache, m) };
                m = next;
            }
        }
        for class in 0..NUM_CLASSES {
            // SAFETY: the caller owns `cache`; each iteration takes the local part
            // afresh and no earlier reference is live.
            let c = unsafe { cl(cache) };
            let cur = core::mem::replace(&mut c.current[class], ptr::null_mut());
            let mut list = core::mem::replace(&mut c.free[class], ptr::null_mut());
            let spare = core::mem::replace(&mut c.spare[class], ptr::null_mut());
            if !cur.is_null() {
                // SAFETY: `cur` was this cache's current slab, so it is owned by the
                // caller's cache; nothing else references its local part.
                let l = unsafe { sl(cur) };
                while !list.is_null() {
                    // SAFETY: `list` is a dead object on this cache's free list, which
                    // holds objects of the current slab only.
                    let next = unsafe { *link(list) };
                    // SAFETY: `list` is still that dead object (the caller holds it): its
                    // first word is the link we own.
                    unsafe { *link(list) = l.local_free };
                    l.local_free = list;
                    l.nfree += 1;
                    list = next;
                }
                if l.nfree == l.capacity {
                    // SAFETY: every object of `cur` is free, so the slab is empty; it is
                    // owned and on no list (it was current).
                    unsafe { self.release_to_depot(cur) };
                } else if l.nfree == 0 {
                    l.state = FULL;
                } else {
                    // SAFETY: `cur` is owned by `cache` and on no list (it was current);
                    // `c` and `l` are not used again.
                    unsafe { Self::push_partial(cache, cur) };
                }
            }
            if !spare.is_null() {
                // SAFETY: spares are empty slabs owned by the cache and on no list.
                unsafe { self.release_to_depot(spare) };
            }
        }
    }

    /// Retires the cache of an exiting core: flushes it and puts it on the
    /// abandoned list, where a new core adopts it (with its partial slabs and
    /// whatever other cores free to it meanwhile).
    ///
    /// # Safety
    /// `cache` must be a cache from this allocator owned by the caller, who
    /// must not use it afterwards.
    pub unsafe fn retire_cache(&self, cache: *mut CoreCache) {
        // SAFETY: forwarded contract.
        unsafe { self.flush_cache(cache) };
        let mut list = self.abandoned.lock();
        // SAFETY: we still own `cache` until it is on the list.
        unsafe { cl(cache) }.next_abandoned = list.0;
        list.0 = cache;
    }

    /// Runs `f` with the shared fallback cache, under its lock: for threads
    /// that cannot have a cache of their own (e.g. while they exit). `None`
    /// if out of memory.
    pub fn with_fallback<R>(&self, f: impl FnOnce(*mut CoreCache) -> R) -> Option<R> {
        let mut g = self.fallback.lock();
        if g.0.is_null() {
            g.0 = self.new_cache(0)?.as_ptr();
        }
        Some(f(g.0))
    }

    // ---- slow paths ----

    /// Moves the slab's free objects to the allocation list.
    unsafe fn make_current(cache: *mut CoreCache, s: *mut Slab) {
        // SAFETY: the caller owns `cache` (this function's contract), so no
        // other reference to the core cache exists while `c` lives.
        let c = unsafe { cl(cache) };
        // SAFETY: the caller owns `s`, so its local part is ours; it lives in
        // the slab, not the cache, so it does not alias `c`.
        let l = unsafe { sl(s) };
        // SAFETY: `s` is an initialized slab header the caller holds.
        let class = unsafe { class_of(s) };
        debug_assert!(c.free[class].is_null());
        c.free[class] = core::mem::replace(&mut l.local_free, ptr::null_mut());
        l.nfree = 0;
        l.state = CURRENT;
        c.current[class] = s;
    }

    /// A free made `nfree` 1 (the slab was full) or `capacity` (now empty).
    #[cold]
    #[inline(never)]
    unsafe fn transition(&self, cache: *mut CoreCache, s: *mut Slab) {
        // SAFETY: the caller owns `cache` (this function's contract), so no
        // other reference to the core cache exists while `c` lives.
        let c = unsafe { cl(cache) };
        // SAFETY: the caller owns `s`; its local part lives in the slab and
        // does not alias `c`.
        let l = unsafe { sl(s) };
        // SAFETY: `s` is an initialized slab header the caller holds.
        let class = unsafe { class_of(s) };
        if c.current[class] == s {
            return;
        }
        if l.nfree == l.capacity {
            // SAFETY: `s` is owned by `cache` and, being neither current nor full
            // before this free, on its partial list; `c` and `l` are not used
            // again.
            unsafe { Self::unlink_partial(cache, s) };
            // SAFETY: the caller owns `cache`; the references before the unlink
            // are dead.
            let c = unsafe { cl(cache) };
            // SAFETY: the caller owns `s`; the slab's local part is not the cache's,
            // so it does not alias `c`.
            unsafe { sl(s) }.state = SPARE;
            // Keep the newest empty slab as the spare; the older one goes
            // to the node.
            let old = core::mem::replace(&mut c.spare[class], s);
            if !old.is_null() {
                // SAFETY: spares are empty slabs we own.
                unsafe { self.release_to_depot(old) };
            }
        } else {
            debug_assert_eq!(l.state, FULL);
            // SAFETY: `s` was full, so it is on no list, and owned by `cache`;
            // `c` and `l` are not used again.
            unsafe { Self::push_partial(cache, s) };
        }
    }

    unsafe fn push_partial(cache: *mut CoreCache, s: *mut Slab) {
        // SAFETY: the caller owns `cache` and `s`; list members are owned
        // slabs with valid links.
        let c = unsafe { cl(cache) };
        // SAFETY: `s` is an initialized slab header the caller holds.
        let class = unsafe { class_of(s) };
        let head = c.partial[class];
        if !head.is_null() {
            // SAFETY: `head` is on this cache's partial list, so it is an owned
            // slab with a valid header, and not `s` (which is on no list).
            unsafe { sl(head) }.prev = s;
        }
        // SAFETY: the caller owns `s`; the reference to `head` ended above.
        let l = unsafe { sl(s) };
        l.prev = ptr::null_mut();
        l.next = head;
        l.state = PARTIAL;
        c.partial[class] = s;
    }

    unsafe fn unlink_partial(cache: *mut CoreCache, s: *mut Slab) {
        // SAFETY: the caller owns `cache` and `s`, and `s` is on its partial
        // list; no other reference to `s`'s local part is live.
        let l = unsafe { sl(s) };
        debug_assert_eq!(l.state, PARTIAL);
        let (prev, next) = (l.prev, l.next);
        // SAFETY: `s` is an initialized slab header the caller holds.
        let class = unsafe { class_of(s) };
        if prev.is_null() {
            // SAFETY: the caller owns `cache`; no reference to its local part is
            // live.
            unsafe { cl(cache) }.partial[class] = next;
        } else {
            // SAFETY: `prev` is `s`'s neighbour on the partial list: an owned slab,
            // distinct from `s`, whose local part nothing else references.
            unsafe { sl(prev) }.next = next;
        }
        if !next.is_null() {
            // SAFETY: `next` is `s`'s neighbour on the partial list: an owned slab,
            // distinct from `s` and `prev`.
            unsafe { sl(next) }.prev = prev;
        }
    }

    /// Takes everything other cores sent to this core: frees the objects
    /// of every magazine in the inbox and gives each magazine back to its
    /// home (runs of magazines with the same home in one push), then the
    /// single objects.
    unsafe fn drain_remote(&self, cache: *mut CoreCache) {
        // SAFETY: the caller owns `cache`, so it is the only consumer of its
        // inbox, and it owns every slab whose objects arrive there.
        let inbox = unsafe { &(*cache).remote.0 };
        let mut m = inbox.magazines.take_all();
        let mut back_home: *mut CoreCache = ptr::null_mut();
        let mut back_first: *mut Magazine = ptr::null_mut();
        let mut back_last: *mut Magazine = ptr::null_mut();
        while !m.is_null() {
            // SAFETY: a magazine taken from the inbox is ours until given
            // back; the Acquire in `take_all` makes its fields visible.
            let mg = unsafe { mag(m) };
            let (next, home, class) = (mg.next, mg.home, mg.class as usize);
            for s in &mg.slots[..mg.count as usize] {
                // SAFETY: the sender wrote slots `0..count` before its Release push,
                // and `take_all`'s Acquire makes them visible.
                let obj = unsafe { s.assume_init() };
                let s = slab_of(obj.cast(), class);
                // SAFETY: the object is dead and ours, so is its slab.
                unsafe { self.free_owned(cache, s, obj) };
            }
            if home == back_home {
                mg.next = back_first;
                back_first = m;
            } else {
                if !back_first.is_null() {
                    // SAFETY: the chain is linked and ours, and passes to its
                    // home.
                    unsafe { give_back(back_home, back_first, back_last) };
                }
                back_home = home;
                back_first = m;
                back_last = m;
            }
            m = next;
        }
        if !back_first.is_null() {
            // SAFETY: the chain holds empty magazines we drained, linked by us,
            // all with home `back_home`; it passes to that home.
            unsafe { give_back(back_home, back_first, back_last) };
        }
        if inbox.objects.pending() {
            let take = |class: usize, obj: *mut FreeObject| {
                let s = slab_of(obj.cast(), class);
                // SAFETY: objects in our inbox are dead, and their slabs are ours (a
                // remote free goes to the slab's owner).
                unsafe { self.free_owned(cache, s, obj) };
            };
            // SAFETY: the caller owns `cache`, so this thread is the inbox's only
            // consumer.
            unsafe { inbox.objects.drain(take) };
        }
    }

    /// A slab for `class`, owned by `cache`: its spare, or one from the node
    /// depot, or fresh pages. Null when out of memory.
    unsafe fn acquire_slab(&self, cache: *mut CoreCache, class: usize) -> *mut Slab {
        // SAFETY: the caller owns `cache`.
        let c = unsafe { cl(cache) };
        let spare = core::mem::replace(&mut c.spare[class], ptr::null_mut());
        if !spare.is_null() {
            return spare;
        }
        let node = c.node;
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
        let Some((mem, node)) = mem else {
            return ptr::null_mut();
        };
        // SAFETY: `mem` is an empty block of the slab's size, now ours.
        unsafe { Self::init_slab(mem, class, cache, node) }
    }

    /// Writes a slab header and threads all objects on `local_free`.
    unsafe fn init_slab(
        mem: NonNull<u8>,
        class: usize,
        cache: *mut CoreCache,
        node: usize,
    ) -> *mut Slab {
        let s = mem.as_ptr().cast::<Slab>();
        let size = CLASS_SIZE[class];
        let cap = CAPACITY[class];
        let first = mem.as_ptr().wrapping_add(FIRST_OFFSET[class]);
        for i in 0..cap {
            let o = first.wrapping_add(i * size).cast::<FreeObject>();
            let next = if i + 1 < cap {
                first.wrapping_add((i + 1) * size).cast()
            } else {
                ptr::null_mut()
            };
            // SAFETY: `mem` is an empty block of `PAGE_SIZE << SLAB_ORDER`
            // bytes owned by the caller; object `i` lies inside it.
            unsafe { o.write(FreeObject { next }) };
        }
        // Capacities and class indices are small (checked in `size_class`).
        #[allow(clippy::cast_possible_truncation)]
        let header = Slab {
            local: SlabLocal {
                local_free: first.cast(),
                nfree: cap as u32,
                cap_m2: cap as u32 - 2,
                prev: ptr::null_mut(),
                next: ptr::null_mut(),
                capacity: cap as u32,
                state: SPARE,
            },
            shared: SlabShared {
                owner: cache,
                class: class as u8,
                node: node as u8,
            },
        };
        // SAFETY: `s` is the start of the empty block the caller owns, which
        // is larger than and aligned for a `Slab` header.
        unsafe { s.write(header) };
        s
    }

    /// Gives an empty slab to its node's depot (or pages, if the depot is
    /// full).
    unsafe fn release_to_depot(&self, s: *mut Slab) {
        // SAFETY: the caller owns the empty slab `s`.
        let node = usize::from(unsafe { (*s).shared.node });
        // SAFETY: the caller owns `s`, whose header is initialized.
        let class = unsafe { class_of(s) };
        let n = &self.nodes[node];
        let order = SLAB_ORDER[class];
        let i = order - MIN_SLAB_ORDER;
        {
            let mut d = n.depot.lock();
            if d.counts[i] < DEPOT_SLABS {
                // SAFETY: the caller owns the empty slab `s` and it is on no list; the
                // depot takes ownership under its lock.
                unsafe { sl(s) }.next = d.lists[i];
                d.lists[i] = s;
                d.counts[i] += 1;
                return;
            }
        }
        if let Some(block) = NonNull::new(s.cast::<u8>()) {
            // SAFETY: `s` is a block of `order` pages from this node.
            unsafe { n.pages.free(block, order) };
        }
    }

    /// Drains one abandoned cache that has pending remote frees, so memory
    /// freed to exited threads is found again.
    fn reclaim_abandoned(&self) {
        let c = {
            let Some(mut list) = self.abandoned.try_lock() else {
                return;
            };
            let c = list.0;
            // SAFETY: list members are valid caches.
            if c.is_null()
                // SAFETY: `c` is not null and on the abandoned list, so it is a valid
                // cache (caches are never deallocated); `remote` is shared state.
                || (!unsafe { &(*c).remote.0 }.pending()
                    // SAFETY: `c` is a valid cache (see the check above it); `returned`
                    // is shared state.
                    && unsafe { &(*c).returned.0 }.is_empty())
            {
                return;
            }
            // SAFETY: `c` is on the abandoned list, whose lock we hold: no core
            // owns it, so we may take its local part to unlink it.
            list.0 = unsafe { cl(c) }.next_abandoned;
            c
        };
        // SAFETY: we own `c` until it goes back on the list.
        unsafe { self.retire_cache(c) };
    }
}

impl NodeLevel {
    const fn new(source: &'static dyn PageSource, node: usize) -> Self {
        Self {
            pages: PageAllocator::new(source, node),
            depot: SpinLock::new(Depot {
                lists: [ptr::null_mut(); DEPOT_ORDERS],
                counts: [0; DEPOT_ORDERS],
            }),
        }
    }

    fn depot_pop(&self, order: usize) -> Option<(NonNull<u8>, usize)> {
        let i = order - MIN_SLAB_ORDER;
        let mut d = self.depot.lock();
        let s = d.lists[i];
        if s.is_null() {
            return None;
        }
        // SAFETY: depot members are empty slabs owned by the depot, whose
        // lock we hold.
        d.lists[i] = unsafe { sl(s) }.next;
        d.counts[i] -= 1;
        Some((NonNull::new(s.cast())?, self.pages.node()))
    }
}
