//! The free paths: a local free onto the slab's `local_free`, the slab's
//! moves between the cache's lists, remote frees batched in magazines, and
//! the owner's drain of what other cores sent it.

use core::ptr;

use crate::remote_free::FreeObject;
use crate::size_class::NUM_CLASSES;

use super::cache::{CacheId, CoreCache, Owned};
use super::header::{free_object, owner_of, FreeList, SlabRef, SlabState};
use super::magazine::{MagazineChain, MagazineRef, MagazineRun, MAGAZINE_CLASS};
use super::{is_empty_cache, SlabAllocator};

/// Empty magazines a core keeps; more are freed when they come back.
const MAGAZINE_POOL: usize = 16;

impl SlabAllocator {
    /// Frees an object of `class` allocated from this allocator by any core.
    ///
    /// # Safety
    /// `cache` must be [`super::EMPTY_CACHE`] or a cache from this allocator
    /// owned by the calling thread; `ptr` must be a live object of `class`
    /// from this allocator, not used after this call.
    #[inline(always)]
    pub unsafe fn free(&self, cache: *mut CoreCache, ptr: *mut u8, class: usize) {
        // SAFETY: the caller meets `free_or_attach`'s contract (this
        // function's), and a `null_mut` attach returns no cache.
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
        // SAFETY: `ptr` is a live object of `class` from this allocator
        // (caller's contract).
        let owner = unsafe { owner_of(ptr, class) };
        let obj = ptr.cast::<FreeObject>();
        if owner.as_ptr() == cache {
            // `free_held`, with the hold on the cache made only when the slab
            // changes lists (made here, it would cost stores on every free).
            // SAFETY: `cache` owns the object's slab, so the calling thread,
            // the cache's owner (caller's contract), holds it; the object is
            // dead from now on (caller's contract) and given up here.
            if let Some(slab) = unsafe { free_object(obj, class) } {
                // SAFETY: a cache that owns a slab is not the sentinel, so it is
                // the caller's own (contract), with no other hold on it live.
                let mut c = unsafe { CoreCache::owned(cache) };
                self.transition(&mut c, slab);
            }
        } else {
            // SAFETY: the caller's contract (this function's) covers `cache`
            // and `attach`; the object is dead and its slab's owner is `owner`.
            unsafe { self.free_remote(cache, owner, obj, class, attach) };
        }
    }

    /// Puts a dead object on its slab's `local_free` list: the free of an
    /// object whose slab `c` owns (by the owner, or drained from its inbox),
    /// and the slab's move between lists when that made it not full or
    /// empty.
    ///
    /// # Safety
    /// `obj` must be a dead object of `class` from a slab `c` owns; the
    /// caller gives it up.
    #[inline(always)]
    unsafe fn free_held(&self, c: &mut Owned<'_>, obj: *mut FreeObject, class: usize) {
        // SAFETY: `c` owns the slab of `obj` (caller's contract), so the
        // calling thread holds it; the caller gives up the dead object.
        if let Some(slab) = unsafe { free_object(obj, class) } {
            self.transition(c, slab);
        }
    }

    /// A free made the slab `s` of `c` not full, or empty.
    #[cold]
    #[inline(never)]
    fn transition(&self, c: &mut Owned<'_>, s: SlabRef) {
        let class = s.class();
        if c.local.current[class] == Some(s) {
            return;
        }
        if s.is_empty() {
            // Neither current nor full before this free: on the partial list.
            c.local.partial[class].unlink(s);
            s.set_state(SlabState::Spare);
            // Keep the newest empty slab as the spare; the older one goes
            // to the node.
            if let Some(old) = c.local.spare[class].replace(s) {
                // SAFETY: a spare is an empty slab of `c`'s, and it has just left
                // the spare slot, its only list.
                unsafe { self.nodes[old.node()].release(old) };
            }
        } else {
            debug_assert_eq!(s.state(), SlabState::Full);
            c.local.partial[class].push(s);
        }
    }

    /// A free of an object owned by another core: its pointer goes into
    /// this core's magazine for that owner and class (the object itself is
    /// not written); a full magazine goes to the owner's inbox.
    ///
    /// This is the common case, kept small (few registers, no calls) so it
    /// costs a handful of instructions; everything else is in
    /// [`Self::free_remote_slow`].
    ///
    /// # Safety
    /// As [`Self::free_or_attach`]; `obj` is dead and `owner` owns its slab.
    #[inline(never)]
    unsafe fn free_remote(
        &self,
        cache: *mut CoreCache,
        owner: CacheId,
        obj: *mut FreeObject,
        class: usize,
        attach: impl FnOnce() -> *mut CoreCache,
    ) {
        if !is_empty_cache(cache) {
            // SAFETY: a cache other than the sentinel is the caller's own
            // (contract), with no other hold on it live.
            let c = unsafe { CoreCache::owned(cache) };
            // SAFETY: `obj` is a dead object of `class` whose slab `owner` owns,
            // given up (this function's contract).
            if unsafe { c.local.pending[class].push_unless_last(owner, obj) } {
                return;
            }
        }
        // SAFETY: the caller's contract (this function's), and no hold on
        // `cache` is live now.
        unsafe { self.free_remote_slow(cache, owner, obj, class, attach) };
    }

    /// [`Self::free_remote`] when the core has no cache yet, or no magazine
    /// for this owner and class, or the magazine becomes full.
    ///
    /// # Safety
    /// As [`Self::free_remote`].
    #[cold]
    #[inline(never)]
    unsafe fn free_remote_slow(
        &self,
        cache: *mut CoreCache,
        owner: CacheId,
        obj: *mut FreeObject,
        class: usize,
        attach: impl FnOnce() -> *mut CoreCache,
    ) {
        if is_empty_cache(cache) {
            let cache = attach();
            if cache.is_null() || is_empty_cache(cache) {
                // SAFETY: the object is dead and its slab is `owner`'s: it passes
                // to that owner alone.
                unsafe { owner.inbox().objects.push(class, obj) };
                return;
            }
            // SAFETY: `cache` was just installed for this core and is the
            // caller's (it may even own the object: an adopted cache); the
            // object is live to the allocator until this free.
            unsafe { self.free_or_attach(cache, obj.cast(), class, ptr::null_mut) };
            return;
        }
        // SAFETY: a cache other than the sentinel is the caller's own
        // (contract), with no other hold on it live.
        let mut c = unsafe { CoreCache::owned(cache) };
        let p = &mut c.local.pending[class];
        let mut m = match p.take_for(owner) {
            Some(m) => m,
            None => {
                p.flush();
                let Some(m) = self.take_magazine(&mut c, class) else {
                    // SAFETY: no magazine to batch into (out of memory): the dead
                    // object passes to its owner alone, which owns its slab.
                    unsafe { owner.inbox().objects.push(class, obj) };
                    return;
                };
                m
            }
        };
        m.push(obj);
        // SAFETY: `m` held only objects for `owner` (the slot's invariant, or
        // it is fresh), and `obj` is a dead object of `class` whose slab
        // `owner` owns, given up (this function's contract).
        unsafe { c.local.pending[class].keep(owner, m) };
    }

    /// An empty magazine for objects of `class`: from this core's pool, or
    /// those other cores gave back, or a new one. `None` when out of memory.
    #[cold]
    #[inline(never)]
    fn take_magazine(&self, c: &mut Owned<'_>, class: usize) -> Option<MagazineRef> {
        if c.local.magazines.is_empty() {
            // Keep up to `MAGAZINE_POOL`; free the rest (they are objects of
            // our own slabs).
            let mut back = self.take_returned(c);
            while let Some(m) = back.pop() {
                if c.local.nmagazines < MAGAZINE_POOL {
                    c.local.magazines.push(m);
                    c.local.nmagazines += 1;
                } else {
                    self.free_magazine(c, m);
                }
            }
        }
        if let Some(mut m) = c.local.magazines.pop() {
            c.local.nmagazines -= 1;
            m.reset(class);
            return Some(m);
        }
        let obj = ptr::NonNull::new(self.alloc_owned(c, MAGAZINE_CLASS))?;
        // SAFETY: a fresh object of `MAGAZINE_CLASS`, just allocated and ours
        // to give.
        Some(unsafe { MagazineRef::init(obj, c.id, class) })
    }

    /// The magazines other cores gave back to `c`.
    fn take_returned(&self, c: &Owned<'_>) -> MagazineChain {
        // SAFETY: only the owner takes its returned stack: a chain of its own
        // drained magazines (`take_all`'s Acquire orders their last reads).
        unsafe { MagazineChain::taken(c.id.returned().take_all()) }
    }

    /// Frees one of `c`'s own magazines (a local free).
    fn free_magazine(&self, c: &mut Owned<'_>, m: MagazineRef) {
        debug_assert!(m.home() == c.id);
        let obj = m.into_object().as_ptr();
        // SAFETY: the magazine is an object of `MAGAZINE_CLASS` that `c`
        // allocated (its home), so from a slab `c` owns (a slab keeps its owner
        // while it has live objects); we owned it and give it up.
        unsafe { self.free_held(c, obj, MAGAZINE_CLASS) };
    }

    /// Takes everything other cores sent to this core: frees the objects
    /// of every magazine in the inbox and gives each magazine back to its
    /// home (runs of magazines with the same home in one push), then the
    /// single objects.
    pub(super) fn drain_remote(&self, c: &mut Owned<'_>) {
        let inbox = c.id.inbox();
        // SAFETY: the owner is its inbox's only consumer, and what it takes is
        // a chain of magazines other cores gave up to it; `take_all`'s Acquire
        // makes their slots and counts visible.
        let mut mags = unsafe { MagazineChain::taken(inbox.magazines.take_all()) };
        let mut run: Option<MagazineRun> = None;
        while let Some(m) = mags.pop() {
            let class = m.class();
            for obj in m.objects() {
                // SAFETY: an object in our inbox is dead, of the magazine's class,
                // from a slab we own (a remote free goes to the slab's owner), and
                // its freeing core gave it up.
                unsafe { self.free_held(c, obj, class) };
            }
            match &mut run {
                Some(r) if r.home() == m.home() => r.push(m),
                _ => {
                    if let Some(done) = run.replace(MagazineRun::new(m)) {
                        // SAFETY: every magazine of the run was drained above.
                        unsafe { done.give_back() };
                    }
                }
            }
        }
        if let Some(done) = run {
            // SAFETY: every magazine of the run was drained above.
            unsafe { done.give_back() };
        }
        if inbox.objects.pending() {
            let take = |class: usize, obj: *mut FreeObject| {
                // SAFETY: an object in our inbox is dead, of the class of the
                // queue it came from, from a slab we own (a remote free goes to
                // the slab's owner), and its freeing core gave it up.
                unsafe { self.free_held(c, obj, class) };
            };
            // SAFETY: the owner is its inbox's only consumer.
            unsafe { inbox.objects.drain(take) };
        }
    }

    /// [`Self::flush_cache`] on the held cache `c`.
    pub(super) fn flush_owned(&self, c: &mut Owned<'_>) {
        Self::flush_pending(c);
        self.drain_remote(c);
        // Our empty magazines, pooled and given back, return to their slabs.
        let mut pool = core::mem::replace(&mut c.local.magazines, MagazineChain::EMPTY);
        c.local.nmagazines = 0;
        let mut back = self.take_returned(c);
        while let Some(m) = pool.pop().or_else(|| back.pop()) {
            self.free_magazine(c, m);
        }
        for class in 0..NUM_CLASSES {
            let list = core::mem::replace(&mut c.local.free[class], FreeList::EMPTY);
            let spare = c.local.spare[class].take();
            if let Some(cur) = c.local.current[class].take() {
                cur.give_back(list);
                if cur.is_empty() {
                    // SAFETY: every object of `cur` is free, so the slab is empty;
                    // it was current, so on none of our lists now.
                    unsafe { self.nodes[cur.node()].release(cur) };
                } else if cur.is_full() {
                    cur.set_state(SlabState::Full);
                } else {
                    c.local.partial[class].push(cur);
                }
            }
            if let Some(spare) = spare {
                // SAFETY: a spare is an empty slab of ours, and it has left the
                // spare slot, its only list.
                unsafe { self.nodes[spare.node()].release(spare) };
            }
        }
    }
}
