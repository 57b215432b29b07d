//! The per-core cache ([`CoreCache`]) and the handles that carry who may
//! touch which part of it: [`CacheId`] (any thread: the shared parts) and
//! [`Owned`] (the owning thread: the owner-only part, by `&mut`).

use core::ptr::{self, NonNull};
use core::sync::atomic::AtomicPtr;

use crate::remote_free::{FreeObject, ObjectQueues, TakeAllStack};
use crate::size_class::NUM_CLASSES;
use crate::PAGE_SIZE;

use super::header::{FreeList, PartialList, SlabRef};
use super::magazine::{Magazine, MagazineChain, MagazineRef};

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

const _: () = assert!(core::mem::size_of::<CoreCache>() <= PAGE_SIZE);

/// A stack of magazines (an inbox, or a `returned` stack).
pub(super) type MagazineStack = TakeAllStack<Magazine, AtomicPtr<Magazine>>;

/// What other cores send to a core: magazines of its objects, and (rarely)
/// single objects.
pub(super) struct Inbox {
    /// Full magazines of objects this core owns (the normal path).
    pub(super) magazines: MagazineStack,
    /// Single objects, per class: from cores without a cache, or without a
    /// magazine (out of memory).
    pub(super) objects: ObjectQueues<NUM_CLASSES>,
}

impl Inbox {
    /// Whether something may be waiting (cheap, may be stale).
    #[inline(always)]
    pub(super) fn pending(&self) -> bool {
        !self.magazines.is_empty() || self.objects.pending()
    }
}

/// The owner-only part of a cache.
#[repr(C)]
pub(super) struct CacheLocal {
    /// Allocation list per class: free objects of the current slab. First,
    /// so that the fast path's offset is the class alone.
    pub(super) free: [FreeList; NUM_CLASSES],
    pub(super) current: [Option<SlabRef>; NUM_CLASSES],
    pub(super) partial: [PartialList; NUM_CLASSES],
    /// One empty slab per class, kept for hysteresis.
    pub(super) spare: [Option<SlabRef>; NUM_CLASSES],
    /// Remote frees waiting to be sent to one owner, per class (batching:
    /// one compare-and-swap per [`super::REMOTE_BATCH`] objects).
    pub(super) pending: [Pending; NUM_CLASSES],
    /// Empty magazines of this core.
    pub(super) magazines: MagazineChain,
    /// Length of `magazines`.
    pub(super) nmagazines: usize,
    pub(super) node: usize,
    /// Link on the root's abandoned list.
    pub(super) next_abandoned: Option<CacheId>,
}

/// The magazine this core is filling with objects of one class that belong
/// to `owner`. Invariant, kept by the `unsafe` methods that put objects in:
/// when there is a magazine, `owner` is set and every object the magazine
/// names is dead, of the slot's class, from a slab `owner` owns, and given
/// up by the core that freed it.
#[repr(C)]
pub(super) struct Pending {
    magazine: Option<MagazineRef>,
    owner: Option<CacheId>,
}

impl Pending {
    const NONE: Self = Self {
        magazine: None,
        owner: None,
    };

    /// Whether the magazine (if any) is for `owner`. Compared as addresses:
    /// one compare, where `Option`'s `==` would test for `None` first.
    #[inline(always)]
    fn is_for(&self, owner: CacheId) -> bool {
        self.owner.map_or(ptr::null_mut(), CacheId::as_ptr) == owner.as_ptr()
    }

    /// Adds `obj` to the magazine if it is for `owner` and adding does not
    /// fill it (the remote free's fast path); true if added.
    ///
    /// # Safety
    /// `obj` must be a dead object of the slot's class, from a slab `owner`
    /// owns, that the caller gives up.
    #[inline(always)]
    pub(super) unsafe fn push_unless_last(&mut self, owner: CacheId, obj: *mut FreeObject) -> bool {
        let for_owner = self.is_for(owner);
        match &mut self.magazine {
            Some(m) if for_owner => m.push_unless_last(obj),
            _ => false,
        }
    }

    /// Takes the magazine if it is for `owner` (a magazine for another owner
    /// stays, for [`Self::flush`]).
    pub(super) fn take_for(&mut self, owner: CacheId) -> Option<MagazineRef> {
        if self.is_for(owner) {
            self.magazine.take()
        } else {
            None
        }
    }

    /// Makes `m` the magazine for `owner`, or sends it to `owner` at once if
    /// it is full. The slot must be empty.
    ///
    /// # Safety
    /// Every object `m` names must be dead, of the slot's class, from a slab
    /// `owner` owns, and given up by the core that freed it.
    pub(super) unsafe fn keep(&mut self, owner: CacheId, m: MagazineRef) {
        debug_assert!(self.magazine.is_none());
        if m.is_full() {
            // SAFETY: the magazine names dead objects whose slabs `owner` owns,
            // given up (caller's contract): it and they pass to that owner (the
            // Release push publishes its slots and count).
            unsafe { m.send(&owner.inbox().magazines) };
        } else {
            self.owner = Some(owner);
            self.magazine = Some(m);
        }
    }

    /// Pushes the magazine, if any, to its owner and empties the slot.
    #[inline(always)]
    pub(super) fn flush(&mut self) {
        // Tested before `take`, so that an empty slot (most of them, when a
        // refill flushes every class) is not written.
        if self.magazine.is_none() {
            return;
        }
        if let (Some(m), Some(owner)) = (self.magazine.take(), self.owner) {
            // SAFETY: (the type's invariant) its dead objects' slabs are
            // `owner`'s, given up by their freers; they pass to that owner.
            unsafe { m.send(&owner.inbox().magazines) };
        }
    }
}

#[repr(C, align(64))]
struct Padded<T>(T);

impl CoreCache {
    pub(super) const fn new(node: usize) -> Self {
        Self {
            local: CacheLocal {
                free: [const { FreeList::EMPTY }; NUM_CLASSES],
                current: [None; NUM_CLASSES],
                partial: [const { PartialList::EMPTY }; NUM_CLASSES],
                spare: [None; NUM_CLASSES],
                pending: [const { Pending::NONE }; NUM_CLASSES],
                magazines: MagazineChain::EMPTY,
                nmagazines: 0,
                node,
                next_abandoned: None,
            },
            remote: Padded(Inbox {
                magazines: MagazineStack::new(),
                objects: ObjectQueues::new(),
            }),
            returned: Padded(MagazineStack::new()),
        }
    }

    /// The address of `cache`'s allocation list for `class`, made without a
    /// reference (the fast path reads the sentinel's through it too).
    ///
    /// # Safety
    /// `cache` must be [`EMPTY_CACHE`] or a cache from `new_cache`;
    /// `class < NUM_CLASSES`.
    #[inline(always)]
    pub(super) unsafe fn free_slot(cache: *mut CoreCache, class: usize) -> *mut FreeList {
        // SAFETY: `cache` points at a live cache (caller's contract) and
        // `class` is in bounds; this computes a field address, no reference.
        unsafe { &raw mut (*cache).local.free[class] }
    }

    /// The calling thread's hold on `cache`.
    ///
    /// # Safety
    /// `cache` must be a cache from `new_cache` (not the sentinel) that the
    /// calling thread owns, or took off a root list under its lock, and no
    /// other [`Owned`] of it (or reference to its local part) may be live
    /// while the result is.
    #[inline(always)]
    pub(super) unsafe fn owned<'c>(cache: *mut CoreCache) -> Owned<'c> {
        // SAFETY: `cache` is a real cache (caller's contract), so not null.
        let id = unsafe { CacheId::new(cache) };
        // SAFETY: the calling thread owns `cache` and nothing else references
        // its local part (caller's contract); the projection makes no
        // reference to the shared parts, which other cores write.
        let local = unsafe { &mut (*cache).local };
        Owned { id, local }
    }
}

/// A core cache named by address: a slab's owner, a magazine's home, a
/// member of a root list. It is a cache from `SlabAllocator::new_cache`
/// (whose pages are never returned, so it lives for the rest of the
/// program) or the never-written sentinel; any thread may reach its shared
/// parts (inbox, returned stack), which are atomics.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub(super) struct CacheId(NonNull<CoreCache>);

impl CacheId {
    /// # Safety
    /// `cache` must be a cache from `SlabAllocator::new_cache`.
    #[inline(always)]
    pub(super) unsafe fn new(cache: *mut CoreCache) -> Self {
        // SAFETY: caches are pages from the page allocator, never null
        // (caller's contract).
        Self(unsafe { NonNull::new_unchecked(cache) })
    }

    #[inline(always)]
    pub(super) fn as_ptr(self) -> *mut CoreCache {
        self.0.as_ptr()
    }

    /// The cache's inbox (other cores push to it; the owner drains it).
    #[inline(always)]
    pub(super) fn inbox(self) -> &'static Inbox {
        // SAFETY: the cache lives for the rest of the program (the type's
        // invariant) and its inbox is atomics only; the projection makes no
        // reference to the owner-only part.
        unsafe { &(*self.0.as_ptr()).remote.0 }
    }

    /// The stack on which other cores give this cache's magazines back.
    #[inline(always)]
    pub(super) fn returned(self) -> &'static MagazineStack {
        // SAFETY: the cache lives for the rest of the program (the type's
        // invariant) and the stack is atomics only; the projection makes no
        // reference to the owner-only part.
        unsafe { &(*self.0.as_ptr()).returned.0 }
    }
}

/// The calling thread's exclusive hold on a core cache: its owner-only part
/// by `&mut`, and its identity for the shared parts (its inbox and returned
/// stack, which only the owner consumes). Made once per entry point by
/// [`CoreCache::owned`] and passed down by `&mut`, so the owner-only part
/// has one reference at a time.
pub(super) struct Owned<'c> {
    pub(super) id: CacheId,
    pub(super) local: &'c mut CacheLocal,
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
