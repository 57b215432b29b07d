//! The heap: for now a first-fit free-list allocator
//! (`linked_list_allocator`, the rust-osdev crate) over the RAM left after
//! the image and the page tables, as the `#[global_allocator]`.
//!
//! This is a stopgap: `ebb-mem`'s buddy/slab `GeneralPurposeAllocator`
//! needs 256 MiB naturally aligned arenas backed entirely by RAM (its
//! `PageSource` contract), which QEMU's memory maps do not offer below the
//! firmware holes, plus a native `CoreLocal` (the per-core page) and a
//! page-fault handler for its demand-zero regions. See the README's "Next".

use linked_list_allocator::LockedHeap;

use crate::paging::MemoryPlan;

#[global_allocator]
static HEAP: LockedHeap = LockedHeap::empty();

/// Gives the heap the free part of the RAM range the page tables came from.
pub fn init(plan: &MemoryPlan) {
    let (start, end) = plan.rest;
    // SAFETY: `[start, end)` is usable RAM, identity mapped read-write, past
    // the image and the page tables, and used by nothing else; `init` runs
    // once, before anything allocates.
    unsafe { HEAP.lock().init(start as *mut u8, (end - start) as usize) };
}

/// Bytes the heap manages and bytes in use.
pub fn stats() -> (usize, usize) {
    let heap = HEAP.lock();
    (heap.size(), heap.used())
}
