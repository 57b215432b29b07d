//! The program break (`brk`, brk(2)): one area the native backend
//! reserves at start (demand-zero, so its untouched pages cost nothing),
//! moved up and down within it. Platform-neutral, tested on the host.
//!
//! Linux's system call (not the C function) returns the new break on
//! success and the old one on failure, and `brk(0)` asks for the current
//! one. Memory given back and taken again reads as zeros, as fresh pages
//! do on Linux (musl's allocator relies on it), so a shrink zeroes what it
//! gives back.

/// The break's area and where the break is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakArea {
    base: usize,
    limit: usize,
    current: usize,
}

impl BreakArea {
    /// An area `[base, base + len)`, the break at its start.
    #[must_use]
    pub fn new(base: usize, len: usize) -> BreakArea {
        BreakArea {
            base,
            limit: base + len,
            current: base,
        }
    }

    /// `brk(wanted)`: the break afterwards. A break outside the area is
    /// refused (the old break comes back); a shrink first calls `zero`
    /// with the range it gives back.
    pub fn brk(&mut self, wanted: usize, zero: impl FnOnce(usize, usize)) -> usize {
        if wanted < self.base || wanted > self.limit {
            return self.current;
        }
        if wanted < self.current {
            zero(wanted, self.current - wanted);
        }
        self.current = wanted;
        self.current
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_break_moves_within_its_area() {
        let mut area = BreakArea::new(0x1000, 0x4000);
        assert_eq!(area.brk(0, |_, _| panic!()), 0x1000);
        assert_eq!(area.brk(0x3000, |_, _| panic!()), 0x3000);
        assert_eq!(area.brk(0x6000, |_, _| panic!()), 0x3000, "past the area");
        assert_eq!(area.brk(0x5000, |_, _| panic!()), 0x5000, "up to its end");
        let mut zeroed = None;
        assert_eq!(area.brk(0x2000, |at, len| zeroed = Some((at, len))), 0x2000);
        assert_eq!(zeroed, Some((0x2000, 0x3000)));
        assert_eq!(area.brk(0x800, |_, _| panic!()), 0x2000, "below the area");
    }
}
