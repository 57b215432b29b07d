//! The page tables: all RAM (and the firmware's reserved ranges) identity
//! mapped with 1 GiB pages where the CPU has them and 2 MiB pages
//! elsewhere, the LAPIC/IOAPIC page and, on q35, the PCI ECAM window
//! uncached, page 0 left unmapped (null pointers fault), and each core's
//! EbbRef table and context page at `ebb-core`'s fixed `TABLE_VADDR`.
//!
//! Each core has its own PML4: the identity part and the stacks' region
//! (entries 0..511) are shared, entry 511 leads to that core's own table
//! pages. Stacks live in their own region with an unmapped guard page
//! below each ([`map_stack`]).

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ebb_boot_abi::e820;
use spin::{Mutex, Once};
use x86_64::registers::control::{Cr3, Cr3Flags};
use x86_64::structures::paging::PhysFrame;
use x86_64::PhysAddr;

use crate::arch::x86_64::boot::image_range;
use crate::arch::x86_64::layout::{pages, Full, Kind, Range, RangeSet};
use crate::arch::x86_64::start_info::StartInfo;

const PAGE: u64 = 4096;
const MIB2: u64 = 2 << 20;
const GIB: u64 = 1 << 30;

const PRESENT: u64 = 1;
const WRITABLE: u64 = 1 << 1;
const WRITE_THROUGH: u64 = 1 << 3;
const CACHE_DISABLE: u64 = 1 << 4;
const LARGE: u64 = 1 << 7;
const NO_EXECUTE: u64 = 1 << 63;
const ADDRESS: u64 = 0x000f_ffff_ffff_f000;

/// Where `ebb-core` expects this core's EbbRef table, then its context
/// page (`ebb_boot_abi::memory_layout`).
pub const TABLE_VADDR: u64 = ebb_boot_abi::TABLE_VADDR as u64;
/// Pages of the table (512 KiB) plus one context page.
const TABLE_PAGES: u64 = ebb_boot_abi::TABLE_PAGES as u64;
/// The last word of each core's context page: its allocator cache pointer
/// (`mm/memory.rs`).
pub const CORE_CACHE_SLOT: u64 = ebb_boot_abi::CORE_CACHE_SLOT as u64;

/// The region of stacks with guard pages (PML4 entry 510, shared by all
/// cores): see [`map_stack`].
pub const STACKS_VADDR: u64 = 0xFFFF_FF00_0000_0000;

/// The region of demand-paged virtual regions (PML4 entry 509, shared by
/// all cores): see `regions.rs`.
pub const REGIONS_VADDR: u64 = 0xFFFF_FE80_0000_0000;
/// Bytes of that region (one PML4 entry: 512 GiB).
pub const REGIONS_BYTES: u64 = 1 << 39;

/// The window of the allocator's large allocations (PML4 entry 508,
/// shared by all cores): see `mm/large.rs`.
pub const LARGE_VADDR: u64 = 0xFFFF_FE00_0000_0000;
/// Bytes of that window (one PML4 entry: 512 GiB).
pub const LARGE_BYTES: u64 = 1 << 39;

/// Core 0's PML4 (physical address), whose shared entries other cores copy.
static CORE0_PML4: AtomicU64 = AtomicU64::new(0);

/// The IOAPIC and LAPIC register pages (fixed on QEMU's machines).
pub const IOAPIC_BASE: u64 = 0xfec0_0000;
/// See [`IOAPIC_BASE`].
pub const LAPIC_BASE: u64 = 0xfee0_0000;

/// What memory the platform found and how it was mapped.
pub struct MemoryPlan {
    /// The identity-mapped ranges (2 MiB granules).
    pub mapped: RangeSet,
    /// Usable RAM not holding the image, page-aligned.
    pub usable: RangeSet,
    /// The free part of the RAM range the page tables were taken from:
    /// `[start, end)`, for the heap.
    pub rest: (u64, u64),
    /// Whether 1 GiB pages were used.
    pub huge_pages: bool,
}

/// Why the page tables could not be built.
#[derive(Debug)]
pub enum PagingError {
    /// The memory map has more ranges than the planner holds.
    TooManyRanges,
    /// No usable RAM after the image.
    NoMemory,
}

impl From<Full> for PagingError {
    fn from(_: Full) -> Self {
        PagingError::TooManyRanges
    }
}

impl fmt::Display for PagingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PagingError::TooManyRanges => write!(f, "the memory map has too many ranges"),
            PagingError::NoMemory => write!(f, "no usable RAM after the image"),
        }
    }
}

static PLAN: Once<MemoryPlan> = Once::new();

/// Where zeroed 4 KiB page-table (and stack) frames come from.
trait FrameSource {
    /// A zeroed 4 KiB frame, identity mapped.
    fn zeroed(&mut self) -> Result<u64, PagingError>;
}

/// Physical frames for page tables, taken from the bottom of one RAM range
/// (before the heap exists).
struct Frames {
    next: u64,
    end: u64,
}

/// Page-table frames from the page allocator once it exists (identity
/// mapped RAM below 4 GiB; not the general-purpose allocator, which the
/// page-fault handler must not enter).
struct PageAllocatorFrames;

impl FrameSource for PageAllocatorFrames {
    fn zeroed(&mut self) -> Result<u64, PagingError> {
        (memory_hooks()?.zeroed_frame)().ok_or(PagingError::NoMemory)
    }
}

/// What paging needs from the memory manager above it (`mm::memory`),
/// registered once by the boot sequence before [`init`]: page tables and
/// stacks come from the page allocator, and a core's context page holds
/// the allocator's per-core cache slot.
pub struct MemoryHooks {
    /// A zeroed 4 KiB frame from the page allocator, identity mapped (not
    /// from the general-purpose allocator, which the page-fault handler
    /// must not enter).
    pub zeroed_frame: fn() -> Option<u64>,
    /// `2^order` contiguous frames, identity mapped, not zeroed, kept for
    /// good (stacks).
    pub frames: fn(usize) -> Option<u64>,
    /// Prepares a core's fresh (zeroed) context page before the core runs.
    pub prepare_context_page: fn(u64),
}

static MEMORY_HOOKS: Once<MemoryHooks> = Once::new();

/// Registers what paging asks the memory manager for (boot, once, before
/// [`init`]).
pub fn set_memory_hooks(hooks: MemoryHooks) {
    MEMORY_HOOKS.call_once(|| hooks);
}

fn memory_hooks() -> Result<&'static MemoryHooks, PagingError> {
    MEMORY_HOOKS.get().ok_or(PagingError::NoMemory)
}

impl FrameSource for Frames {
    fn zeroed(&mut self) -> Result<u64, PagingError> {
        if self.end - self.next < PAGE {
            return Err(PagingError::NoMemory);
        }
        let frame = self.next;
        self.next += PAGE;
        // SAFETY: the frame is usable RAM past the image that nothing else
        // uses yet, identity mapped by the boot tables (it lies below 4 GiB
        // in the range holding the image).
        unsafe { core::ptr::write_bytes(frame as *mut u8, 0, PAGE as usize) };
        Ok(frame)
    }
}

/// The 512 entries of the table at physical (= virtual) address `frame`.
fn entries(frame: u64) -> *mut u64 {
    frame as *mut u64
}

/// The table that entry `index` of `table` points to, made if missing.
fn next_table(table: u64, index: u64, frames: &mut impl FrameSource) -> Result<u64, PagingError> {
    let entry = entries(table).wrapping_add(index as usize);
    // SAFETY: `table` is one of our page-table frames and `index < 512`.
    let value = unsafe { entry.read() };
    if value & PRESENT != 0 {
        return Ok(value & ADDRESS);
    }
    let frame = frames.zeroed()?;
    // SAFETY: `entry` is inside `table`, one of our page-table frames
    // (`index < 512`); the new table is zeroed (all entries absent).
    unsafe { entry.write(frame | PRESENT | WRITABLE) };
    Ok(frame)
}

fn set(table: u64, index: u64, value: u64) {
    // SAFETY: `table` is one of our page-table frames and `index < 512`.
    unsafe { entries(table).wrapping_add(index as usize).write(value) };
}

fn index(addr: u64, level: u32) -> u64 {
    (addr >> (12 + 9 * level)) & 511
}

/// Maps the identity page at `addr` of `size` (1 GiB or 2 MiB).
fn map_large(
    pml4: u64,
    addr: u64,
    size: u64,
    flags: u64,
    frames: &mut impl FrameSource,
) -> Result<(), PagingError> {
    let pdpt = next_table(pml4, index(addr, 3), frames)?;
    if size == GIB {
        set(pdpt, index(addr, 2), addr | flags | LARGE);
        return Ok(());
    }
    let pd = next_table(pdpt, index(addr, 2), frames)?;
    set(pd, index(addr, 1), addr | flags | LARGE);
    Ok(())
}

fn flags_for(kind: Kind) -> u64 {
    match kind {
        Kind::Ram => PRESENT | WRITABLE,
        Kind::Device => PRESENT | WRITABLE | WRITE_THROUGH | CACHE_DISABLE | NO_EXECUTE,
    }
}

/// Whether the CPU supports 1 GiB pages (CPUID 0x8000_0001 EDX bit 26).
fn has_1gib_pages() -> bool {
    let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
    max >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).edx & (1 << 26) != 0
}

/// Builds core 0's page tables from the memory map and switches to them.
pub fn init(info: &StartInfo) -> Result<&'static MemoryPlan, PagingError> {
    let (_, image_end) = image_range();
    let image_end = image_end.next_multiple_of(PAGE);

    let mut mapped = RangeSet::default();
    let mut usable = RangeSet::default();
    for entry in info.memmap() {
        mapped.push_e820(entry.addr, entry.size, entry.kind)?;
        if entry.kind == e820::RAM {
            let start = entry.addr.next_multiple_of(PAGE).max(image_end);
            let end = entry.addr.saturating_add(entry.size) & !(PAGE - 1);
            usable.push(Range {
                start,
                end,
                kind: Kind::Ram,
            })?;
        }
    }
    for base in [IOAPIC_BASE, LAPIC_BASE] {
        mapped.push(Range {
            start: base,
            end: base + PAGE,
            kind: Kind::Device,
        })?;
    }
    mapped.normalize(MIB2);

    // Page tables come from the bottom of the usable range right after the
    // image (below 4 GiB, so the boot tables map it).
    let region = usable
        .as_slice()
        .iter()
        .find(|r| r.start == image_end)
        .or_else(|| usable.as_slice().iter().max_by_key(|r| r.end - r.start))
        .copied()
        .ok_or(PagingError::NoMemory)?;
    let mut frames = Frames {
        next: region.start,
        end: region.end.min(1 << 32),
    };

    let huge_pages = has_1gib_pages();
    let pml4 = frames.zeroed()?;
    for range in mapped.as_slice() {
        let flags = flags_for(range.kind);
        let mut start = range.start;
        if start == 0 {
            // The first 2 MiB in 4 KiB pages, leaving page 0 unmapped.
            let pdpt = next_table(pml4, 0, &mut frames)?;
            let pd = next_table(pdpt, 0, &mut frames)?;
            let pt = next_table(pd, 0, &mut frames)?;
            for page in 1..512 {
                set(pt, page, (page * PAGE) | flags);
            }
            start = MIB2;
        }
        let mut result = Ok(());
        pages(start, range.end, huge_pages, |addr, size| {
            if result.is_ok() {
                result = map_large(pml4, addr, size, flags, &mut frames);
            }
        });
        result?;
    }

    map_core_table(pml4, &mut frames)?;
    // The stacks' region: its PDPT exists before any core's PML4 copies
    // the shared entries, so stacks mapped later are seen by every core.
    next_table(pml4, index(STACKS_VADDR, 3), &mut frames)?;
    next_table(pml4, index(REGIONS_VADDR, 3), &mut frames)?;
    next_table(pml4, index(LARGE_VADDR, 3), &mut frames)?;
    CORE0_PML4.store(pml4, Ordering::Relaxed);

    let plan = PLAN.call_once(|| MemoryPlan {
        mapped,
        usable,
        rest: (frames.next, region.end),
        huge_pages,
    });
    let frame = PhysFrame::containing_address(PhysAddr::new(pml4));
    // SAFETY: the new tables identity-map everything the boot tables mapped
    // that we use (the image, its stacks, RAM, the devices) and add the
    // table pages; page 0 is the only page they drop, and nothing lives there.
    unsafe { Cr3::write(frame, Cr3Flags::empty()) };
    Ok(plan)
}

/// Maps a core's context page (zeroed) at the end of its EbbRef table at
/// [`TABLE_VADDR`], through entry 511 of `pml4`, with the table's page
/// table. The table's own 128 pages stay unmapped: [`map_table_page`]
/// maps each on its first touch (DESIGN §1), so a core pays only for the
/// pages of the ids it uses instead of zeroing 512 KiB at boot (about
/// 1 ms per core under TCG).
fn map_core_table(pml4: u64, frames: &mut impl FrameSource) -> Result<(), PagingError> {
    let pdpt = next_table(pml4, index(TABLE_VADDR, 3), frames)?;
    let pd = next_table(pdpt, index(TABLE_VADDR, 2), frames)?;
    let pt = next_table(pd, index(TABLE_VADDR, 1), frames)?;
    let frame = frames.zeroed()?;
    (memory_hooks()?.prepare_context_page)(frame);
    set(
        pt,
        index(TABLE_VADDR, 0) + TABLE_PAGES - 1,
        frame | PRESENT | WRITABLE | NO_EXECUTE,
    );
    Ok(())
}

/// What [`map_table_page`] did with a faulting address.
pub enum TablePage {
    /// It was a first touch of this core's EbbRef table: a zeroed page is
    /// mapped there now.
    Mapped,
    /// It was in the table, but there is no memory for the page.
    NoMemory,
    /// It is not an unmapped page of the table.
    NotTable,
}

/// Maps a zeroed page at `addr` if it lies in this core's EbbRef table
/// and is not mapped yet (from the page-fault handler). Only this core
/// uses its table's page table, so no lock is needed; the entry was not
/// present, so no TLB entry needs flushing.
pub fn map_table_page(addr: u64) -> TablePage {
    let table_end = TABLE_VADDR + (TABLE_PAGES - 1) * PAGE;
    if !(TABLE_VADDR..table_end).contains(&addr) {
        return TablePage::NotTable;
    }
    // `map_core_table` made every level down to the table's page table in
    // this core's tables.
    let Some(table) = page_table_of(Cr3::read_raw().0.start_address().as_u64(), addr) else {
        return TablePage::NotTable;
    };
    // SAFETY: `table` is the table's page table (identity mapped); index
    // < 512.
    let entry = unsafe { entries(table).wrapping_add(index(addr, 0) as usize).read() };
    if entry & PRESENT != 0 {
        return TablePage::NotTable;
    }
    match MEMORY_HOOKS.get().and_then(|hooks| (hooks.zeroed_frame)()) {
        Some(frame) => {
            set(
                table,
                index(addr, 0),
                frame | PRESENT | WRITABLE | NO_EXECUTE,
            );
            TablePage::Mapped
        }
        None => TablePage::NoMemory,
    }
}

/// A PML4 for another core (physical address, below 4 GiB so that the
/// real-mode trampoline can load it): the identity map and the stacks'
/// region shared with core 0 (entries 0..511 copied), and its own EbbRef
/// table pages behind entry 511. Needs the page allocator.
pub fn new_core_pml4() -> Result<u64, PagingError> {
    let core0 = CORE0_PML4.load(Ordering::Relaxed);
    let pml4 = PageAllocatorFrames.zeroed()?;
    for entry in 0..511 {
        // SAFETY: both are page-table frames of 512 entries; entry < 511.
        let value = unsafe { entries(core0).wrapping_add(entry).read() };
        set(pml4, entry as u64, value);
    }
    map_core_table(pml4, &mut PageAllocatorFrames)?;
    Ok(pml4)
}

/// Copies into `pml4` (another core's, from [`new_core_pml4`]) the
/// entries 0..511 of core 0's PML4 that it lacks: identity-map entries
/// core 0 added after the copy (`map_device`, for PCI windows above
/// 512 GiB). Each goes from absent to present in one aligned store, so the
/// core, running or not, needs no TLB flush (absent entries are not
/// cached).
pub fn share_new_entries(pml4: u64) {
    if !PML4_GREW.load(Ordering::Relaxed) {
        return;
    }
    let core0 = CORE0_PML4.load(Ordering::Relaxed);
    for entry in 0..511 {
        // SAFETY: both are page-table frames of 512 entries; entry < 511.
        let ours = unsafe { entries(core0).wrapping_add(entry).read() };
        // SAFETY: `pml4` is a page-table frame of 512 entries (from
        // `new_core_pml4`); entry < 511.
        let theirs = unsafe { entries(pml4).wrapping_add(entry).read() };
        if ours & PRESENT != 0 && theirs & PRESENT == 0 {
            // SAFETY: the entry is inside `pml4`'s frame (entry < 511) and was
            // absent, so no translation changes under a running core; an
            // aligned 8-byte store is never torn.
            unsafe { entries(pml4).wrapping_add(entry).write_volatile(ours) };
        }
    }
}

/// Whether `map_device` added an entry to core 0's PML4 (rare: a window
/// above 512 GiB), so that [`share_new_entries`] has something to do.
static PML4_GREW: AtomicBool = AtomicBool::new(false);

/// Core 0's PML4 (physical, below 4 GiB): the tables other cores start on.
pub fn core0_pml4() -> u64 {
    CORE0_PML4.load(Ordering::Relaxed)
}

/// Identity-maps the device window `[start, end)` (rounded out to 2 MiB)
/// uncached in core 0's tables: PCI ECAM and BARs, which can sit above
/// 4 GiB. Parts already mapped stay as they are. Call at boot, before the
/// other cores run the application: a new PML4 entry reaches them through
/// [`share_new_entries`] (`smp::Starting::finish`). Needs the page
/// allocator.
pub fn map_device(start: u64, end: u64) -> Result<(), PagingError> {
    let pml4 = CORE0_PML4.load(Ordering::Relaxed);
    let flags = flags_for(Kind::Device);
    let mut addr = start & !(MIB2 - 1);
    while addr < end {
        // SAFETY: `pml4` is core 0's PML4; index < 512.
        if unsafe { entries(pml4).wrapping_add(index(addr, 3) as usize).read() } & PRESENT == 0 {
            PML4_GREW.store(true, Ordering::Relaxed);
        }
        let pdpt = next_table(pml4, index(addr, 3), &mut PageAllocatorFrames)?;
        // SAFETY: `pdpt` is one of our page-table frames; index < 512.
        let giant = unsafe { entries(pdpt).wrapping_add(index(addr, 2) as usize).read() };
        if giant & (PRESENT | LARGE) != PRESENT | LARGE {
            let pd = next_table(pdpt, index(addr, 2), &mut PageAllocatorFrames)?;
            // SAFETY: `pd` is one of our page-table frames (from
            // `next_table`); index < 512.
            let large = unsafe { entries(pd).wrapping_add(index(addr, 1) as usize).read() };
            if large & PRESENT == 0 {
                set(pd, index(addr, 1), addr | flags | LARGE);
            }
        }
        addr += MIB2;
    }
    Ok(())
}

/// Next free address in the stacks' region (see [`map_stack`]).
static NEXT_STACK: Mutex<u64> = Mutex::new(STACKS_VADDR);

/// Maps a fresh stack of `bytes` (a power of two, at least 4 KiB) in the
/// stacks' region, with an unmapped guard page below it, and returns its
/// top. An overflow faults on the guard page instead of overwriting the
/// memory below. The stack's pages come straight from the page allocator
/// and are not zeroed (nothing reads a stack before writing it). Needs the
/// page allocator.
pub fn map_stack(bytes: u64) -> Result<u64, PagingError> {
    let pages = bytes.div_ceil(PAGE).next_power_of_two();
    let memory =
        (memory_hooks()?.frames)(pages.trailing_zeros() as usize).ok_or(PagingError::NoMemory)?;
    let pml4 = CORE0_PML4.load(Ordering::Relaxed);
    let mut next = NEXT_STACK.lock();
    let bottom = *next + PAGE; // *next stays unmapped: the guard page
    for page in 0..pages {
        let addr = bottom + page * PAGE;
        let pdpt = next_table(pml4, index(addr, 3), &mut PageAllocatorFrames)?;
        let pd = next_table(pdpt, index(addr, 2), &mut PageAllocatorFrames)?;
        let pt = next_table(pd, index(addr, 1), &mut PageAllocatorFrames)?;
        set(
            pt,
            index(addr, 0),
            (memory + page * PAGE) | PRESENT | WRITABLE | NO_EXECUTE,
        );
    }
    let top = bottom + pages * PAGE;
    *next = top;
    Ok(top)
}

/// Serializes changes to the shared regions' tables: two cores faulting on
/// the same page (or the same missing table) at once must not both map it.
static REGION_TABLES: Mutex<()> = Mutex::new(());

/// Maps the 4 KiB page at `addr` (in the shared regions' area or the large
/// allocations' window, `large.rs`) to a fresh
/// zeroed frame, for every core (the area's tables are shared), unless
/// another core mapped it first. `Some(true)`: mapped now; `Some(false)`:
/// already mapped; `None`: no memory.
pub fn map_zeroed_page(addr: u64) -> Option<bool> {
    let pml4 = CORE0_PML4.load(Ordering::Relaxed);
    let _tables = REGION_TABLES.lock();
    let walk = || -> Result<bool, PagingError> {
        let pdpt = next_table(pml4, index(addr, 3), &mut PageAllocatorFrames)?;
        let pd = next_table(pdpt, index(addr, 2), &mut PageAllocatorFrames)?;
        let pt = next_table(pd, index(addr, 1), &mut PageAllocatorFrames)?;
        // SAFETY: `pt` is one of our page-table frames, index < 512.
        let present = unsafe { entries(pt).wrapping_add(index(addr, 0) as usize).read() } & PRESENT;
        if present != 0 {
            return Ok(false);
        }
        let frame = PageAllocatorFrames.zeroed()?;
        set(pt, index(addr, 0), frame | PRESENT | WRITABLE | NO_EXECUTE);
        Ok(true)
    };
    walk().ok()
}

/// The last-level page table that maps `addr` under the PML4 `root`, if
/// every level above it is present and none maps a large page.
fn page_table_of(root: u64, addr: u64) -> Option<u64> {
    let mut table = root;
    for level in (1..4).rev() {
        // SAFETY: `table` is a page-table frame of ours (the root, or an
        // entry's frame below it), identity mapped; index < 512.
        let value = unsafe {
            entries(table)
                .wrapping_add(index(addr, level) as usize)
                .read()
        };
        if value & PRESENT == 0 || value & LARGE != 0 {
            return None;
        }
        table = value & ADDRESS;
    }
    Some(table)
}

/// Unmaps the 4 KiB page at `addr` if it is mapped and returns its frame.
/// Only this core's TLB entry is dropped: the caller makes sure no core
/// uses the address again (regions' addresses are never reused).
pub fn unmap_page(addr: u64) -> Option<u64> {
    let _tables = REGION_TABLES.lock();
    let table = page_table_of(CORE0_PML4.load(Ordering::Relaxed), addr)?;
    let entry = entries(table).wrapping_add(index(addr, 0) as usize);
    // SAFETY: `table` is one of our page-table frames, index < 512.
    let value = unsafe { entry.read() };
    if value & PRESENT == 0 {
        return None;
    }
    // SAFETY: `entry` is inside `table`, one of our page-table frames
    // (index < 512); the page is no longer used (caller's contract).
    unsafe { entry.write(0) };
    x86_64::instructions::tlb::flush(x86_64::VirtAddr::new(addr));
    Some(value & ADDRESS)
}

/// Whether `addr` is a mapped page of the stacks' region.
fn is_mapped_stack(addr: u64) -> bool {
    // `try_lock`: this runs in exception reports, maybe under `map_stack`.
    let Some(next) = NEXT_STACK.try_lock().map(|next| *next) else {
        return false;
    };
    if !(STACKS_VADDR..next).contains(&addr) {
        return false;
    }
    let mut table = CORE0_PML4.load(Ordering::Relaxed);
    for level in (0..4).rev() {
        // SAFETY: `table` is one of our page-table frames, index < 512.
        let value = unsafe {
            entries(table)
                .wrapping_add(index(addr, level) as usize)
                .read()
        };
        if value & PRESENT == 0 {
            return false;
        }
        table = value & ADDRESS;
    }
    true
}

/// Whether `addr` is in the stacks' region but not mapped: a guard page
/// (for exception reports).
pub fn is_stack_guard(addr: u64) -> bool {
    let Some(next) = NEXT_STACK.try_lock().map(|next| *next) else {
        return false;
    };
    (STACKS_VADDR..next).contains(&addr) && !is_mapped_stack(addr)
}

/// The memory plan, once [`init`] ran.
pub fn plan() -> Option<&'static MemoryPlan> {
    PLAN.get()
}

/// Whether `[addr, addr + len)` is mapped RAM (for the backtrace walker).
pub fn is_mapped_ram(addr: u64, len: u64) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    if addr >= STACKS_VADDR {
        return is_mapped_stack(addr) && is_mapped_stack(end - 1);
    }
    match plan() {
        Some(plan) => {
            addr >= PAGE
                && plan
                    .mapped
                    .as_slice()
                    .iter()
                    .any(|r| r.kind == Kind::Ram && r.start <= addr && end <= r.end)
        }
        // The boot tables map the first 4 GiB.
        None => addr >= PAGE && end <= 1 << 32,
    }
}

/// Whether `addr` is mapped in this core's page tables (any page size).
pub fn is_mapped(addr: u64) -> bool {
    let mut table = Cr3::read_raw().0.start_address().as_u64();
    for level in (0..4).rev() {
        // SAFETY: `table` is one of our page-table frames (identity
        // mapped), index < 512.
        let value = unsafe {
            entries(table)
                .wrapping_add(index(addr, level) as usize)
                .read()
        };
        if value & PRESENT == 0 {
            return false;
        }
        if level == 0 || (level < 3 && value & LARGE != 0) {
            return true;
        }
        table = value & ADDRESS;
    }
    true
}
