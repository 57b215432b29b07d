//! Large allocations of the general-purpose allocator (a reservation of
//! [`THRESHOLD`] bytes or more: the allocation plus `VMemAllocator`'s
//! header page) in their own virtual window, PML4 entry 508
//! ([`LARGE_VADDR`], 512 GiB, shared by every core): each page is a
//! separate zeroed 4 KiB frame of the page allocator, mapped at once (no
//! fault path, so the allocator never waits on the page-fault handler),
//! so an allocation needs no physically contiguous block and can be larger
//! than any free block. Freeing unmaps the pages and returns every frame.
//!
//! Like the demand-paged regions (`regions.rs`), addresses are handed out
//! once and never reused, with an unmapped page after each allocation: a
//! freed allocation's address can only meet another core's stale TLB entry
//! through a use after free, so freeing needs no TLB shootdown. The price:
//! the window's 512 GiB bound all large allocations over the node's life
//! (README, "Next": reuse with a lazy shootdown).

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use spin::Mutex;

use crate::arch::x86_64::paging;

/// Reservations from this many bytes up go to the window; smaller ones
/// stay physically contiguous buddy blocks (`memory.rs`), which cost one
/// page-allocator call instead of one per page.
pub const THRESHOLD: usize = 2 << 20;

/// The window (PML4 entry 508, 512 GiB), fixed with the rest of the
/// virtual address map in `arch/x86_64/paging.rs`.
pub use crate::arch::x86_64::paging::{LARGE_BYTES, LARGE_VADDR};

const PAGE: u64 = 4096;

/// The next unused address of the window.
static NEXT: Mutex<u64> = Mutex::new(LARGE_VADDR);
/// Bytes mapped in the window now.
static MAPPED: AtomicU64 = AtomicU64::new(0);

/// Whether `addr` lies in the window.
pub fn contains(addr: u64) -> bool {
    (LARGE_VADDR..LARGE_VADDR + LARGE_BYTES).contains(&addr)
}

/// Maps `len` bytes (a page multiple) aligned to `align` (a power of two,
/// at least a page) of fresh zeroed pages; `None` when the window or the
/// page allocator is exhausted (nothing stays mapped then).
pub fn reserve(len: usize, align: usize) -> Option<NonNull<u8>> {
    let len = (len as u64).next_multiple_of(PAGE);
    let base = {
        let mut next = NEXT.lock();
        let base = next.checked_next_multiple_of(align as u64)?;
        // One unmapped page after the allocation: an overrun faults.
        let end = base.checked_add(len)?.checked_add(PAGE)?;
        if end > LARGE_VADDR + LARGE_BYTES {
            return None;
        }
        *next = end;
        base
    };
    for page in (base..base + len).step_by(PAGE as usize) {
        if paging::map_zeroed_page(page).is_none() {
            // SAFETY: `[base, page)` was just mapped for this reservation
            // and nobody got its address.
            unsafe { unmap(base, page - base) };
            return None;
        }
    }
    MAPPED.fetch_add(len, Ordering::Relaxed);
    NonNull::new(base as *mut u8)
}

/// Unmaps a reservation and returns its frames to the page allocator.
///
/// # Safety
/// `ptr`/`len` are exactly a live reservation of [`reserve`], no longer
/// used by any core.
pub unsafe fn release(ptr: NonNull<u8>, len: usize) {
    let len = (len as u64).next_multiple_of(PAGE);
    // SAFETY: the caller's contract.
    unsafe { unmap(ptr.as_ptr() as u64, len) };
    MAPPED.fetch_sub(len, Ordering::Relaxed);
}

/// # Safety
/// `[start, start + len)` are pages of the window that nobody uses.
unsafe fn unmap(start: u64, len: u64) {
    for page in (start..start + len).step_by(PAGE as usize) {
        if let Some(frame) = paging::unmap_page(page) {
            // SAFETY: the frame came from `map_zeroed_page` for this
            // reservation only, which nobody uses any more.
            unsafe { crate::mm::memory::free_frame(frame) };
        }
    }
}

/// Bytes of large allocations mapped now.
pub fn mapped_bytes() -> u64 {
    MAPPED.load(Ordering::Relaxed)
}
