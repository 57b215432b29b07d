//! Memory: `ebb-mem`'s general-purpose allocator is the
//! `#[global_allocator]`, over a page allocator that owns all usable RAM of
//! the PVH memory map (after the image and the boot page tables).
//!
//! The three `ebb-mem` platform hooks, for the native platform:
//!
//! * [`PageSource`]: nothing to grow from. RAM is handed over up front at
//!   boot ([`init`]): every naturally aligned 256 MiB window (`ebb-mem`'s
//!   arena) that holds usable RAM becomes an arena whose non-RAM pages
//!   (firmware holes, the image, MMIO) are holes
//!   (`PageAllocator::add_arena`).
//! * [`CoreLocal`]: each core's cache pointer is the last word of its own
//!   context page (after `ebb-core`'s `Context`, at a fixed virtual address
//!   that every core's page tables back with a different page, like the
//!   EbbRef table): one load, no segment register.
//! * [`AddressSpace`]: allocations over 32 KiB (the slabs' largest class)
//!   whose reservation is below [`large::THRESHOLD`] (2 MiB) are naturally
//!   aligned blocks of the page allocator, identity mapped and so
//!   physically contiguous (handy for DMA), zeroed on reservation (the
//!   demand-zero contract). From 2 MiB up they are mapped from separate
//!   4 KiB frames in their own virtual window (`large.rs`): no contiguous
//!   block needed, so they can exceed the largest free block. Protection
//!   cannot change on the identity map's large pages: `protect` says no.

use core::ptr::{self, NonNull};

use ebb_mem::page::{PageSource, ARENA_BYTES};
use ebb_mem::slab::{CoreCache, EMPTY_CACHE};
use ebb_mem::vmem::{AddressSpace, Protection};
use ebb_mem::{CoreLocal, GeneralPurposeAllocator, MemoryRoot, PAGE_SIZE};

use crate::arch::x86_64::layout::Kind;
use crate::arch::x86_64::paging::{MemoryPlan, CORE_CACHE_SLOT};
use crate::mm::large;

/// The native platform's memory hooks.
pub struct Native;

/// No memory beyond what [`init`] handed over.
struct NoMorePages;

// SAFETY: never returns memory.
unsafe impl PageSource for NoMorePages {
    fn map(&self, _bytes: usize, _align: usize, _node: usize) -> Option<NonNull<u8>> {
        None
    }
}

/// Large allocations as blocks of the page allocator (see the module doc).
struct BlockSpace;

/// The buddy order of the smallest block holding `len` bytes.
fn order_for(len: usize) -> usize {
    len.div_ceil(PAGE_SIZE).next_power_of_two().trailing_zeros() as usize
}

// SAFETY: blocks come from the page allocator, which hands each out once
// (and `large::reserve` maps fresh frames at never reused addresses);
// they are RAM, readable and writable — identity-mapped, except those from
// `large::reserve`, which are mapped in their own window (so anything that
// hands a heap address to a device must translate it or copy, as
// virtio-net's transmit path does) — naturally aligned to their size, which is at least `len` and so at least `align` (`align` is a
// power of two no larger than `len` in `VMemAllocator::reserve`, which
// reserves `align + len` bytes).
unsafe impl AddressSpace for BlockSpace {
    fn reserve(&self, len: usize, align: usize) -> Option<NonNull<u8>> {
        if len >= large::THRESHOLD {
            return large::reserve(len, align);
        }
        let order = order_for(len.max(align));
        let block = ROOT.slabs.pages(0).alloc(order)?;
        // SAFETY: a fresh block of `PAGE_SIZE << order >= len` bytes.
        unsafe { ptr::write_bytes(block.as_ptr(), 0, PAGE_SIZE << order) };
        Some(block)
    }

    unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
        if large::contains(ptr.as_ptr() as u64) {
            // SAFETY: the caller's contract: exactly a reservation, which
            // `reserve` made in the window.
            unsafe { large::release(ptr, len) };
            return;
        }
        // SAFETY: `ptr`/`len` are exactly a reservation (caller's
        // contract), so a block of this order.
        unsafe { ROOT.slabs.pages(0).free(ptr, order_for(len)) };
    }

    unsafe fn protect(&self, _ptr: NonNull<u8>, _len: usize, _prot: Protection) -> bool {
        false
    }
}

static PAGES: NoMorePages = NoMorePages;
static SPACE: BlockSpace = BlockSpace;
static ROOT: MemoryRoot = MemoryRoot::new(&PAGES, &SPACE);

#[global_allocator]
static GLOBAL: GeneralPurposeAllocator<Native> = GeneralPurposeAllocator::new();

// SAFETY: the slot is in the calling core's own context page (only that
// core maps it at CORE_CACHE_SLOT), it holds the sentinel from the start
// (`prepare_core_page`) or a cache of `ROOT.slabs` that this core attached.
unsafe impl CoreLocal for Native {
    #[inline(always)]
    fn root() -> &'static MemoryRoot {
        &ROOT
    }

    #[inline(always)]
    fn current_core_cache() -> *mut CoreCache {
        // SAFETY: CORE_CACHE_SLOT is in this core's own context page, mapped
        // and initialized (`prepare_core_page`) on every core before it runs
        // code that allocates.
        unsafe { (CORE_CACHE_SLOT as *const *mut CoreCache).read() }
    }

    fn attach_core_cache() -> *mut CoreCache {
        let Some(cache) = ROOT.slabs.new_cache(0) else {
            return ptr::null_mut();
        };
        // SAFETY: CORE_CACHE_SLOT is in this core's own context page (only
        // this core maps it), mapped and aligned for a pointer.
        unsafe { (CORE_CACHE_SLOT as *mut *mut CoreCache).write(cache.as_ptr()) };
        cache.as_ptr()
    }
}

/// Prepares a core's context page (physical frame `frame`, identity
/// mapped, zeroed): its cache slot starts as the "no cache yet" sentinel.
pub fn prepare_core_page(frame: u64) {
    let slot = (frame + (CORE_CACHE_SLOT & (PAGE_SIZE as u64 - 1))) as *mut *mut CoreCache;
    // SAFETY: the frame is a fresh page-table-owned page of RAM, identity
    // mapped, that no core runs on yet; the slot is its last word.
    unsafe { slot.write(EMPTY_CACHE.as_ptr()) };
}

/// Bytes of usable RAM handed to the page allocator (set by [`init`]).
static USABLE_BYTES: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Bytes of usable RAM the page allocator manages: what the application
/// may use in all (`Platform::memory_bytes`).
pub fn usable_bytes() -> usize {
    USABLE_BYTES.load(core::sync::atomic::Ordering::Relaxed)
}

/// Hands all usable RAM to the page allocator, as 256 MiB arenas with
/// holes. Runs once, on core 0, before anything allocates.
pub fn init(plan: &MemoryPlan) {
    let mut usable = [(0usize, 0usize); crate::arch::x86_64::layout::MAX_RANGES];
    let mut count = 0;
    for range in plan.usable.as_slice() {
        // The range the boot page tables came from starts after them.
        let start = if (range.start..range.end).contains(&plan.rest.0) {
            plan.rest.0
        } else {
            range.start
        };
        if range.kind == Kind::Ram && start < range.end {
            usable[count] = (start as usize, range.end as usize);
            count += 1;
        }
    }
    let usable = &usable[..count];
    USABLE_BYTES.store(
        usable.iter().map(|&(start, end)| end - start).sum(),
        core::sync::atomic::Ordering::Relaxed,
    );
    let pages = ROOT.slabs.pages(0);
    let mut arenas = 0;
    let first = usable.iter().map(|r| r.0).min().unwrap_or(0) & !(ARENA_BYTES - 1);
    let end = usable.iter().map(|r| r.1).max().unwrap_or(0);
    let mut base = first;
    while base < end {
        if usable
            .iter()
            .any(|&(s, e)| s < base + ARENA_BYTES && e > base)
        {
            // SAFETY: the usable ranges are RAM that the memory map gives
            // us, identity mapped, past the image and the page tables, and
            // used by nothing else; arenas are disjoint windows.
            if unsafe { pages.add_arena(base, usable) } {
                arenas += 1;
            }
        }
        base += ARENA_BYTES;
    }
    if arenas == 0 {
        log::error!("no usable RAM for the page allocator");
    }
}

/// Bytes the page allocator manages free, and bytes handed out.
pub fn stats() -> (usize, usize) {
    let pages = ROOT.slabs.pages(0);
    (
        pages.free_pages() * PAGE_SIZE,
        pages.used_pages() * PAGE_SIZE,
    )
}

/// Returns this core's batched remote frees to their owners (before it
/// halts, so that no freed memory waits on an idle core).
pub fn flush_remote_frees() {
    let cache = Native::current_core_cache();
    if !ebb_mem::slab::is_empty_cache(cache) {
        // SAFETY: a non-sentinel cache in this core's slot is this core's.
        unsafe { ebb_mem::SlabAllocator::flush_remote(cache) };
    }
}

/// A zeroed 4 KiB frame straight from the page allocator (identity
/// mapped), for page tables and pages mapped by the page-fault handler,
/// which must not re-enter the general-purpose allocator.
pub fn zeroed_frame() -> Option<u64> {
    let frame = ROOT.slabs.pages(0).alloc(0)?;
    // SAFETY: a fresh page of the page allocator.
    unsafe { ptr::write_bytes(frame.as_ptr(), 0, PAGE_SIZE) };
    Some(frame.as_ptr() as u64)
}

/// `2^order` contiguous frames straight from the page allocator (identity
/// mapped, not zeroed), kept for good (stacks).
pub fn frames(order: usize) -> Option<u64> {
    Some(ROOT.slabs.pages(0).alloc(order)?.as_ptr() as u64)
}

/// Returns a frame from [`zeroed_frame`].
///
/// # Safety
/// `frame` came from [`zeroed_frame`] and nothing uses it any more.
pub unsafe fn free_frame(frame: u64) {
    if let Some(frame) = NonNull::new(frame as *mut u8) {
        // SAFETY: the caller's contract: an order-0 block of the page
        // allocator, no longer used.
        unsafe { ROOT.slabs.pages(0).free(frame, 0) };
    }
}
