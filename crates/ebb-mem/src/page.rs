//! `PageAllocator`: the per-NUMA-node page allocator Ebb.
//!
//! Each node has one representative: a lock-protected set of buddy arenas
//! ([`crate::buddy`]). Arenas come from a [`PageSource`] — on hosted, large
//! `mmap` reservations that the kernel backs on first touch; on native, the
//! node's physical memory ranges found at boot. The lock is only taken on
//! slow paths: slab allocators take and return whole slabs, never objects.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::buddy::BuddyAllocator;
use crate::sync::SpinLock;
use crate::PAGE_SIZE;

/// Where page allocators get their arenas.
///
/// # Safety
/// Memory returned by `map` must be valid for reads and writes, aligned as
/// requested, and never handed out again or used by anything else.
pub unsafe trait PageSource: Sync {
    /// Maps `bytes` of fresh memory aligned to `align` (both powers of two,
    /// multiples of the page size) for node `node`, or returns `None`.
    fn map(&self, bytes: usize, align: usize, node: usize) -> Option<NonNull<u8>>;
}

/// Order of one arena: `2^ARENA_ORDER` pages (256 MiB of address space).
pub const ARENA_ORDER: usize = 16;
/// Bytes in one arena.
pub const ARENA_BYTES: usize = PAGE_SIZE << ARENA_ORDER;
/// Arenas one node may hold (16 GiB per node).
pub const MAX_ARENAS: usize = 64;

struct Arenas {
    buddies: [BuddyAllocator; MAX_ARENAS],
    count: usize,
    /// The arena that satisfied the last request: tried first.
    hint: usize,
}

/// The page allocator representative of one NUMA node.
pub struct PageAllocator {
    source: &'static dyn PageSource,
    node: usize,
    arenas: SpinLock<Arenas>,
    used_pages: AtomicUsize,
}

impl PageAllocator {
    /// A page allocator for `node` that grows from `source`.
    pub const fn new(source: &'static dyn PageSource, node: usize) -> Self {
        const EMPTY: BuddyAllocator = BuddyAllocator::empty();
        Self {
            source,
            node,
            arenas: SpinLock::new(Arenas {
                buddies: [EMPTY; MAX_ARENAS],
                count: 0,
                hint: 0,
            }),
            used_pages: AtomicUsize::new(0),
        }
    }

    /// The node this representative serves.
    pub fn node(&self) -> usize {
        self.node
    }

    /// Allocates `2^order` contiguous pages, naturally aligned.
    pub fn alloc(&self, order: usize) -> Option<NonNull<u8>> {
        if order > ARENA_ORDER - 1 {
            return None;
        }
        let mut a = self.arenas.lock();
        let count = a.count;
        let hint = a.hint;
        let mut found = None;
        for i in (0..count).map(|i| (i + hint) % count) {
            if let Some(p) = a.buddies[i].alloc(order) {
                a.hint = i;
                found = Some(p);
                break;
            }
        }
        if found.is_none() && a.count < MAX_ARENAS {
            let base = self.source.map(ARENA_BYTES, ARENA_BYTES, self.node)?;
            let i = a.count;
            // SAFETY: the source returned fresh, exclusively ours memory of
            // `ARENA_BYTES`, aligned to `ARENA_BYTES`.
            unsafe { a.buddies[i].init(base, ARENA_ORDER) };
            a.count += 1;
            a.hint = i;
            found = a.buddies[i].alloc(order);
        }
        drop(a);
        if found.is_some() {
            self.used_pages.fetch_add(1 << order, Ordering::Relaxed);
        }
        found
    }

    /// Adds the arena at address `base` (`ARENA_BYTES`, aligned to it; 0 is
    /// fine) of which only
    /// the `usable` byte ranges are memory (see
    /// [`BuddyAllocator::init_with_holes`]): how a platform that owns
    /// physical memory hands it over up front. False if the node has
    /// [`MAX_ARENAS`] already or the arena has too little usable memory.
    ///
    /// # Safety
    /// As for [`BuddyAllocator::init_with_holes`]; the ranges must not
    /// overlap another arena's.
    pub unsafe fn add_arena(&self, base: usize, usable: &[(usize, usize)]) -> bool {
        let mut a = self.arenas.lock();
        if a.count == MAX_ARENAS {
            return false;
        }
        let i = a.count;
        // SAFETY: the caller's contract.
        if !unsafe { a.buddies[i].init_with_holes(base, ARENA_ORDER, usable) } {
            return false;
        }
        a.count += 1;
        true
    }

    /// Returns pages obtained from [`Self::alloc`] with the same `order`.
    ///
    /// # Safety
    /// `ptr` must come from `self.alloc(order)` and not have been freed since.
    pub unsafe fn free(&self, ptr: NonNull<u8>, order: usize) {
        let mut a = self.arenas.lock();
        let count = a.count;
        let i = (0..count)
            .find(|&i| a.buddies[i].contains(ptr.as_ptr()))
            .expect("PageAllocator::free: pointer not from this allocator");
        // SAFETY: the caller guarantees `ptr` is a live block of `order`
        // pages from this allocator, and it lies in arena `i`.
        unsafe { a.buddies[i].free(ptr, order) };
        drop(a);
        self.used_pages.fetch_sub(1 << order, Ordering::Relaxed);
    }

    /// Pages currently handed out (not counting arena metadata).
    pub fn used_pages(&self) -> usize {
        self.used_pages.load(Ordering::Relaxed)
    }

    /// Free pages over all arenas.
    pub fn free_pages(&self) -> usize {
        let a = self.arenas.lock();
        a.buddies[..a.count].iter().map(|b| b.free_pages()).sum()
    }
}
