//! Anonymous memory mappings (`mmap`, `munmap`, `mremap`, `madvise`)
//! kept as a table over page-aligned blocks a [`PageMemory`] hands out:
//! the bookkeeping, platform-neutral and tested on the host; the native
//! backend supplies the memory.
//!
//! A library OS has one address space and no protection between the C
//! program and the rest of the image, so a mapping is a block of the
//! image's memory. What Linux promises that programs rely on is kept: a
//! new mapping reads as zeros, `MADV_DONTNEED` makes private anonymous
//! memory read as zeros again (madvise(2)), `mremap` keeps the data, and
//! `munmap` of part of a mapping is allowed (mmap(2)). What is not kept:
//! an unmapped page still reads, a read-only page still writes
//! (`mprotect` is accepted and not enforced). A block goes back when
//! every page of it is unmapped.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use ebb_posix::errno::{EINVAL, ENOMEM};

/// The page size (AT_PAGESZ).
pub const PAGE: usize = 4096;

/// Where mapped memory comes from.
pub trait PageMemory {
    /// A zeroed, page-aligned block of `len` bytes (a multiple of
    /// [`PAGE`]); its address, or `None` when there is no memory.
    fn allocate(&mut self, len: usize) -> Option<usize>;
    /// Gives back the block `allocate` returned at `addr` with `len`.
    fn free(&mut self, addr: usize, len: usize);
    /// Zeroes `len` bytes at `addr` (inside a block).
    fn zero(&mut self, addr: usize, len: usize);
    /// Copies `len` bytes from `from` to `to` (two blocks).
    fn copy(&mut self, from: usize, to: usize, len: usize);
}

/// One block and which of its pages are still mapped.
#[derive(Debug)]
struct Mapping {
    len: usize,
    mapped: Vec<bool>,
}

impl Mapping {
    fn mapped_pages(&self) -> usize {
        self.mapped.iter().filter(|&&mapped| mapped).count()
    }
}

/// The mappings of a C program.
#[derive(Debug, Default)]
pub struct Mappings {
    blocks: BTreeMap<usize, Mapping>,
}

/// `len` rounded up to whole pages; `None` for 0 or on overflow.
fn pages_of(len: usize) -> Option<usize> {
    if len == 0 {
        return None;
    }
    len.checked_add(PAGE - 1).map(|rounded| rounded / PAGE)
}

impl Mappings {
    /// No mappings, usable in a `static`.
    pub const EMPTY: Mappings = Mappings {
        blocks: BTreeMap::new(),
    };

    /// No mappings.
    #[must_use]
    pub fn new() -> Mappings {
        Mappings::default()
    }

    /// A new zeroed mapping of `len` bytes: its address, or `-errno`
    /// (`EINVAL` for 0 bytes, `ENOMEM` without memory).
    pub fn map(&mut self, memory: &mut impl PageMemory, len: usize) -> Result<usize, isize> {
        if len == 0 {
            return Err(EINVAL);
        }
        // Longer than the address space: no memory (mmap(2): ENOMEM).
        let pages = pages_of(len).ok_or(ENOMEM)?;
        let bytes = pages.checked_mul(PAGE).ok_or(ENOMEM)?;
        let addr = memory.allocate(bytes).ok_or(ENOMEM)?;
        self.blocks.insert(
            addr,
            Mapping {
                len: bytes,
                mapped: vec![true; pages],
            },
        );
        Ok(addr)
    }

    /// Unmaps the pages of `[addr, addr + len)`; blocks left with no
    /// mapped page go back to `memory`. `EINVAL` for an unaligned address
    /// or 0 bytes; pages outside every mapping are ignored, as Linux
    /// ignores unmapped ranges.
    pub fn unmap(
        &mut self,
        memory: &mut impl PageMemory,
        addr: usize,
        len: usize,
    ) -> Result<(), isize> {
        if !addr.is_multiple_of(PAGE) {
            return Err(EINVAL);
        }
        let pages = pages_of(len).ok_or(EINVAL)?;
        let end = addr.checked_add(pages * PAGE).ok_or(EINVAL)?;
        let mut emptied = Vec::new();
        for (start, from, to) in self.overlaps(addr, end) {
            memory.zero(from, to - from);
            let Some(mapping) = self.blocks.get_mut(&start) else {
                continue;
            };
            for page in (from - start) / PAGE..(to - start) / PAGE {
                // Past `mapped`'s end: pages a shrinking remap gave up.
                if let Some(mapped) = mapping.mapped.get_mut(page) {
                    *mapped = false;
                }
            }
            if mapping.mapped_pages() == 0 {
                emptied.push(start);
            }
        }
        for start in emptied {
            if let Some(mapping) = self.blocks.remove(&start) {
                memory.free(start, mapping.len);
            }
        }
        Ok(())
    }

    /// `mremap(addr, old_len, new_len, may_move)` of a whole mapping:
    /// shrinking unmaps the tail in place; growing moves the data to a
    /// new block when `may_move` (else `ENOMEM`, as Linux when it cannot
    /// grow in place). `EINVAL` for an address that does not start a
    /// mapping of `old_len` bytes.
    pub fn remap(
        &mut self,
        memory: &mut impl PageMemory,
        addr: usize,
        old_len: usize,
        new_len: usize,
        may_move: bool,
    ) -> Result<usize, isize> {
        let old_pages = pages_of(old_len).ok_or(EINVAL)?;
        let new_pages = pages_of(new_len).ok_or(EINVAL)?;
        let mapping = self.blocks.get(&addr).ok_or(EINVAL)?;
        if mapping.mapped.len() != old_pages || mapping.mapped_pages() != old_pages {
            return Err(EINVAL);
        }
        if new_pages <= old_pages {
            if new_pages < old_pages {
                self.unmap(
                    memory,
                    addr + new_pages * PAGE,
                    (old_pages - new_pages) * PAGE,
                )?;
            }
            return Ok(addr);
        }
        if !may_move {
            return Err(ENOMEM);
        }
        let moved = self.map(memory, new_pages * PAGE)?;
        memory.copy(addr, moved, old_pages * PAGE);
        self.unmap(memory, addr, old_pages * PAGE)?;
        Ok(moved)
    }

    /// `madvise(MADV_DONTNEED)`: the mapped pages of the range (whole
    /// pages: the length is rounded up, madvise(2)) read as zeros again.
    /// `EINVAL` for an unaligned address.
    pub fn discard(
        &self,
        memory: &mut impl PageMemory,
        addr: usize,
        len: usize,
    ) -> Result<(), isize> {
        if !addr.is_multiple_of(PAGE) {
            return Err(EINVAL);
        }
        let end = addr.saturating_add(pages_of(len).unwrap_or(0).saturating_mul(PAGE));
        for (_, from, to) in self.overlaps(addr, end) {
            memory.zero(from, to - from);
        }
        Ok(())
    }

    /// The blocks `[addr, end)` overlaps: each block's start and the
    /// overlapping part `[from, to)`.
    fn overlaps(&self, addr: usize, end: usize) -> Vec<(usize, usize, usize)> {
        self.blocks
            .range(..end)
            .map(|(&start, mapping)| (start, start + mapping.len))
            .filter(|&(_, block_end)| block_end > addr)
            .map(|(start, block_end)| (start, addr.max(start), end.min(block_end)))
            .collect()
    }

    /// The block `addr` lies in, as (start, length), if any: where a C
    /// thread's stack, mapped by its C library, begins.
    #[must_use]
    pub fn block_containing(&self, addr: usize) -> Option<(usize, usize)> {
        let (&start, block) = self.blocks.range(..=addr).next_back()?;
        (addr - start < block.len).then_some((start, block.len))
    }

    /// How many blocks are held (for tests and reports).
    #[must_use]
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::collections::BTreeMap;

    use super::*;

    /// Memory as byte vectors at made-up, page-aligned addresses.
    #[derive(Default)]
    struct FakeMemory {
        next: usize,
        blocks: BTreeMap<usize, Vec<u8>>,
    }

    impl FakeMemory {
        fn byte(&self, addr: usize) -> u8 {
            let (start, block) = self.blocks.range(..=addr).next_back().unwrap();
            block[addr - start]
        }

        fn fill(&mut self, addr: usize, len: usize, byte: u8) {
            for at in addr..addr + len {
                let (start, block) = self.blocks.range_mut(..=at).next_back().unwrap();
                block[at - *start] = byte;
            }
        }
    }

    impl PageMemory for FakeMemory {
        fn allocate(&mut self, len: usize) -> Option<usize> {
            if len > 64 * PAGE {
                return None;
            }
            self.next += 1 << 20;
            self.blocks.insert(self.next, vec![0; len]);
            Some(self.next)
        }
        fn free(&mut self, addr: usize, len: usize) {
            assert_eq!(self.blocks.remove(&addr).unwrap().len(), len);
        }
        fn zero(&mut self, addr: usize, len: usize) {
            self.fill(addr, len, 0);
        }
        fn copy(&mut self, from: usize, to: usize, len: usize) {
            for i in 0..len {
                let byte = self.byte(from + i);
                self.fill(to + i, 1, byte);
            }
        }
    }

    #[test]
    fn a_mapping_is_whole_pages_and_goes_back_when_unmapped() {
        let (mut memory, mut maps) = (FakeMemory::default(), Mappings::new());
        let addr = maps.map(&mut memory, 5000).unwrap();
        assert_eq!(memory.blocks[&addr].len(), 2 * PAGE);
        maps.unmap(&mut memory, addr, 5000).unwrap();
        assert_eq!((maps.blocks(), memory.blocks.len()), (0, 0));
    }

    #[test]
    fn the_block_holding_an_address_is_found() {
        let (mut memory, mut maps) = (FakeMemory::default(), Mappings::new());
        let addr = maps.map(&mut memory, 3 * PAGE).unwrap();
        assert_eq!(maps.block_containing(addr), Some((addr, 3 * PAGE)));
        assert_eq!(
            maps.block_containing(addr + 3 * PAGE - 1),
            Some((addr, 3 * PAGE))
        );
        assert_eq!(maps.block_containing(addr + 3 * PAGE), None);
        assert_eq!(maps.block_containing(addr - 1), None);
    }

    #[test]
    fn partial_unmaps_keep_the_block_until_its_last_page() {
        let (mut memory, mut maps) = (FakeMemory::default(), Mappings::new());
        let addr = maps.map(&mut memory, 3 * PAGE).unwrap();
        memory.fill(addr, 3 * PAGE, 9);
        maps.unmap(&mut memory, addr + PAGE, PAGE).unwrap();
        assert_eq!(memory.byte(addr + PAGE), 0, "an unmapped page is zeroed");
        assert_eq!(memory.byte(addr), 9);
        maps.unmap(&mut memory, addr, PAGE).unwrap();
        assert_eq!(maps.blocks(), 1);
        maps.unmap(&mut memory, addr + 2 * PAGE, PAGE).unwrap();
        assert_eq!((maps.blocks(), memory.blocks.len()), (0, 0));
    }

    #[test]
    fn bad_arguments_are_einval_and_no_memory_enomem() {
        let (mut memory, mut maps) = (FakeMemory::default(), Mappings::new());
        assert_eq!(maps.map(&mut memory, 0), Err(EINVAL));
        assert_eq!(maps.map(&mut memory, usize::MAX), Err(ENOMEM));
        assert_eq!(maps.map(&mut memory, 65 * PAGE), Err(ENOMEM));
        assert_eq!(maps.unmap(&mut memory, 12, PAGE), Err(EINVAL));
        assert_eq!(maps.unmap(&mut memory, PAGE, 0), Err(EINVAL));
        assert_eq!(maps.unmap(&mut memory, 7 * PAGE, PAGE), Ok(()));
        assert_eq!(
            maps.remap(&mut memory, 7 * PAGE, PAGE, 2 * PAGE, true),
            Err(EINVAL)
        );
        assert_eq!(maps.discard(&mut memory, 3, PAGE), Err(EINVAL));
    }

    #[test]
    fn remap_grows_by_moving_and_shrinks_in_place() {
        let (mut memory, mut maps) = (FakeMemory::default(), Mappings::new());
        let addr = maps.map(&mut memory, 2 * PAGE).unwrap();
        memory.fill(addr, 2 * PAGE, 5);
        assert_eq!(
            maps.remap(&mut memory, addr, 2 * PAGE, 4 * PAGE, false),
            Err(ENOMEM)
        );
        let moved = maps
            .remap(&mut memory, addr, 2 * PAGE, 4 * PAGE, true)
            .unwrap();
        assert_ne!(moved, addr);
        assert_eq!(memory.byte(moved + 2 * PAGE - 1), 5);
        assert_eq!(memory.byte(moved + 2 * PAGE), 0);
        assert!(
            !memory.blocks.contains_key(&addr),
            "the old block went back"
        );
        assert_eq!(
            maps.remap(&mut memory, moved, 4 * PAGE, PAGE, false),
            Ok(moved)
        );
        assert_eq!(
            maps.remap(&mut memory, moved, 4 * PAGE, PAGE, false),
            Err(EINVAL)
        );
        assert_eq!(maps.blocks(), 1);
    }

    #[test]
    fn dontneed_zeroes_only_mapped_memory() {
        let (mut memory, mut maps) = (FakeMemory::default(), Mappings::new());
        let addr = maps.map(&mut memory, 2 * PAGE).unwrap();
        memory.fill(addr, 2 * PAGE, 7);
        maps.discard(&mut memory, addr + PAGE, 10 * PAGE).unwrap();
        assert_eq!(memory.byte(addr), 7);
        assert_eq!(memory.byte(addr + PAGE), 0);
        // A length inside a page covers the whole page.
        memory.fill(addr, 2 * PAGE, 7);
        maps.discard(&mut memory, addr, 1).unwrap();
        assert_eq!(memory.byte(addr + PAGE - 1), 0);
        assert_eq!(memory.byte(addr + PAGE), 7);
    }
}
