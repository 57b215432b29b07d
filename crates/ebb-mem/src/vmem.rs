//! `VMemAllocator`: virtual regions, each with its owner's page-fault policy.
//!
//! A region is a reserved range of virtual addresses. Its owner says what a
//! page fault inside it means: demand-zero (map a zeroed page from the page
//! allocator), guard (the access is a bug: stack overflow, buffer overrun),
//! or a custom handler (application-specific paging, as in EbbRT's
//! `VMemAllocator` and the fault handlers of Appel & Li, *Virtual Memory
//! Primitives for User Programs*, ASPLOS 1991).
//!
//! Every region starts with one header page holding its descriptor, right
//! before the address handed to the owner, so `release` finds it in O(1)
//! and the general-purpose allocator can serve large requests from regions
//! without a side table. Regions are linked in a list for fault lookup.
//!
//! Hosted: [`AddressSpace`] is `mmap` (anonymous memory that Linux already
//! backs with zero pages on demand, which *is* the demand-zero policy) and
//! guard pages are `PROT_NONE`; faults never reach [`VMemAllocator::handle_fault`].
//! Native: the runtime's page-fault handler calls `handle_fault` and acts on
//! the [`FaultOutcome`].

use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::sync::SpinLock;
use crate::PAGE_SIZE;

/// Page protection of a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protection {
    /// No access: any access faults.
    None,
    /// Readable and writable.
    ReadWrite,
}

/// The kind of access that faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An instruction fetch.
    Execute,
}

/// Why a fault cannot be resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultError {
    /// The access hit a guard page.
    GuardPage,
    /// The address is in no region.
    Unmapped,
    /// The region's handler refused the access.
    Denied,
}

/// What the platform's fault handler must do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOutcome {
    /// Map a zeroed page at the faulting page and retry the access.
    MapZeroed,
    /// The region's handler resolved the fault; retry the access.
    Handled,
    /// The fault is a bug in the program.
    Fatal(FaultError),
}

/// Where a region is, as seen by a fault handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    /// First byte of the region's usable range.
    pub start: usize,
    /// Length of the usable range (a multiple of the page size).
    pub len: usize,
}

/// An owner-supplied page-fault handler.
pub trait FaultHandler: Sync {
    /// Resolves a fault at `addr` inside `region`.
    fn handle(&self, region: RegionInfo, addr: usize, access: Access) -> FaultOutcome;
}

/// The fault policy of a region.
#[derive(Clone, Copy)]
pub enum FaultPolicy {
    /// Pages are zero until written: map a zeroed page on first touch.
    DemandZero,
    /// The whole region is a guard: every access is fatal.
    Guard,
    /// The owner decides.
    Custom(&'static dyn FaultHandler),
}

/// The platform's virtual address space.
///
/// # Safety
/// `reserve` must return ranges that nothing else uses, aligned as asked;
/// a reserved range must be readable and writable unless `protect`ed.
pub unsafe trait AddressSpace: Sync {
    /// Reserves `len` bytes aligned to `align` (page multiples, powers of two
    /// for `align`).
    fn reserve(&self, len: usize, align: usize) -> Option<NonNull<u8>>;
    /// Releases a range returned by `reserve`.
    ///
    /// # Safety
    /// `ptr`/`len` must be exactly a live reservation, no longer used.
    unsafe fn release(&self, ptr: NonNull<u8>, len: usize);
    /// Changes the protection of a page range inside a reservation.
    ///
    /// # Safety
    /// The range must lie inside a live reservation of the caller.
    unsafe fn protect(&self, ptr: NonNull<u8>, len: usize, prot: Protection) -> bool;
}

#[repr(C)]
struct RegionHeader {
    base: *mut u8,
    total: usize,
    user: usize,
    len: usize,
    policy: FaultPolicy,
    prev: *mut RegionHeader,
    next: *mut RegionHeader,
}

struct RegionList(*mut RegionHeader);
// SAFETY: the headers are owned by the allocator; the list's lock
// serializes access to them.
unsafe impl Send for RegionList {}

/// Reserves virtual regions and resolves faults inside them.
pub struct VMemAllocator {
    space: &'static dyn AddressSpace,
    regions: SpinLock<RegionList>,
    reserved: AtomicUsize,
    count: AtomicUsize,
}

impl VMemAllocator {
    /// A region allocator over `space`.
    pub const fn new(space: &'static dyn AddressSpace) -> Self {
        Self {
            space,
            regions: SpinLock::new(RegionList(ptr::null_mut())),
            reserved: AtomicUsize::new(0),
            count: AtomicUsize::new(0),
        }
    }

    /// Reserves a region of at least `len` bytes whose start is aligned to
    /// `align`, with a fault policy, and optionally a guard page after it.
    /// Returns the start of the usable range.
    pub fn reserve(
        &self,
        len: usize,
        align: usize,
        policy: FaultPolicy,
        guard_after: bool,
    ) -> Option<NonNull<u8>> {
        if !align.is_power_of_two() {
            return None;
        }
        let lead = align.max(PAGE_SIZE);
        let len = len.max(1).checked_next_multiple_of(PAGE_SIZE)?;
        let guard = if guard_after { PAGE_SIZE } else { 0 };
        let total = lead.checked_add(len)?.checked_add(guard)?;
        if total > isize::MAX as usize {
            return None;
        }
        let base = self.space.reserve(total, lead)?;
        let user = base.as_ptr().wrapping_add(lead);
        if guard_after {
            // SAFETY: the guard page is the last page of our reservation.
            let ok = unsafe {
                self.space.protect(
                    NonNull::new(user.wrapping_add(len))?,
                    guard,
                    Protection::None,
                )
            };
            debug_assert!(ok);
        }
        if matches!(policy, FaultPolicy::Guard) {
            // SAFETY: the usable range lies inside our reservation.
            unsafe {
                self.space
                    .protect(NonNull::new(user)?, len, Protection::None)
            };
        }
        let header = user.wrapping_sub(PAGE_SIZE).cast::<RegionHeader>();
        let mut list = self.regions.lock();
        let desc = RegionHeader {
            base: base.as_ptr(),
            total,
            user: user as usize,
            len,
            policy,
            prev: ptr::null_mut(),
            next: list.0,
        };
        // SAFETY: the header page is inside the fresh reservation, readable
        // and writable, and nobody else knows the range yet.
        unsafe { header.write(desc) };
        if !list.0.is_null() {
            // SAFETY: list members are live headers; we hold the lock.
            unsafe { (*list.0).prev = header };
        }
        list.0 = header;
        drop(list);
        self.reserved.fetch_add(total, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        NonNull::new(user)
    }

    /// The usable length of the region starting at `user`.
    ///
    /// # Safety
    /// `user` must be the start of a live region from this allocator.
    pub unsafe fn region_len(&self, user: NonNull<u8>) -> usize {
        let header = user.as_ptr().wrapping_sub(PAGE_SIZE).cast::<RegionHeader>();
        // SAFETY: a live region's header is the page before `user`.
        unsafe { (*header).len }
    }

    /// Releases the region starting at `user`.
    ///
    /// # Safety
    /// `user` must be the start of a live region from this allocator, and no
    /// longer used.
    pub unsafe fn release(&self, user: NonNull<u8>) {
        let header = user.as_ptr().wrapping_sub(PAGE_SIZE).cast::<RegionHeader>();
        let mut list = self.regions.lock();
        // SAFETY: the header is a live list member; we hold the lock.
        let h = unsafe { &*header };
        let (prev, next, base, total) = (h.prev, h.next, h.base, h.total);
        if prev.is_null() {
            list.0 = next;
        } else {
            // SAFETY: neighbours are live list members; we hold the lock.
            unsafe { (*prev).next = next };
        }
        if !next.is_null() {
            // SAFETY: `next` is a live list member; we hold the lock.
            unsafe { (*next).prev = prev };
        }
        drop(list);
        self.reserved.fetch_sub(total, Ordering::Relaxed);
        self.count.fetch_sub(1, Ordering::Relaxed);
        if let Some(base) = NonNull::new(base) {
            // SAFETY: `base`/`total` are exactly the reservation made in
            // `reserve`, now unlinked and unused.
            unsafe { self.space.release(base, total) };
        }
    }

    /// Decides what a page fault at `addr` means.
    pub fn handle_fault(&self, addr: usize, access: Access) -> FaultOutcome {
        let list = self.regions.lock();
        let mut h = list.0;
        while !h.is_null() {
            // SAFETY: list members are live headers; the lock is held.
            let r = unsafe { &*h };
            let base = r.base as usize;
            if addr >= base && addr < base + r.total {
                if addr < r.user || addr >= r.user + r.len {
                    return FaultOutcome::Fatal(FaultError::GuardPage);
                }
                let info = RegionInfo {
                    start: r.user,
                    len: r.len,
                };
                return match r.policy {
                    FaultPolicy::DemandZero => FaultOutcome::MapZeroed,
                    FaultPolicy::Guard => FaultOutcome::Fatal(FaultError::GuardPage),
                    FaultPolicy::Custom(handler) => {
                        drop(list);
                        handler.handle(info, addr, access)
                    }
                };
            }
            h = r.next;
        }
        FaultOutcome::Fatal(FaultError::Unmapped)
    }

    /// Bytes of address space reserved (regions, headers, guards).
    pub fn reserved_bytes(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }

    /// Live regions.
    pub fn region_count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::alloc::{alloc, dealloc, Layout};
    use std::sync::Mutex;
    use std::vec::Vec;

    /// An address space on the test process's heap that records protections.
    struct FakeSpace {
        live: Mutex<Vec<(usize, Layout)>>,
        protected: Mutex<Vec<(usize, usize)>>,
    }
    // SAFETY: ranges come from the global allocator with the requested
    // alignment and are exclusively the caller's until released.
    unsafe impl AddressSpace for FakeSpace {
        fn reserve(&self, len: usize, align: usize) -> Option<NonNull<u8>> {
            let layout = Layout::from_size_align(len, align).ok()?;
            // SAFETY: non-zero size.
            let p = NonNull::new(unsafe { alloc(layout) })?;
            self.live
                .lock()
                .unwrap()
                .push((p.as_ptr() as usize, layout));
            Some(p)
        }
        unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
            let mut live = self.live.lock().unwrap();
            let i = live
                .iter()
                .position(|&(p, _)| p == ptr.as_ptr() as usize)
                .unwrap();
            let (_, layout) = live.swap_remove(i);
            assert_eq!(layout.size(), len);
            // SAFETY: allocated in `reserve` with this layout.
            unsafe { dealloc(ptr.as_ptr(), layout) };
        }
        unsafe fn protect(&self, ptr: NonNull<u8>, len: usize, prot: Protection) -> bool {
            if prot == Protection::None {
                self.protected
                    .lock()
                    .unwrap()
                    .push((ptr.as_ptr() as usize, len));
            }
            true
        }
    }

    struct CountPages;
    impl FaultHandler for CountPages {
        fn handle(&self, region: RegionInfo, addr: usize, access: Access) -> FaultOutcome {
            if access == Access::Write && (addr - region.start) / PAGE_SIZE < 2 {
                FaultOutcome::Handled
            } else {
                FaultOutcome::Fatal(FaultError::Denied)
            }
        }
    }

    #[test]
    fn regions_carry_their_fault_policy() {
        static SPACE: FakeSpace = FakeSpace {
            live: Mutex::new(Vec::new()),
            protected: Mutex::new(Vec::new()),
        };
        static HANDLER: CountPages = CountPages;
        let vm = VMemAllocator::new(&SPACE);
        let a = vm
            .reserve(3 * PAGE_SIZE, PAGE_SIZE, FaultPolicy::DemandZero, true)
            .unwrap();
        let g = vm
            .reserve(PAGE_SIZE, PAGE_SIZE, FaultPolicy::Guard, false)
            .unwrap();
        let c = vm
            .reserve(
                3 * PAGE_SIZE - 10,
                PAGE_SIZE * 16,
                FaultPolicy::Custom(&HANDLER),
                false,
            )
            .unwrap();
        assert_eq!(
            c.as_ptr() as usize % (PAGE_SIZE * 16),
            0,
            "over-aligned region"
        );
        assert_eq!(vm.region_count(), 3);
        let a0 = a.as_ptr() as usize;
        assert_eq!(
            vm.handle_fault(a0 + 5, Access::Write),
            FaultOutcome::MapZeroed
        );
        assert_eq!(
            vm.handle_fault(a0 + 3 * PAGE_SIZE, Access::Read),
            FaultOutcome::Fatal(FaultError::GuardPage),
            "guard page after the region"
        );
        assert!(SPACE
            .protected
            .lock()
            .unwrap()
            .contains(&(a0 + 3 * PAGE_SIZE, PAGE_SIZE)));
        assert_eq!(
            vm.handle_fault(g.as_ptr() as usize, Access::Read),
            FaultOutcome::Fatal(FaultError::GuardPage)
        );
        let c0 = c.as_ptr() as usize;
        assert_eq!(
            vm.handle_fault(c0 + PAGE_SIZE, Access::Write),
            FaultOutcome::Handled
        );
        assert_eq!(
            vm.handle_fault(c0, Access::Read),
            FaultOutcome::Fatal(FaultError::Denied)
        );
        // SAFETY: all three are live regions of `vm`.
        let len = unsafe { vm.region_len(a) };
        assert_eq!(len, 3 * PAGE_SIZE);
        // SAFETY: live region, released once.
        unsafe { vm.release(g) };
        // SAFETY: live region, released once.
        unsafe { vm.release(a) };
        assert_eq!(
            vm.handle_fault(a0, Access::Read),
            FaultOutcome::Fatal(FaultError::Unmapped)
        );
        // SAFETY: live region.
        unsafe { vm.release(c) };
        assert_eq!(vm.region_count(), 0);
        assert_eq!(vm.reserved_bytes(), 0);
    }
}
