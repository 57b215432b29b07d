//! The slab header and the handles that carry its invariants: [`SlabRef`]
//! (a slab its holder may use), [`FreeList`] (dead objects threaded through
//! their first word) and [`PartialList`] (a cache's partial slabs of one
//! class, linked through their headers).
//!
//! Slab headers and free objects are dereferenced in this file only. A
//! [`SlabRef`] is made in one of two `unsafe` places (a fresh slab written
//! by [`SlabRef::init`], or the slab of a freed object in [`free_object`]),
//! and from then on its methods are safe: each reaches the owner-only part
//! of the header for the length of the method only, so two references to
//! it never overlap.

use core::mem::size_of;
use core::ptr::{self, NonNull};

use crate::remote_free::FreeObject;
use crate::size_class::{CAPACITY, CLASS_SIZE, FIRST_OFFSET, SLAB_HEADER_BYTES, SLAB_ORDER};
use crate::PAGE_SIZE;

use super::cache::CacheId;

/// Where a slab is, as far as its owning cache is concerned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum SlabState {
    /// Its free objects are the cache's allocation list.
    Current,
    /// On the cache's partial list.
    Partial,
    /// No free object, on no list.
    Full,
    /// Empty: the cache's spare, or in a depot.
    Spare,
}

/// The header at the start of every slab.
#[repr(C)]
pub(super) struct Slab {
    /// Fields only the slab's holder touches.
    local: SlabLocal,
    /// Fields other cores read, on their own cache line so that the owner's
    /// frees do not take the line away from remote freers.
    shared: SlabShared,
}

#[repr(C, align(64))]
struct SlabShared {
    /// The core cache that owns the slab; read by any core freeing one of its
    /// objects, written only while the slab has no live object.
    owner: CacheId,
    class: u8,
    node: u8,
}

#[repr(C)]
struct SlabLocal {
    /// Objects freed by the owner (or drained from its remote queue).
    local_free: FreeList,
    /// Length of `local_free`.
    nfree: u32,
    /// `capacity - 2`: `nfree - 2 >= cap_m2` (wrapping) tests both
    /// `nfree == 1` (was full) and `nfree == capacity` (now empty).
    cap_m2: u32,
    /// Links on the owner's partial list, or (`next` only) a depot list.
    prev: Option<SlabRef>,
    next: Option<SlabRef>,
    capacity: u32,
    state: SlabState,
}

const _: () = assert!(size_of::<Slab>() <= SLAB_HEADER_BYTES);

/// The slab header of `obj`, an object of `class`: slabs are buddy blocks
/// aligned to their size, so it is the address with the low bits cleared.
#[inline(always)]
pub(super) fn slab_of(obj: *mut u8, class: usize) -> *mut Slab {
    let mask = (PAGE_SIZE << SLAB_ORDER[class]) - 1;
    obj.map_addr(|a| a & !mask).cast()
}

/// The owner of the slab of `obj`, a live object of `class`.
///
/// # Safety
/// `obj` must be a live object of `class` from a slab allocator.
#[inline(always)]
pub(super) unsafe fn owner_of(obj: *mut u8, class: usize) -> CacheId {
    let slab = slab_of(obj, class);
    // SAFETY: `obj` is live, so its slab's header is initialized and its
    // owner fixed; the place reads the shared part only, not the local one.
    unsafe { (*slab).shared.owner }
}

/// Puts `obj`, a dead object of `class`, on its slab's `local_free` (the
/// free of an object whose slab the caller's cache owns). Returns the slab
/// when the free made it go from full to not full, or empty: then the owner
/// moves it between its lists.
///
/// # Safety
/// `obj` must be a dead object of `class`, on no list, from a slab the
/// caller holds (its cache owns it); the caller gives it up.
#[inline(always)]
pub(super) unsafe fn free_object(obj: *mut FreeObject, class: usize) -> Option<SlabRef> {
    // SAFETY: the object lies in a slab, which is a block the page allocator
    // handed out as a `NonNull`, and `slab_of` gives that block's start: not
    // null. The caller holds the slab, as a `SlabRef` requires.
    let slab = SlabRef(unsafe { NonNull::new_unchecked(slab_of(obj.cast(), class)) });
    let moved = slab.with_local(|l| {
        // SAFETY: the caller gives up the dead object `obj`, so the list may
        // take it.
        unsafe { l.local_free.push(obj) };
        let n = l.nfree + 1;
        l.nfree = n;
        n.wrapping_sub(2) >= l.cap_m2
    });
    moved.then_some(slab)
}

/// A slab that its holder may use: a live, initialized slab header, held by
/// one holder — the core cache that owns it (used only by that cache's
/// thread), or a depot (under its lock), or the code that just took it from
/// one of them. Copies are kept only by the holder (its lists), and only the
/// holder's thread uses them. (`SlabRef` is not `Send`: moving a slab to
/// another holder goes through a locked list or a re-initialization.)
///
/// Every method reaches the owner-only part of the header for its own
/// duration only and calls nothing that reaches it again, so references to
/// it never overlap; other cores read only the shared part.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub(super) struct SlabRef(NonNull<Slab>);

impl SlabRef {
    /// Writes a slab header at `mem` and threads all objects on its
    /// `local_free`. The slab is empty, owned by `owner` and held by the
    /// caller.
    ///
    /// # Safety
    /// `mem` must be an empty block of `PAGE_SIZE << SLAB_ORDER[class]` bytes,
    /// aligned to its size, that the caller owns; `class < NUM_CLASSES`.
    pub(super) unsafe fn init(mem: NonNull<u8>, class: usize, owner: CacheId, node: usize) -> Self {
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
            // SAFETY: `mem` is an empty block of the slab's size owned by the
            // caller; object `i` lies inside it (`CAPACITY` is computed so that
            // the last object ends within the block) and is aligned for a link.
            unsafe { o.write(FreeObject { next }) };
        }
        // Capacities and class indices are small (checked in `size_class`).
        #[allow(clippy::cast_possible_truncation)]
        let header = Slab {
            local: SlabLocal {
                local_free: FreeList(first.cast()),
                nfree: cap as u32,
                cap_m2: cap as u32 - 2,
                prev: None,
                next: None,
                capacity: cap as u32,
                state: SlabState::Spare,
            },
            shared: SlabShared {
                owner,
                class: class as u8,
                node: node as u8,
            },
        };
        let s = mem.cast::<Slab>();
        // SAFETY: `s` is the start of the empty block the caller owns, which
        // is larger than a `Slab` header (`SLAB_HEADER_BYTES`) and aligned to
        // at least 64 KiB.
        unsafe { s.as_ptr().write(header) };
        Self(s)
    }

    /// The slab as the memory block it is made of.
    pub(super) fn block(self) -> NonNull<u8> {
        self.0.cast()
    }

    /// The owner-only part of the header, for the duration of `f`.
    #[inline(always)]
    fn with_local<R>(self, f: impl FnOnce(&mut SlabLocal) -> R) -> R {
        // The reference lives only during `f`, and no `f` in this file reaches
        // a slab's local part, so it is the only one; the projection makes no
        // reference to the shared part, which remote freers read.
        // SAFETY: initialized header held by this thread (type invariant).
        f(unsafe { &mut (*self.0.as_ptr()).local })
    }

    /// The slab's size class (fixed while the slab is held).
    #[inline(always)]
    pub(super) fn class(self) -> usize {
        // SAFETY: the header is initialized (the type's invariant) and the
        // shared part is written only by `init`, before the slab was handed
        // to its holder; this reads it through a place, with no reference.
        usize::from(unsafe { (*self.0.as_ptr()).shared.class })
    }

    /// The node whose page allocator the slab came from.
    pub(super) fn node(self) -> usize {
        // SAFETY: the header is initialized (the type's invariant) and the
        // shared part is written only by `init`, before the slab was handed
        // to its holder; this reads it through a place, with no reference.
        usize::from(unsafe { (*self.0.as_ptr()).shared.node })
    }

    /// Moves every object of `list` (dead objects of this slab, the cache's
    /// unused allocation list) back to `local_free`.
    pub(super) fn give_back(self, mut list: FreeList) {
        self.with_local(|l| {
            while let Some(obj) = list.pop() {
                // SAFETY: `pop` hands us a dead object that is on no list now.
                unsafe { l.local_free.push(obj.as_ptr()) };
                l.nfree += 1;
            }
        });
    }

    /// Takes the slab's free objects (to become the allocation list) and
    /// marks it current.
    pub(super) fn take_free(self) -> FreeList {
        self.with_local(|l| {
            l.nfree = 0;
            l.state = SlabState::Current;
            core::mem::replace(&mut l.local_free, FreeList::EMPTY)
        })
    }

    /// Whether `local_free` has objects.
    pub(super) fn has_free(self) -> bool {
        self.with_local(|l| !l.local_free.is_empty())
    }

    /// Whether every object is free.
    pub(super) fn is_empty(self) -> bool {
        self.with_local(|l| l.nfree == l.capacity)
    }

    /// Whether no object is free.
    pub(super) fn is_full(self) -> bool {
        self.with_local(|l| l.nfree == 0)
    }

    pub(super) fn state(self) -> SlabState {
        self.with_local(|l| l.state)
    }

    pub(super) fn set_state(self, state: SlabState) {
        self.with_local(|l| l.state = state);
    }

    fn links(self) -> (Option<SlabRef>, Option<SlabRef>) {
        self.with_local(|l| (l.prev, l.next))
    }

    fn set_prev(self, prev: Option<SlabRef>) {
        self.with_local(|l| l.prev = prev);
    }

    /// Sets the next link (partial and depot lists).
    pub(super) fn set_next(self, next: Option<SlabRef>) {
        self.with_local(|l| l.next = next);
    }

    /// The next link (partial and depot lists).
    pub(super) fn next(self) -> Option<SlabRef> {
        self.with_local(|l| l.next)
    }
}

/// Dead objects linked through their first word: a slab's `local_free`, or
/// a cache's allocation list (the free objects of its current slab). Every
/// object on the list is dead and held by the list; only its holder's
/// thread touches it.
#[repr(transparent)]
pub(super) struct FreeList(*mut FreeObject);

impl FreeList {
    /// The empty list.
    pub(super) const EMPTY: Self = Self(ptr::null_mut());

    /// Whether the list is empty.
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_null()
    }

    /// Takes the first object.
    #[inline(always)]
    pub(super) fn pop(&mut self) -> Option<NonNull<FreeObject>> {
        let head = NonNull::new(self.0)?;
        // SAFETY: objects on the list are dead and held by it (the type's
        // invariant), so the head's first word is its link, written by `push`
        // or `SlabRef::init` on this thread.
        self.0 = unsafe { (*head.as_ptr()).next };
        Some(head)
    }

    /// Puts `obj` first.
    ///
    /// # Safety
    /// `obj` must be a dead object (so not null), on no list, that the
    /// caller gives up.
    #[inline(always)]
    pub(super) unsafe fn push(&mut self, obj: *mut FreeObject) {
        // SAFETY: the caller gives up the dead object, so its first word may
        // hold the link.
        unsafe { (*obj).next = self.0 };
        self.0 = obj;
    }
}

/// Pops from the list at `slot` without making a reference to it: the
/// allocation fast path, where the list may be the never-written sentinel
/// cache's (always empty, so never written). Null if the list is empty.
///
/// # Safety
/// `slot` must point at an initialized `FreeList` which, if it is not
/// empty, the calling thread holds, with no reference to it live.
#[inline(always)]
pub(super) unsafe fn pop_at(slot: *mut FreeList) -> *mut FreeObject {
    // SAFETY: `slot` points at an initialized list (caller's contract); this
    // reads it through a place, with no reference.
    let head = unsafe { (*slot).0 };
    if !head.is_null() {
        // SAFETY: a non-empty list is the caller's, and its objects are dead
        // and held by it, so the head's first word is its link.
        let next = unsafe { (*head).next };
        // SAFETY: a non-empty list is the caller's (so not the sentinel's,
        // which is always empty) and nothing else references it.
        unsafe { (*slot).0 = next };
    }
    head
}

/// A cache's partial slabs of one class (some objects free), doubly linked
/// through their headers so a slab can leave from the middle when it
/// empties. Every member is a [`SlabRef`] of the cache's, in state
/// [`SlabState::Partial`].
pub(super) struct PartialList {
    head: Option<SlabRef>,
}

impl PartialList {
    /// The empty list.
    pub(super) const EMPTY: Self = Self { head: None };

    /// The first slab.
    pub(super) fn first(&self) -> Option<SlabRef> {
        self.head
    }

    /// Puts `s` (the cache's, on no list) first.
    pub(super) fn push(&mut self, s: SlabRef) {
        if let Some(head) = self.head {
            head.set_prev(Some(s));
        }
        s.with_local(|l| {
            l.prev = None;
            l.next = self.head;
            l.state = SlabState::Partial;
        });
        self.head = Some(s);
    }

    /// Takes `s`, a member, off the list.
    pub(super) fn unlink(&mut self, s: SlabRef) {
        debug_assert_eq!(s.state(), SlabState::Partial);
        let (prev, next) = s.links();
        match prev {
            None => self.head = next,
            Some(prev) => prev.set_next(next),
        }
        if let Some(next) = next {
            next.set_prev(prev);
        }
    }
}
