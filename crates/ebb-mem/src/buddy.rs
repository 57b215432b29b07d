//! A binary buddy allocator over one naturally aligned arena of pages.
//!
//! Knuth, *The Art of Computer Programming* vol. 1, §2.5 ("buddy system");
//! the same scheme as Linux's zone allocator and EbbRT's `PageAllocator`.
//! A block of order `k` is `2^k` pages and starts at a page index that is a
//! multiple of `2^k`; its buddy is the block whose index differs in bit `k`.
//! Freeing a block merges it with its buddy while the buddy is free and of
//! the same order (coalescing), so fragmentation never outlives the objects
//! that caused it.
//!
//! Bookkeeping lives inside the managed memory: one metadata byte per page
//! (kept in the arena's first pages, which are marked allocated) and a
//! doubly linked free list per order threaded through the first bytes of the
//! free blocks themselves. No `alloc` is needed, which lets the buddy
//! allocator sit at the bottom of every other allocator.

use core::ptr::{self, NonNull};

use crate::PAGE_SIZE;

/// The largest order an arena may have: `2^MAX_ORDER` pages (4 GiB).
pub const MAX_ORDER: usize = 20;

/// Metadata byte flag: this page starts a free block (order in the low bits).
const FREE: u8 = 0x80;
/// Metadata byte flag: this page starts an allocated block.
const USED: u8 = 0x40;
/// Mask of the order in a metadata byte.
const ORDER_MASK: u8 = 0x3f;

/// An order as stored in a metadata byte (orders are at most `MAX_ORDER`).
fn order_byte(order: usize) -> u8 {
    debug_assert!(order <= MAX_ORDER);
    // Masked to six bits: fits a byte.
    #[allow(clippy::cast_possible_truncation)]
    let b = (order & ORDER_MASK as usize) as u8;
    b
}

/// The links of a free block, stored in its first bytes.
#[repr(C)]
struct FreeBlock {
    next: *mut FreeBlock,
    prev: *mut FreeBlock,
}

/// Buddy allocator for one arena of `2^order` pages.
pub struct BuddyAllocator {
    base: *mut u8,
    order: usize,
    meta: *mut u8,
    free: [*mut FreeBlock; MAX_ORDER + 1],
    free_pages: usize,
}

// SAFETY: the allocator owns its arena exclusively (a contract of `init`);
// the raw pointers are never shared outside it, so moving it to another
// thread is sound. Shared use goes through a lock (`PageAllocator`).
unsafe impl Send for BuddyAllocator {}

impl BuddyAllocator {
    /// An allocator that manages nothing; `alloc` always fails.
    pub const fn empty() -> Self {
        Self {
            base: ptr::null_mut(),
            order: 0,
            meta: ptr::null_mut(),
            free: [ptr::null_mut(); MAX_ORDER + 1],
            free_pages: 0,
        }
    }

    /// Number of metadata pages an arena of `2^order` pages keeps for itself.
    pub const fn meta_pages(order: usize) -> usize {
        (1usize << order).div_ceil(PAGE_SIZE)
    }

    /// Takes ownership of the arena at `base` of `2^order` pages and makes all
    /// of it free except the first [`Self::meta_pages`] pages, which hold the
    /// metadata.
    ///
    /// # Safety
    /// `base` must be aligned to `PAGE_SIZE << order`, valid for reads and
    /// writes for `PAGE_SIZE << order` bytes and used by nothing else for as
    /// long as this allocator (or memory it hands out) lives.
    pub unsafe fn init(&mut self, base: NonNull<u8>, order: usize) {
        assert!(order <= MAX_ORDER, "arena order too large");
        debug_assert!((base.as_ptr() as usize).is_multiple_of(PAGE_SIZE << order));
        *self = Self::empty();
        self.base = base.as_ptr();
        self.order = order;
        self.meta = base.as_ptr();
        let pages = 1usize << order;
        // SAFETY: the metadata bytes are the first `pages` bytes of the arena,
        // which the caller gave us for exclusive use.
        unsafe { ptr::write_bytes(self.meta, 0, pages) };
        let reserved = Self::meta_pages(order);
        // Mark the metadata pages as one allocated run and free the rest as
        // the largest aligned blocks that fit.
        self.set_meta(0, USED);
        let mut idx = reserved;
        while idx < pages {
            let mut k = idx.trailing_zeros() as usize;
            while k > 0 && idx + (1 << k) > pages {
                k -= 1;
            }
            self.push(idx, k);
            idx += 1 << k;
        }
    }

    /// Takes ownership of the pages of the arena at address `base` (`2^order`
    /// pages, naturally aligned; may be 0) that lie in `usable` (byte ranges
    /// `[start, end)`, absolute addresses, clipped to the arena and to whole
    /// pages; page 0 is never used, a null pointer); the rest are holes
    /// that are never handed out nor coalesced with. The
    /// metadata takes the first [`Self::meta_pages`] pages of the first
    /// usable run long enough. Returns false (and manages nothing) if no
    /// run is. This is how an arena covers physical memory with firmware
    /// holes and an image in it (the native platform).
    ///
    /// # Safety
    /// `base` must be aligned to `PAGE_SIZE << order`; the usable pages
    /// must be valid for reads and writes and used by nothing else for as
    /// long as this allocator (or memory it hands out) lives. Nothing
    /// outside them is touched.
    pub unsafe fn init_with_holes(
        &mut self,
        base: usize,
        order: usize,
        usable: &[(usize, usize)],
    ) -> bool {
        assert!(order <= MAX_ORDER, "arena order too large");
        debug_assert!(base.is_multiple_of(PAGE_SIZE << order));
        *self = Self::empty();
        let start = base;
        let pages = 1usize << order;
        // Page-index runs of the arena, in `usable`.
        let runs = usable.iter().filter_map(move |&(s, e)| {
            let s = s.max(start).max(PAGE_SIZE).next_multiple_of(PAGE_SIZE);
            let e = e.min(start + (PAGE_SIZE << order)) & !(PAGE_SIZE - 1);
            (s < e).then(|| ((s - start) / PAGE_SIZE, (e - start) / PAGE_SIZE))
        });
        let reserved = Self::meta_pages(order);
        let Some((meta_idx, _)) = runs.clone().find(|(s, e)| e - s >= reserved) else {
            return false;
        };
        // An arena at address 0 has a null base: emptiness is `meta` null.
        self.base = ptr::with_exposed_provenance_mut(base);
        self.order = order;
        self.meta = ptr::with_exposed_provenance_mut(base + meta_idx * PAGE_SIZE);
        // SAFETY: the metadata run is `reserved` usable pages (at least
        // `pages` bytes), ours by the caller's contract.
        unsafe { ptr::write_bytes(self.meta, 0, pages) };
        self.set_meta(meta_idx, USED);
        for (s, e) in runs {
            if (s..e).contains(&meta_idx) {
                self.free_run(s, meta_idx);
                self.free_run(meta_idx + reserved, e);
            } else {
                self.free_run(s, e);
            }
        }
        true
    }

    /// Frees pages `[idx, end)` as the largest aligned blocks that fit.
    fn free_run(&mut self, mut idx: usize, end: usize) {
        while idx < end {
            let mut k = (idx.trailing_zeros() as usize).min(self.order);
            while k > 0 && idx + (1 << k) > end {
                k -= 1;
            }
            self.push(idx, k);
            idx += 1 << k;
        }
    }

    /// Whether `ptr` lies inside this arena.
    pub fn contains(&self, ptr: *const u8) -> bool {
        let a = ptr as usize;
        let b = self.base as usize;
        !self.meta.is_null() && a >= b && a - b < PAGE_SIZE << self.order
    }

    /// Pages currently free.
    pub fn free_pages(&self) -> usize {
        self.free_pages
    }

    /// Pages managed (including metadata pages).
    pub fn total_pages(&self) -> usize {
        if self.meta.is_null() {
            0
        } else {
            1 << self.order
        }
    }

    /// Allocates a block of `2^order` pages, aligned to its size relative to
    /// the arena (and so absolutely, as the arena is naturally aligned).
    pub fn alloc(&mut self, order: usize) -> Option<NonNull<u8>> {
        if order > self.order {
            return None;
        }
        let mut k = order;
        while k <= self.order && self.free[k].is_null() {
            k += 1;
        }
        if k > self.order {
            return None;
        }
        let block = self.free[k];
        let idx = self.index_of(block.cast());
        self.remove(idx, k);
        // Split: keep the lower half, free the upper half, until small enough.
        while k > order {
            k -= 1;
            self.push(idx + (1 << k), k);
        }
        self.set_meta(idx, USED | order_byte(order));
        NonNull::new(block.cast())
    }

    /// Returns a block obtained from [`Self::alloc`] with the same `order`,
    /// coalescing it with free buddies.
    ///
    /// # Safety
    /// `ptr` must come from `self.alloc(order)` and not have been freed since.
    pub unsafe fn free(&mut self, ptr: NonNull<u8>, order: usize) {
        let mut idx = self.index_of(ptr.as_ptr());
        debug_assert_eq!(self.meta(idx), USED | order_byte(order), "bad buddy free");
        self.set_meta(idx, 0);
        let mut k = order;
        while k < self.order {
            let buddy = idx ^ (1 << k);
            if self.meta(buddy) != FREE | order_byte(k) {
                break;
            }
            self.remove(buddy, k);
            idx &= !(1 << k);
            k += 1;
        }
        self.push(idx, k);
    }

    /// The order of the allocated block starting at `ptr`, if one does.
    pub fn allocated_order(&self, ptr: *const u8) -> Option<usize> {
        if !self.contains(ptr) || !(ptr as usize).is_multiple_of(PAGE_SIZE) {
            return None;
        }
        let m = self.meta(self.index_of(ptr));
        (m & USED != 0).then_some((m & ORDER_MASK) as usize)
    }

    fn index_of(&self, ptr: *const u8) -> usize {
        (ptr as usize - self.base as usize) / PAGE_SIZE
    }

    fn block(&self, idx: usize) -> *mut FreeBlock {
        self.base.wrapping_add(idx * PAGE_SIZE).cast()
    }

    fn meta(&self, idx: usize) -> u8 {
        debug_assert!(idx < 1 << self.order);
        // SAFETY: `idx` is a page index of this arena, and the metadata array
        // has one byte per page (set up in `init`).
        let p = unsafe { self.meta.add(idx) };
        // SAFETY: `p` is inside the metadata array, whose bytes `init` wrote.
        unsafe { *p }
    }

    fn set_meta(&mut self, idx: usize, value: u8) {
        debug_assert!(idx < 1 << self.order);
        // SAFETY: `idx < 2^order` (asserted) and the metadata array has one
        // byte per page of the arena (set up in `init`).
        let p = unsafe { self.meta.add(idx) };
        // SAFETY: `p` is inside the metadata array; `&mut self` gives exclusive
        // access to it.
        unsafe { *p = value };
    }

    /// Marks the block at page `idx` free with order `k` and links it in.
    fn push(&mut self, idx: usize, k: usize) {
        let block = self.block(idx);
        let head = self.free[k];
        // SAFETY: the block is free memory of this arena (at least one page),
        // owned by the allocator, so its first bytes may hold the links; `head`
        // is null or another free block of the arena.
        unsafe {
            block.write(FreeBlock {
                next: head,
                prev: ptr::null_mut(),
            });
        }
        if !head.is_null() {
            // SAFETY: `head` is a free block of this arena with valid links.
            unsafe { (*head).prev = block };
        }
        self.free[k] = block;
        self.set_meta(idx, FREE | order_byte(k));
        self.free_pages += 1 << k;
    }

    /// Unlinks the free block at page `idx` of order `k`.
    fn remove(&mut self, idx: usize, k: usize) {
        let block = self.block(idx);
        // SAFETY: the metadata says `block` is a free block of order `k`, so
        // its links were written by `push` and point at free blocks or null.
        let FreeBlock { next, prev } = unsafe { block.read() };
        if prev.is_null() {
            self.free[k] = next;
        } else {
            // SAFETY: `prev` came from the links of a free block of order `k`, so it
            // is another free block of the arena; `&mut self` makes us its only
            // user.
            unsafe { (*prev).next = next };
        }
        if !next.is_null() {
            // SAFETY: `next` came from the links of a free block of order `k`, so it
            // is another free block of the arena; `&mut self` makes us its only
            // user.
            unsafe { (*next).prev = prev };
        }
        self.set_meta(idx, 0);
        self.free_pages -= 1 << k;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::alloc::{alloc, dealloc, Layout};
    use std::vec::Vec;

    struct Arena {
        ptr: NonNull<u8>,
        layout: Layout,
    }
    impl Arena {
        fn new(order: usize) -> Self {
            let layout = Layout::from_size_align(PAGE_SIZE << order, PAGE_SIZE << order).unwrap();
            // SAFETY: the layout has a non-zero size.
            let ptr = NonNull::new(unsafe { alloc(layout) }).unwrap();
            Self { ptr, layout }
        }
    }
    impl Drop for Arena {
        fn drop(&mut self) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { dealloc(self.ptr.as_ptr(), self.layout) };
        }
    }

    #[test]
    fn split_and_coalesce() {
        let arena = Arena::new(6);
        let mut b = BuddyAllocator::empty();
        // SAFETY: the arena is aligned, sized and exclusively ours.
        unsafe { b.init(arena.ptr, 6) };
        let meta = BuddyAllocator::meta_pages(6);
        assert_eq!(meta, 1);
        assert_eq!(b.free_pages(), 63);
        // One page: splits down from the order-0 block at index 1.
        let p = b.alloc(0).unwrap();
        assert_eq!(b.free_pages(), 62);
        // A 32-page block must be the upper half.
        let big = b.alloc(5).unwrap();
        assert_eq!(
            big.as_ptr() as usize - arena.ptr.as_ptr() as usize,
            32 * PAGE_SIZE
        );
        assert!(b.alloc(5).is_none(), "only one 32-page block exists");
        // SAFETY: both blocks came from `b` with these orders.
        unsafe { b.free(big, 5) };
        // SAFETY: `p` came from `b.alloc(0)` and is freed once.
        unsafe { b.free(p, 0) };
        assert_eq!(b.free_pages(), 63);
        // After coalescing, the upper half is available again as a whole.
        let again = b.alloc(5).unwrap();
        assert_eq!(again, big);
    }

    #[test]
    fn full_coalesce_restores_largest_block() {
        let order = 8;
        let arena = Arena::new(order);
        let mut b = BuddyAllocator::empty();
        // SAFETY: the arena is aligned, sized for `order` and exclusively ours.
        unsafe { b.init(arena.ptr, order) };
        let initial = b.free_pages();
        let mut blocks = Vec::new();
        while let Some(p) = b.alloc(0) {
            blocks.push(p);
        }
        assert_eq!(blocks.len(), initial);
        // Free in an interleaved order to exercise merges on both sides.
        let (evens, odds): (Vec<_>, Vec<_>) =
            blocks.iter().enumerate().partition(|(i, _)| i % 2 == 0);
        for (_, p) in odds.into_iter().chain(evens) {
            // SAFETY: every block came from `b.alloc(0)` once.
            unsafe { b.free(*p, 0) };
        }
        assert_eq!(b.free_pages(), initial);
        assert!(b.alloc(order - 1).is_some(), "upper half coalesced");
    }

    #[test]
    fn holes_are_never_handed_out_nor_merged() {
        let order = 6;
        let arena = Arena::new(order);
        let base = arena.ptr.as_ptr() as usize;
        let page = |i: usize| base + i * PAGE_SIZE;
        // Usable: pages 3..20 (not page-aligned at the ends: clipped to
        // whole pages 4..20) and 40..64; holes elsewhere.
        let usable = [(page(3) + 100, page(20) + 5), (page(40), page(70))];
        let mut b = BuddyAllocator::empty();
        // SAFETY: the arena is aligned, sized and exclusively ours.
        assert!(unsafe { b.init_with_holes(base, order, &usable) });
        // Metadata: page 4 (one page for 64 pages).
        assert_eq!(b.free_pages(), (20 - 5) + (64 - 40));
        let mut got = Vec::new();
        while let Some(p) = b.alloc(0) {
            let i = (p.as_ptr() as usize - base) / PAGE_SIZE;
            assert!((5..20).contains(&i) || (40..64).contains(&i), "page {i}");
            got.push(p);
        }
        assert_eq!(got.len(), 39);
        for p in got {
            // SAFETY: each block came from `b.alloc(0)` once.
            unsafe { b.free(p, 0) };
        }
        assert_eq!(b.free_pages(), 39);
        // Pages 40..64 hold one 16-page block (48..64) at most: 32..64
        // would need the hole 32..40.
        assert!(b.alloc(4).is_some());
        assert!(b.alloc(5).is_none());
        let mut none = BuddyAllocator::empty();
        // SAFETY: no page is usable, so nothing is touched.
        assert!(!unsafe { none.init_with_holes(base, order, &[(page(1), page(1))]) });
    }

    #[test]
    fn no_overlap_random_orders() {
        let order = 10;
        let arena = Arena::new(order);
        let mut b = BuddyAllocator::empty();
        // SAFETY: the arena is aligned, sized for `order` and exclusively ours.
        unsafe { b.init(arena.ptr, order) };
        let mut live: Vec<(usize, usize)> = Vec::new();
        let mut seed = 12345u64;
        // Miri interprets every step: 200 rounds still reach every order.
        for _ in 0..if cfg!(miri) { 200 } else { 2000 } {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = ((seed >> 33) % 5) as usize;
            if (seed >> 20).is_multiple_of(3) && !live.is_empty() {
                let i = (seed >> 40) as usize % live.len();
                let (p, k) = live.swap_remove(i);
                // SAFETY: `p` was allocated with order `k` and is live.
                unsafe { b.free(NonNull::new(p as *mut u8).unwrap(), k) };
            } else if let Some(p) = b.alloc(k) {
                let a = p.as_ptr() as usize;
                assert_eq!(a % (PAGE_SIZE << k), 0, "natural alignment");
                assert_eq!(b.allocated_order(p.as_ptr()), Some(k));
                for &(q, qk) in &live {
                    let (s, e) = (q, q + (PAGE_SIZE << qk));
                    assert!(a + (PAGE_SIZE << k) <= s || a >= e, "overlap");
                }
                live.push((a, k));
            }
        }
        for (p, k) in live.drain(..) {
            // SAFETY: live blocks, freed once.
            unsafe { b.free(NonNull::new(p as *mut u8).unwrap(), k) };
        }
        assert_eq!(
            b.free_pages(),
            (1 << order) - BuddyAllocator::meta_pages(order)
        );
    }
}
