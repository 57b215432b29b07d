//! Planning the identity map from the firmware's memory map: which physical
//! ranges get mapped, with which caching, in which page sizes.
//! Platform-neutral and allocation-free so that it is unit-tested on the
//! host; `paging.rs` carries the plan out.

/// How a mapped range is cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Memory: write-back.
    Ram,
    /// Device registers or firmware-reserved ranges: uncached.
    Device,
}

/// A physical range `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// Caching.
    pub kind: Kind,
}

pub use ebb_boot_abi::e820;

/// How many ranges a [`RangeSet`] holds.
pub const MAX_RANGES: usize = 64;

/// A small set of ranges with no allocation.
#[derive(Clone, Debug)]
pub struct RangeSet {
    ranges: [Range; MAX_RANGES],
    len: usize,
}

impl Default for RangeSet {
    fn default() -> Self {
        RangeSet {
            ranges: [Range {
                start: 0,
                end: 0,
                kind: Kind::Ram,
            }; MAX_RANGES],
            len: 0,
        }
    }
}

/// The set is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

impl RangeSet {
    /// The ranges.
    pub fn as_slice(&self) -> &[Range] {
        &self.ranges[..self.len]
    }

    /// Adds a range (empty ranges are ignored).
    pub fn push(&mut self, range: Range) -> Result<(), Full> {
        if range.end <= range.start {
            return Ok(());
        }
        let slot = self.ranges.get_mut(self.len).ok_or(Full)?;
        *slot = range;
        self.len += 1;
        Ok(())
    }

    /// Adds the memory-map entry `(addr, size, type)`: RAM and ACPI ranges
    /// as [`Kind::Ram`], reserved ones as [`Kind::Device`]; unusable
    /// (bad) memory is left out.
    pub fn push_e820(&mut self, addr: u64, size: u64, kind: u32) -> Result<(), Full> {
        let kind = match kind {
            e820::RAM | e820::ACPI | e820::NVS => Kind::Ram,
            e820::RESERVED => Kind::Device,
            _ => return Ok(()),
        };
        self.push(Range {
            start: addr,
            end: addr.saturating_add(size),
            kind,
        })
    }

    /// Rounds every range outwards to `align` (a power of two), sorts them
    /// and merges overlapping ones (a block holding any RAM is RAM) and
    /// adjacent ones of the same kind, so that the result is disjoint and
    /// no two ranges share an `align` block.
    pub fn normalize(&mut self, align: u64) {
        let ranges = &mut self.ranges[..self.len];
        for range in ranges.iter_mut() {
            range.start &= !(align - 1);
            range.end = range.end.saturating_add(align - 1) & !(align - 1);
        }
        ranges.sort_unstable_by_key(|range| range.start);
        let mut out = 0;
        for i in 0..self.len {
            let range = self.ranges[i];
            if out > 0 {
                let last = &mut self.ranges[out - 1];
                let overlaps = range.start < last.end;
                if overlaps || (range.start == last.end && range.kind == last.kind) {
                    last.end = last.end.max(range.end);
                    if range.kind == Kind::Ram {
                        last.kind = Kind::Ram;
                    }
                    continue;
                }
            }
            self.ranges[out] = range;
            out += 1;
        }
        self.len = out;
    }

    /// The end of the highest range (0 when empty).
    pub fn end(&self) -> u64 {
        self.as_slice().iter().map(|r| r.end).max().unwrap_or(0)
    }
}

/// Splits `[start, end)` into the largest pages that fit: 1 GiB ones where
/// `huge` allows and the range covers a whole aligned GiB, else 2 MiB ones
/// (the range must be 2 MiB-aligned). Calls `page(address, size)`.
pub fn pages(start: u64, end: u64, huge: bool, mut page: impl FnMut(u64, u64)) {
    const GIB: u64 = 1 << 30;
    const MIB2: u64 = 2 << 20;
    let mut at = start;
    while at < end {
        let size = if huge && at.is_multiple_of(GIB) && end - at >= GIB {
            GIB
        } else {
            MIB2
        };
        page(at, size);
        at += size;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    const MIB: u64 = 1 << 20;

    #[test]
    fn q35_map_normalizes_to_disjoint_2mib_ranges() {
        let mut set = RangeSet::default();
        // What QEMU's q35 reports for -m 512M, plus the device windows.
        set.push_e820(0, 0x9fc00, e820::RAM).unwrap();
        set.push_e820(0x9fc00, 0x400, e820::RESERVED).unwrap();
        set.push_e820(0xf0000, 0x10000, e820::RESERVED).unwrap();
        set.push_e820(0x100000, 0x1fee0000, e820::RAM).unwrap();
        set.push_e820(0x1ffe0000, 0x20000, e820::RESERVED).unwrap();
        set.push_e820(0xfeffc000, 0x4000, e820::RESERVED).unwrap();
        set.push_e820(0xfffc0000, 0x40000, e820::RESERVED).unwrap();
        set.push_e820(0xb000_0000, 0x1000_0000, e820::RESERVED)
            .unwrap();
        set.push_e820(0x1234, 0, e820::RAM).unwrap();
        set.normalize(2 * MIB);
        assert_eq!(
            set.as_slice(),
            [
                Range {
                    start: 0,
                    end: 512 * MIB,
                    kind: Kind::Ram
                },
                Range {
                    start: 0xb000_0000,
                    end: 0xc000_0000,
                    kind: Kind::Device
                },
                Range {
                    start: 0xfee0_0000,
                    end: 0xff00_0000,
                    kind: Kind::Device
                },
                Range {
                    start: 0xffe0_0000,
                    end: 0x1_0000_0000,
                    kind: Kind::Device
                },
            ]
        );
        assert_eq!(set.end(), 0x1_0000_0000);
    }

    #[test]
    fn pages_prefer_1gib_where_allowed() {
        let mut seen = Vec::new();
        pages(0, 3 << 30, true, |a, s| seen.push((a, s)));
        assert_eq!(seen, [(0, 1 << 30), (1 << 30, 1 << 30), (2 << 30, 1 << 30)]);
        seen.clear();
        pages(510 * MIB, (1 << 30) + 4 * MIB, true, |a, s| {
            seen.push((a, s))
        });
        assert_eq!(seen.len(), 257 + 2);
        assert!(seen.contains(&(1 << 30, 2 * MIB)));
        seen.clear();
        pages(0, 4 * MIB, false, |a, s| seen.push((a, s)));
        assert_eq!(seen, [(0, 2 * MIB), (2 * MIB, 2 * MIB)]);
    }

    #[test]
    fn a_full_set_says_so() {
        let mut set = RangeSet::default();
        for i in 0..MAX_RANGES as u64 {
            set.push(Range {
                start: i * 4 * MIB,
                end: i * 4 * MIB + MIB,
                kind: Kind::Ram,
            })
            .unwrap();
        }
        assert_eq!(
            set.push(Range {
                start: 0,
                end: 1,
                kind: Kind::Ram
            }),
            Err(Full)
        );
        set.normalize(2 * MIB);
        assert_eq!(set.as_slice().len(), MAX_RANGES);
    }
}
