//! Magazines: batches of remote frees ([`Magazine`]), and the handles that
//! carry their ownership: [`MagazineRef`] (one magazine its holder owns),
//! [`MagazineChain`] (a linked chain of them: a core's pool, or what it took
//! from an inbox or returned stack) and [`MagazineRun`] (drained magazines
//! going back to one home).

use core::mem::{align_of, size_of, MaybeUninit};
use core::ops::{Deref, DerefMut};
use core::ptr::{self, NonNull};

use crate::remote_free::{FreeObject, Link};
use crate::size_class::class_for_aligned;

use super::cache::{CacheId, MagazineStack};

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
    home: CacheId,
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

impl Link for Magazine {
    #[inline(always)]
    unsafe fn set_next(this: *mut Self, next: *mut Self) {
        // SAFETY: the caller guarantees `this` is a magazine it may write.
        unsafe { (*this).next = next };
    }
    #[inline(always)]
    unsafe fn next(this: *mut Self) -> *mut Self {
        // SAFETY: the caller guarantees the link is initialized and visible.
        unsafe { (*this).next }
    }
}

impl Magazine {
    /// The cache that allocated the magazine.
    pub(super) fn home(&self) -> CacheId {
        self.home
    }

    /// The class of the objects it names.
    pub(super) fn class(&self) -> usize {
        self.class as usize
    }

    /// Adds `obj` (the magazine must not be full).
    #[inline(always)]
    pub(super) fn push(&mut self, obj: *mut FreeObject) {
        let n = self.count as usize;
        self.slots[n].write(obj);
        self.count += 1;
    }

    /// Whether every slot is used (then it must be sent).
    pub(super) fn is_full(&self) -> bool {
        self.count as usize == MAGAZINE_SLOTS
    }

    /// Adds `obj` unless that would fill the magazine (the remote free's
    /// fast path, which leaves sending to its slow path); true if added.
    #[inline(always)]
    pub(super) fn push_unless_last(&mut self, obj: *mut FreeObject) -> bool {
        let n = self.count as usize;
        if n + 1 < MAGAZINE_SLOTS {
            self.slots[n].write(obj);
            self.count += 1;
            return true;
        }
        false
    }

    /// The objects it names (its home resets it before reuse).
    pub(super) fn objects(&self) -> impl Iterator<Item = *mut FreeObject> + '_ {
        self.slots[..self.count as usize].iter().map(|s| {
            // SAFETY: `push` wrote every slot below `count` (and a magazine
            // taken from an inbox was pushed with Release after its slots
            // were written, and taken with Acquire).
            unsafe { s.assume_init() }
        })
    }

    /// Empties it for objects of `class`.
    pub(super) fn reset(&mut self, class: usize) {
        // Class indices are small.
        #[allow(clippy::cast_possible_truncation)]
        {
            self.class = class as u32;
        }
        self.count = 0;
    }
}

/// A magazine its holder owns: an initialized [`Magazine`] nobody else
/// references (it is in its home's pool, being filled, or was taken from an
/// inbox or returned stack). Not `Clone`: the value is the ownership.
#[repr(transparent)]
pub(super) struct MagazineRef(NonNull<Magazine>);

impl MagazineRef {
    /// Makes a magazine of the fresh object `obj`, empty, for objects of
    /// `class`, with home `home`.
    ///
    /// # Safety
    /// `obj` must be a fresh object of [`MAGAZINE_CLASS`] (which has the size
    /// and alignment of a `Magazine`) that the caller gives up.
    pub(super) unsafe fn init(obj: NonNull<u8>, home: CacheId, class: usize) -> Self {
        let m = obj.cast::<Magazine>();
        // Class indices are small.
        #[allow(clippy::cast_possible_truncation)]
        let fresh = Magazine {
            next: ptr::null_mut(),
            home,
            class: class as u32,
            count: 0,
            slots: [MaybeUninit::uninit(); MAGAZINE_SLOTS],
        };
        // SAFETY: a fresh object of `MAGAZINE_CLASS`, the caller's to give,
        // large and aligned enough for a `Magazine`.
        unsafe { m.as_ptr().write(fresh) };
        Self(m)
    }

    /// The object the magazine is made of (to free it).
    pub(super) fn into_object(self) -> NonNull<FreeObject> {
        self.0.cast()
    }

    /// Pushes the magazine on `stack`; ownership passes to the stack's
    /// consumer.
    ///
    /// # Safety
    /// The consumer must be entitled to it: an inbox's owner owns the slabs
    /// of every object it names; a `returned` stack's cache is its home.
    pub(super) unsafe fn send(self, stack: &MagazineStack) {
        let m = self.0.as_ptr();
        // SAFETY: we own the magazine and it is on no list; the caller vouches
        // that the stack's consumer may take it. The Release push publishes
        // its slots and count.
        unsafe { stack.push_chain(m, m) };
    }
}

impl Deref for MagazineRef {
    type Target = Magazine;
    #[inline(always)]
    fn deref(&self) -> &Magazine {
        // SAFETY: an initialized magazine the holder of `self` owns, with no
        // other reference (the type's invariant); borrowed from `self`.
        unsafe { self.0.as_ref() }
    }
}

impl DerefMut for MagazineRef {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Magazine {
        // SAFETY: an initialized magazine the holder of `self` owns, with no
        // other reference (the type's invariant); borrowed from `self`.
        unsafe { self.0.as_mut() }
    }
}

/// Magazines linked through `next`, all owned by the chain's holder: a
/// core's pool, or what it took whole from its inbox or returned stack.
pub(super) struct MagazineChain {
    first: *mut Magazine,
}

impl MagazineChain {
    /// The empty chain.
    pub(super) const EMPTY: Self = Self {
        first: ptr::null_mut(),
    };

    /// The chain `first` starts, taken whole from a [`MagazineStack`].
    ///
    /// # Safety
    /// `first` must be null or start a null-terminated chain of initialized
    /// magazines linked through `next`, now the caller's (taken with
    /// `take_all`, whose Acquire makes their contents visible).
    pub(super) unsafe fn taken(first: *mut Magazine) -> Self {
        Self { first }
    }

    /// Whether the chain is empty.
    pub(super) fn is_empty(&self) -> bool {
        self.first.is_null()
    }

    /// Takes the first magazine.
    pub(super) fn pop(&mut self) -> Option<MagazineRef> {
        let first = NonNull::new(self.first)?;
        // Members are initialized magazines the holder owns, on this chain
        // only (the type's invariant): taking one off makes it the caller's
        // alone, which is what a `MagazineRef` is.
        let m = MagazineRef(first);
        self.first = m.next;
        Some(m)
    }

    /// Puts `m` first.
    pub(super) fn push(&mut self, mut m: MagazineRef) {
        m.next = self.first;
        self.first = m.0.as_ptr();
    }
}

/// Drained magazines of one home on their way back to it, linked through
/// `next` from `first` to `last`: pushed on the home's `returned` stack
/// with one compare-and-swap.
pub(super) struct MagazineRun {
    home: CacheId,
    first: MagazineRef,
    last: NonNull<Magazine>,
}

impl MagazineRun {
    /// A run of `m` alone, going back to `m`'s home.
    pub(super) fn new(mut m: MagazineRef) -> Self {
        m.next = ptr::null_mut();
        let last = m.0;
        Self {
            home: m.home(),
            first: m,
            last,
        }
    }

    /// The home the run goes back to.
    pub(super) fn home(&self) -> CacheId {
        self.home
    }

    /// Adds `m`, a magazine with the run's home, first.
    pub(super) fn push(&mut self, mut m: MagazineRef) {
        debug_assert!(m.home() == self.home);
        m.next = self.first.0.as_ptr();
        self.first = m;
    }

    /// Pushes the run on its home's `returned` stack.
    ///
    /// # Safety
    /// Every member must have been drained (its objects freed).
    pub(super) unsafe fn give_back(self) {
        // The Release push orders our reads of their slots before reuse.
        // SAFETY: the run's magazines are ours, linked by `new`/`push`, all of
        // home `home`, drained (caller's contract): they pass to it.
        unsafe {
            self.home
                .returned()
                .push_chain(self.first.0.as_ptr(), self.last.as_ptr())
        };
    }
}
