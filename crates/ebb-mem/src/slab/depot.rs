//! The per-node level: a node's page allocator and its depot of empty slabs,
//! through which slabs emptied on one core are reused by any core of the
//! node.

use core::ptr::NonNull;

use crate::page::{PageAllocator, PageSource};
use crate::size_class::SLAB_ORDER;
use crate::sync::SpinLock;

use super::header::SlabRef;

/// Empty slabs a node's depot keeps per slab size before returning pages.
pub const DEPOT_SLABS: usize = 16;
/// Smallest slab order (64 KiB); the depot is indexed from it.
const MIN_SLAB_ORDER: usize = 4;
/// Distinct slab orders (64 KiB .. 512 KiB).
const DEPOT_ORDERS: usize = 4;

/// Empty slabs by slab order, linked through their headers' `next`.
struct Depot {
    lists: [Option<SlabRef>; DEPOT_ORDERS],
    counts: [usize; DEPOT_ORDERS],
}

// SAFETY: slabs in the depot are empty and held by the depot alone (their
// previous holders gave them up); its lock serializes every use of them.
unsafe impl Send for Depot {}

/// One NUMA node: its page allocator and depot.
pub(super) struct NodeLevel {
    pub(super) pages: PageAllocator,
    depot: SpinLock<Depot>,
}

impl NodeLevel {
    pub(super) const fn new(source: &'static dyn PageSource, node: usize) -> Self {
        Self {
            pages: PageAllocator::new(source, node),
            depot: SpinLock::new(Depot {
                lists: [None; DEPOT_ORDERS],
                counts: [0; DEPOT_ORDERS],
            }),
        }
    }

    /// An empty slab's block of `order` pages from the depot, and the node
    /// it came from.
    pub(super) fn depot_pop(&self, order: usize) -> Option<(NonNull<u8>, usize)> {
        let i = order - MIN_SLAB_ORDER;
        let mut d = self.depot.lock();
        let s = d.lists[i]?;
        d.lists[i] = s.next();
        d.counts[i] -= 1;
        Some((s.block(), self.pages.node()))
    }

    /// Gives an empty slab to the depot, or its pages back to the page
    /// allocator if the depot has [`DEPOT_SLABS`] of its size already.
    ///
    /// # Safety
    /// `s` must be an empty slab from this node's page allocator that the
    /// caller holds, on none of its lists; the caller gives it up.
    pub(super) unsafe fn release(&self, s: SlabRef) {
        let order = SLAB_ORDER[s.class()];
        let i = order - MIN_SLAB_ORDER;
        {
            let mut d = self.depot.lock();
            if d.counts[i] < DEPOT_SLABS {
                s.set_next(d.lists[i]);
                d.lists[i] = Some(s);
                d.counts[i] += 1;
                return;
            }
        }
        // SAFETY: `s` is an unused block of `order` pages from this node's
        // page allocator (caller's contract), not freed before.
        unsafe { self.pages.free(s.block(), order) };
    }

    /// Returns every depot slab's pages to the page allocator.
    pub(super) fn trim(&self) {
        let mut d = self.depot.lock();
        for i in 0..DEPOT_ORDERS {
            let mut next = d.lists[i].take();
            d.counts[i] = 0;
            while let Some(s) = next {
                next = s.next();
                // SAFETY: a depot slab is an unused block of `MIN_SLAB_ORDER + i`
                // pages from this node's page allocator, held by the depot (whose
                // lock we hold), which gives it up here.
                unsafe { self.pages.free(s.block(), MIN_SLAB_ORDER + i) };
            }
        }
    }
}
