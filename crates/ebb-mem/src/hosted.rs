//! The hosted (Linux) platform: a core is a thread, arenas and regions are
//! `mmap`s. The only module of the crate that touches the operating system.
//!
//! Any Rust program can make the general-purpose allocator its global
//! allocator:
//!
//! ```ignore
//! #[global_allocator]
//! static GLOBAL: ebb_mem::hosted::HostedAllocator = ebb_mem::hosted::HostedAllocator::new();
//! ```
//!
//! Every thread (event-loop core or not) gets its own cache lazily on its
//! first allocation: a new one, or one abandoned by an exited thread, with
//! the slabs that still hold that thread's live objects. When a thread exits,
//! a thread-local destructor flushes its cache (empty slabs go back to the
//! node) and abandons it. Frees and allocations made after that, by later
//! destructors of the same thread, still work: frees go to the owners'
//! remote queues, allocations to a shared cache under a lock.

extern crate std;

use core::cell::Cell;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::gpa::{CoreLocal, GeneralPurposeAllocator, MemoryRoot};
use crate::page::PageSource;
use crate::slab::{is_empty_cache, CoreCache, EMPTY_CACHE};
use crate::vmem::{AddressSpace, Protection};
use crate::PAGE_SIZE;

/// `mmap`-backed arenas for the page allocators.
pub struct MmapPages;

/// `mmap`-backed address space for virtual regions.
pub struct MmapSpace;

/// Maps `len` bytes of anonymous memory aligned to `align`, reserving swap
/// lazily (`MAP_NORESERVE`): the kernel backs pages on first touch.
#[cfg(not(miri))]
fn mmap_aligned(len: usize, align: usize) -> Option<NonNull<u8>> {
    let align = align.max(PAGE_SIZE);
    let over = len.checked_add(align - PAGE_SIZE)?;
    // SAFETY: an anonymous private mapping at an address the kernel picks
    // cannot alias any existing Rust object.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let p = p.cast::<u8>();
    let head = (align - (p as usize) % align) % align;
    let tail = over - head - len;
    if head > 0 {
        // SAFETY: unmaps the unaligned head of the mapping we just made.
        unsafe { libc::munmap(p.cast(), head) };
    }
    if tail > 0 {
        // SAFETY: unmaps the tail beyond `len` of the same mapping.
        unsafe { libc::munmap(p.wrapping_add(head + len).cast(), tail) };
    }
    NonNull::new(p.wrapping_add(head))
}

/// Under Miri, which supports neither `MAP_NORESERVE` nor unmapping part of
/// a mapping: zeroed memory from the system allocator (not the global one,
/// which may be ours and would recurse), which Miri tracks like any
/// allocation, so every access the allocators make to it is checked.
#[cfg(miri)]
fn mmap_aligned(len: usize, align: usize) -> Option<NonNull<u8>> {
    use std::alloc::{GlobalAlloc, Layout, System};
    let layout = Layout::from_size_align(len, align.max(PAGE_SIZE)).ok()?;
    if layout.size() == 0 {
        return None;
    }
    // SAFETY: the layout's size is not zero (checked above).
    NonNull::new(unsafe { System.alloc_zeroed(layout) })
}

/// The environment variable that makes every region (every allocation
/// above the largest size class, 32 KiB) larger than its value in bytes
/// fail, as if the machine were out of memory. Fault injection for tests of
/// what a program does when an allocation fails (memcached answers
/// `SERVER_ERROR out of memory`): the failure comes from the real global
/// allocator, on the program's real paths. Unset, nothing fails.
pub const REGION_LIMIT_VAR: &core::ffi::CStr = c"EBB_MEM_REGION_LIMIT";

/// [`REGION_LIMIT_VAR`] as read on the first region (0: not read yet).
static REGION_LIMIT: AtomicUsize = AtomicUsize::new(0);

/// The largest region `MmapSpace` maps: [`REGION_LIMIT_VAR`]'s value, or
/// no limit. Read once, without allocating (`getenv`), since the allocator
/// calls it; a region is an `mmap` already, so one more load costs nothing.
fn region_limit() -> usize {
    let limit = REGION_LIMIT.load(Ordering::Relaxed);
    if limit != 0 {
        return limit;
    }
    let limit = read_region_limit().unwrap_or(usize::MAX).max(1);
    REGION_LIMIT.store(limit, Ordering::Relaxed);
    limit
}

#[cfg(not(miri))]
fn read_region_limit() -> Option<usize> {
    // SAFETY: `getenv` reads the environment with a NUL-terminated name;
    // the pointer it returns (if any) is a NUL-terminated string that stays
    // valid until the environment changes, and it is read at once.
    let value = unsafe { libc::getenv(REGION_LIMIT_VAR.as_ptr()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: `value` is non-null and NUL-terminated (`getenv`'s contract).
    let text = unsafe { core::ffi::CStr::from_ptr(value) };
    text.to_str().ok()?.trim().parse().ok()
}

/// Miri has no `getenv` shim worth trusting here: no limit.
#[cfg(miri)]
fn read_region_limit() -> Option<usize> {
    None
}

// SAFETY: each call returns a fresh anonymous mapping, readable and
// writable, aligned as asked, used by nothing else.
unsafe impl PageSource for MmapPages {
    fn map(&self, bytes: usize, align: usize, _node: usize) -> Option<NonNull<u8>> {
        mmap_aligned(bytes, align)
    }
}

// SAFETY: `reserve` returns a fresh anonymous mapping, readable and
// writable, aligned as asked, used by nothing else; `release` and
// `protect` act on ranges of such mappings only (caller's contract).
unsafe impl AddressSpace for MmapSpace {
    fn reserve(&self, len: usize, align: usize) -> Option<NonNull<u8>> {
        if len > region_limit() {
            return None;
        }
        mmap_aligned(len, align)
    }

    #[cfg(not(miri))]
    unsafe fn release(&self, ptr: NonNull<u8>, len: usize) {
        // SAFETY: the caller passes exactly a live reservation.
        unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
    }

    /// Under Miri the reservation came from the system allocator, whose
    /// `dealloc` needs the alignment `release` is not told: it is leaked.
    #[cfg(miri)]
    unsafe fn release(&self, _ptr: NonNull<u8>, _len: usize) {}

    /// Under Miri, which has no `mprotect`: nothing changes (a guard page
    /// stays accessible, so Miri cannot check that it faults).
    #[cfg(miri)]
    unsafe fn protect(&self, _ptr: NonNull<u8>, _len: usize, _prot: Protection) -> bool {
        true
    }

    #[cfg(not(miri))]
    unsafe fn protect(&self, ptr: NonNull<u8>, len: usize, prot: Protection) -> bool {
        let prot = match prot {
            Protection::None => libc::PROT_NONE,
            Protection::ReadWrite => libc::PROT_READ | libc::PROT_WRITE,
        };
        // SAFETY: the caller passes a range inside one of its reservations.
        unsafe { libc::mprotect(ptr.as_ptr().cast(), len, prot) == 0 }
    }
}

static PAGES: MmapPages = MmapPages;
static SPACE: MmapSpace = MmapSpace;
static ROOT: MemoryRoot = MemoryRoot::new(&PAGES, &SPACE);

const UNATTACHED: u8 = 0;
const ATTACHING: u8 = 1;
const ATTACHED: u8 = 2;
const EXITED: u8 = 3;

/// Retires the thread's cache when the thread exits.
struct ExitGuard;

impl Drop for ExitGuard {
    fn drop(&mut self) {
        let cache = CACHE.with(Cell::get);
        CACHE.with(|c| c.set(EMPTY_CACHE.as_ptr()));
        STATE.with(|s| s.set(EXITED));
        if !is_empty_cache(cache) {
            // SAFETY: the cache was this thread's; it is uninstalled above, so
            // nothing on this thread uses it any more.
            unsafe { ROOT.slabs.retire_cache(cache) };
        }
    }
}

std::thread_local! {
    static CACHE: Cell<*mut CoreCache> = const { Cell::new(EMPTY_CACHE.as_ptr()) };
    static STATE: Cell<u8> = const { Cell::new(UNATTACHED) };
    static EXIT: ExitGuard = const { ExitGuard };
}

/// The NUMA node of the CPU this thread runs on (0 if unknown).
#[cfg(not(miri))]
fn current_node() -> usize {
    let mut cpu = 0u32;
    let mut node = 0u32;
    // SAFETY: getcpu writes two u32s through the pointers we pass; the third
    // argument is unused since Linux 2.6.24.
    let r = unsafe {
        libc::syscall(
            libc::SYS_getcpu,
            &raw mut cpu,
            &raw mut node,
            ptr::null_mut::<libc::c_void>(),
        )
    };
    if r == 0 {
        node as usize
    } else {
        0
    }
}

/// Miri has no `getcpu`: under it every thread is on node 0 (the node
/// only picks which depot a cache draws from).
#[cfg(miri)]
fn current_node() -> usize {
    0
}

/// The hosted platform: per-thread core caches.
pub struct Hosted;

// SAFETY: `CACHE` is thread-local, so an installed cache is used only by its
// thread; caches come from `ROOT.slabs`; the sentinel is installed otherwise.
unsafe impl CoreLocal for Hosted {
    #[inline(always)]
    fn root() -> &'static MemoryRoot {
        &ROOT
    }

    #[inline(always)]
    fn current_core_cache() -> *mut CoreCache {
        CACHE.with(Cell::get)
    }

    fn attach_core_cache() -> *mut CoreCache {
        if STATE.with(Cell::get) != UNATTACHED {
            return ptr::null_mut();
        }
        STATE.with(|s| s.set(ATTACHING));
        let Some(cache) = ROOT.slabs.new_cache(current_node()) else {
            STATE.with(|s| s.set(UNATTACHED));
            return ptr::null_mut();
        };
        let cache = cache.as_ptr();
        CACHE.with(|c| c.set(cache));
        // Registering the destructor may allocate: the cache is already
        // installed, so such allocations take the ordinary path.
        if EXIT.try_with(|_| ()).is_err() {
            // The thread is already running its destructors.
            CACHE.with(|c| c.set(EMPTY_CACHE.as_ptr()));
            STATE.with(|s| s.set(EXITED));
            // SAFETY: the cache is ours and no longer installed.
            unsafe { ROOT.slabs.retire_cache(cache) };
            return ptr::null_mut();
        }
        STATE.with(|s| s.set(ATTACHED));
        cache
    }
}

/// The general-purpose allocator of the hosted platform, usable as
/// `#[global_allocator]`.
pub type HostedAllocator = GeneralPurposeAllocator<Hosted>;

/// The hosted platform's memory root (statistics, trimming).
pub fn root() -> &'static MemoryRoot {
    &ROOT
}
