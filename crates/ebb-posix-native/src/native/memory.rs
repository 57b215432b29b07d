//! The memory group natively: brk in a demand-zero region reserved at
//! start, anonymous mmap/munmap/mremap/madvise over the image's heap (the
//! bookkeeping is `crate::mappings`), mprotect accepted (one address
//! space, no protection between the program and the image: see
//! `mappings.rs`).

use alloc::alloc::{alloc_zeroed, dealloc, Layout};
use alloc::collections::BTreeMap;

use ebb_native::regions::DemandZeroRegion;
use ebb_posix::errno::{EINVAL, ENODEV};
use spin::Mutex;

use crate::brk::BreakArea;
use crate::mappings::{Mappings, PageMemory, PAGE};

/// The break's area: room for musl's allocator metadata and small heaps;
/// untouched pages cost nothing (demand-zero).
const BREAK_AREA: usize = 1 << 30;

/// mmap(2)'s flags and protections that matter here (`asm-generic/mman*.h`).
const PROT_NONE: usize = 0;
const MAP_SHARED: usize = 0x01;
const MAP_PRIVATE: usize = 0x02;
const MAP_FIXED: usize = 0x10;
const MAP_ANONYMOUS: usize = 0x20;
const MREMAP_MAYMOVE: usize = 1;
const MREMAP_FIXED: usize = 2;
const MADV_DONTNEED: usize = 4;

struct State {
    mappings: Mappings,
    /// Mappings made with no access (`PROT_NONE`), by start: the bytes at
    /// their start that no later mprotect opened, which is how musl makes
    /// a thread stack's guard (its `pthread_create`: map all `PROT_NONE`,
    /// then open all but the guard). Nothing here enforces protection, so
    /// these only say where nothing of the program's lives.
    guards: BTreeMap<usize, usize>,
    brk: Option<BreakArea>,
    /// Keeps the break's region reserved.
    _region: Option<DemandZeroRegion>,
}

static STATE: Mutex<State> = Mutex::new(State {
    mappings: Mappings::EMPTY,
    guards: BTreeMap::new(),
    brk: None,
    _region: None,
});

/// The image's heap as mapped memory.
struct Heap;

fn layout(len: usize) -> Option<Layout> {
    Layout::from_size_align(len, PAGE).ok()
}

impl PageMemory for Heap {
    fn allocate(&mut self, len: usize) -> Option<usize> {
        let layout = layout(len)?;
        // SAFETY: `len` is not zero (the table never asks for 0 bytes).
        let block = unsafe { alloc_zeroed(layout) };
        (!block.is_null()).then_some(block as usize)
    }

    fn free(&mut self, addr: usize, len: usize) {
        if let Some(layout) = layout(len) {
            // SAFETY: the table gives back exactly the block `allocate`
            // returned with this length, once.
            unsafe { dealloc(addr as *mut u8, layout) };
        }
    }

    fn zero(&mut self, addr: usize, len: usize) {
        // SAFETY: the range lies in a block of this table (or the break's
        // region), which the program owns; zeroing is what the call asks.
        unsafe { core::ptr::write_bytes(addr as *mut u8, 0, len) };
    }

    fn copy(&mut self, from: usize, to: usize, len: usize) {
        // SAFETY: two distinct live blocks of this table, each at least
        // `len` bytes long.
        unsafe { core::ptr::copy_nonoverlapping(from as *const u8, to as *mut u8, len) };
    }
}

/// Reserves the break's area; without room it stays unset and brk fails
/// (musl's allocator then uses mmap alone).
pub fn init() {
    let mut state = STATE.lock();
    if state.brk.is_some() {
        return;
    }
    if let Some(region) = DemandZeroRegion::new(BREAK_AREA) {
        state.brk = Some(BreakArea::new(region.as_ptr() as usize, BREAK_AREA));
        state._region = Some(region);
    }
}

/// An address as a system call's result: the same 64 bits (the image's
/// regions lie in the upper half, which reads negative, but never in the
/// last page, where `-4095..=-1` are errors).
fn address(addr: usize) -> isize {
    isize::from_ne_bytes(addr.to_ne_bytes())
}

fn errno_or<T>(outcome: Result<T, isize>, value: impl FnOnce(T) -> usize) -> isize {
    match outcome {
        Ok(done) => address(value(done)),
        Err(errno) => -errno,
    }
}

/// brk(2).
pub fn brk(wanted: usize) -> isize {
    let mut state = STATE.lock();
    let Some(area) = state.brk.as_mut() else {
        return 0;
    };
    address(area.brk(wanted, |at, len| Heap.zero(at, len)))
}

/// mmap(2) of anonymous memory; files are not mapped (`ENODEV`, as for
/// a file system that cannot map).
pub fn mmap(len: usize, prot: usize, flags: usize) -> isize {
    // With MAP_ANONYMOUS, Linux ignores the descriptor.
    if flags & MAP_ANONYMOUS == 0 {
        return -ENODEV;
    }
    if flags & (MAP_SHARED | MAP_PRIVATE) == 0 || flags & MAP_FIXED != 0 {
        // A fixed address cannot be honoured in the image's one space.
        return -EINVAL;
    }
    let mut state = STATE.lock();
    let mapped = state.mappings.map(&mut Heap, len);
    if let Ok(addr) = mapped {
        if prot == PROT_NONE {
            state.guards.insert(addr, len);
        }
    }
    errno_or(mapped, |addr| addr)
}

/// munmap(2).
pub fn munmap(addr: usize, len: usize) -> isize {
    let mut state = STATE.lock();
    let result = errno_or(state.mappings.unmap(&mut Heap, addr, len), |()| 0);
    // A guard whose mapping is gone is forgotten, so that a new mapping
    // at the same address is not taken for one.
    let State {
        mappings, guards, ..
    } = &mut *state;
    guards.retain(|&start, _| {
        mappings
            .block_containing(start)
            .is_some_and(|(at, _)| at == start)
    });
    result
}

/// mremap(2) (no fixed target).
pub fn mremap(addr: usize, old_len: usize, new_len: usize, flags: usize) -> isize {
    if flags & MREMAP_FIXED != 0 {
        return -EINVAL;
    }
    let may_move = flags & MREMAP_MAYMOVE != 0;
    let mut state = STATE.lock();
    errno_or(
        state
            .mappings
            .remap(&mut Heap, addr, old_len, new_len, may_move),
        |addr| addr,
    )
}

/// madvise(2): `MADV_DONTNEED` zeroes; other advice is taken and ignored.
pub fn madvise(addr: usize, len: usize, advice: usize) -> isize {
    if !addr.is_multiple_of(PAGE) {
        return -EINVAL;
    }
    if advice != MADV_DONTNEED {
        return 0;
    }
    let state = STATE.lock();
    errno_or(state.mappings.discard(&mut Heap, addr, len), |()| 0)
}

/// mprotect(2): accepted, not enforced (`mappings.rs` says why); opening
/// part of a `PROT_NONE` mapping shrinks its guard to what lies below.
pub fn mprotect(addr: usize, len: usize, prot: usize) -> isize {
    if !addr.is_multiple_of(PAGE) {
        return -EINVAL;
    }
    if prot != PROT_NONE && len > 0 {
        let mut state = STATE.lock();
        if let Some((&start, guard)) = state.guards.range_mut(..=addr).next_back() {
            if addr < start + *guard {
                *guard = addr - start;
            }
        }
    }
    0
}

/// The guard below a thread stack topped by `stack`: the start of the
/// `PROT_NONE` mapping holding it and the guard's length, if the program
/// (musl) made one; none for a stack in memory it chose itself.
pub fn guard_below(stack: usize) -> Option<(usize, usize)> {
    let state = STATE.lock();
    let (start, len) = state.mappings.block_containing(stack.wrapping_sub(1))?;
    let guard = *state.guards.get(&start)?;
    (guard > 0 && guard < len).then_some((start, guard))
}
