//! Demand-paged virtual regions: `ebb-mem`'s [`VMemAllocator`] over the
//! regions' area (PML4 entry 509, 512 GiB, shared by every core), with the
//! page-fault handler resolving faults through the region's policy
//! (`VMemAllocator::handle_fault`): a demand-zero region gets a zeroed page
//! on first touch, from any core; a guard page or an address in no region
//! is reported as a crash.
//!
//! Addresses are handed out once, never reused, so releasing a region needs
//! no TLB shootdown: only a use after release (a bug) could meet another
//! core's stale translation.
//!
//! [`DemandZeroRegion`] is the safe handle applications use.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use ebb_mem::vmem::{AddressSpace, FaultError, FaultOutcome, FaultPolicy, Protection};
use ebb_mem::{VMemAllocator, PAGE_SIZE};
use spin::Mutex;

use crate::arch::x86_64::paging::{self, REGIONS_BYTES, REGIONS_VADDR};

/// The regions' area: a bump pointer over PML4 entry 509.
struct RegionArea {
    next: Mutex<u64>,
}

// SAFETY: `reserve` hands out disjoint, never reused ranges of an area that
// nothing else maps; their pages read and write as zero until touched (the
// fault handler maps zeroed pages), except the page `VMemAllocator` writes
// its header into, which is mapped at once (see `reserve`).
unsafe impl AddressSpace for RegionArea {
    fn reserve(&self, len: usize, align: usize) -> Option<NonNull<u8>> {
        let mut next = self.next.lock();
        let base = next.checked_next_multiple_of(align as u64)?;
        let end = base.checked_add(len as u64)?;
        if end > REGIONS_VADDR + REGIONS_BYTES {
            return None;
        }
        // `VMemAllocator::reserve` writes the region's header in the page
        // before the usable range (`base + align - PAGE`) while it holds
        // its lock, which the fault handler would take: map it now.
        paging::map_zeroed_page(base + align as u64 - PAGE_SIZE as u64)?;
        *next = end;
        NonNull::new(base as *mut u8)
    }

    unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
        let start = ptr.as_ptr() as u64;
        for page in (start..start + len as u64).step_by(PAGE_SIZE) {
            if let Some(frame) = paging::unmap_page(page) {
                // SAFETY: the frame was mapped by `map_zeroed_page` for
                // this released region only.
                unsafe { crate::mm::memory::free_frame(frame) };
            }
        }
    }

    unsafe fn protect(&self, _ptr: NonNull<u8>, _len: usize, prot: Protection) -> bool {
        // Pages are unmapped until touched, and the fault handler asks the
        // region's policy, so a guard (`None`) needs nothing; making a page
        // accessible again is the policy's business too.
        matches!(prot, Protection::None | Protection::ReadWrite)
    }
}

static AREA: RegionArea = RegionArea {
    next: Mutex::new(REGIONS_VADDR),
};
static REGIONS: VMemAllocator = VMemAllocator::new(&AREA);
/// Pages mapped by the fault handler so far.
static FILLED: AtomicU64 = AtomicU64::new(0);

/// What the page-fault handler found.
pub enum PageFault {
    /// Resolved: retry the access.
    Resolved,
    /// A fault in the regions' area that cannot be resolved.
    Fatal(FaultError),
    /// Not in the regions' area: someone else's fault.
    NotARegion,
}

/// Called by the page-fault handler (interrupts off) with CR2.
pub fn page_fault(addr: u64, write: bool) -> PageFault {
    if !(REGIONS_VADDR..REGIONS_VADDR + REGIONS_BYTES).contains(&addr) {
        return PageFault::NotARegion;
    }
    let access = if write {
        ebb_mem::vmem::Access::Write
    } else {
        ebb_mem::vmem::Access::Read
    };
    match REGIONS.handle_fault(addr as usize, access) {
        FaultOutcome::MapZeroed => match paging::map_zeroed_page(addr & !(PAGE_SIZE as u64 - 1)) {
            Some(mapped_now) => {
                FILLED.fetch_add(u64::from(mapped_now), Ordering::Relaxed);
                PageFault::Resolved
            }
            None => PageFault::Fatal(FaultError::Denied),
        },
        FaultOutcome::Handled => PageFault::Resolved,
        FaultOutcome::Fatal(error) => PageFault::Fatal(error),
    }
}

/// Pages the page-fault handler has filled in demand-zero regions so far
/// (all cores).
pub fn pages_filled() -> u64 {
    FILLED.load(Ordering::Relaxed)
}

/// A demand-zero virtual region: `len` bytes of address space that read as
/// zero, backed by a page only once touched (by any core), with an
/// unmapped guard page after it. Released when dropped.
pub struct DemandZeroRegion {
    start: NonNull<u8>,
    len: usize,
}

// SAFETY: the region's memory is ordinary memory mapped the same on every
// core; access goes through `&self`/`&mut self` like a `Box<[u8]>`.
unsafe impl Send for DemandZeroRegion {}
// SAFETY: the only `&self` access is reading `start` and `len` and the
// memory through shared slices; the pages are mapped on every core, so
// concurrent readers on different cores see the same bytes.
unsafe impl Sync for DemandZeroRegion {}

impl DemandZeroRegion {
    /// Reserves a region of `len` bytes (rounded up to pages); `None` when
    /// the regions' area is exhausted.
    pub fn new(len: usize) -> Option<Self> {
        let start = REGIONS.reserve(len, PAGE_SIZE, FaultPolicy::DemandZero, true)?;
        Some(DemandZeroRegion { start, len })
    }

    /// The region's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` bytes from `start` are this region's: readable
        // (demand-zero) for as long as it lives.
        unsafe { core::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }

    /// The region's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes from `start` are this region's, writable
        // (demand-zero) while it lives; `&mut self` makes the access exclusive.
        unsafe { core::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
    }

    /// Turns the region into one that cores share and write at once
    /// (through atomics only).
    pub fn into_atomic(self) -> AtomicRegion {
        AtomicRegion(self)
    }

    /// The first byte's address.
    pub fn as_ptr(&self) -> *const u8 {
        self.start.as_ptr()
    }
}

/// A demand-zero region shared by cores (`Arc<AtomicRegion>`), every access
/// atomic, so concurrent writers need no lock.
pub struct AtomicRegion(DemandZeroRegion);

impl AtomicRegion {
    /// The region's bytes, as atomics.
    pub fn bytes(&self) -> &[AtomicU8] {
        let region = &self.0;
        // SAFETY: `len` bytes from `start` are the region's, mapped (on
        // demand) while it lives; `AtomicU8` has the layout of `u8`, and an
        // `AtomicRegion` gives no non-atomic access at all.
        unsafe { core::slice::from_raw_parts(region.start.as_ptr().cast::<AtomicU8>(), region.len) }
    }
}

impl Drop for DemandZeroRegion {
    fn drop(&mut self) {
        // SAFETY: `start` is a live region of REGIONS, unused from now on.
        unsafe { REGIONS.release(self.start) };
    }
}
