//! `RegionCache`: a few freed large allocations kept for reuse.
//!
//! A large allocation is a virtual region of its own ([`crate::vmem`]);
//! releasing it and reserving a new one for the next request costs a fresh
//! mapping whose every page faults and is zeroed on first touch. A program
//! that frees and allocates large blocks of similar sizes in turn (memcached
//! storing 1 MB values, each evicting one: issue 15, defect 10) paid that
//! per request. Freed regions up to [`MAX_CACHED_LEN`] go here instead, at
//! most [`SLOTS`] of them, and the next large request of about their size
//! takes one back with its pages already present.

use core::ptr::NonNull;

use crate::sync::SpinLock;

/// Regions kept at most.
pub const SLOTS: usize = 8;

/// The largest region kept, in bytes: larger ones are rare and each would
/// hold much memory no one uses. With [`SLOTS`], at most 16 MiB is kept.
pub const MAX_CACHED_LEN: usize = 2 << 20;

/// A kept region: its usable start (as an address whose provenance is
/// exposed, so that the cache is `Sync` without `unsafe`) and usable
/// length.
#[derive(Clone, Copy)]
struct Kept {
    start: usize,
    len: usize,
}

/// Freed regions waiting for reuse. The lock is held for a scan of
/// [`SLOTS`] entries, never across a system call.
pub struct RegionCache {
    slots: SpinLock<[Option<Kept>; SLOTS]>,
}

impl Default for RegionCache {
    fn default() -> Self {
        Self::new()
    }
}

impl RegionCache {
    /// An empty cache.
    pub const fn new() -> Self {
        Self {
            slots: SpinLock::new([None; SLOTS]),
        }
    }

    /// Takes a kept region of at least `len` usable bytes, at most a quarter
    /// more (so that a small request does not pin a large region), starting
    /// at a multiple of `align`. Returns its start and usable length.
    pub fn take(&self, len: usize, align: usize) -> Option<(NonNull<u8>, usize)> {
        let most = len.saturating_add(len / 4);
        let mut slots = self.slots.lock();
        let slot = slots.iter_mut().find(|slot| {
            slot.is_some_and(|kept| {
                kept.len >= len && kept.len <= most && kept.start % align.max(1) == 0
            })
        })?;
        let kept = slot.take()?;
        drop(slots);
        let start = core::ptr::with_exposed_provenance_mut::<u8>(kept.start);
        Some((NonNull::new(start)?, kept.len))
    }

    /// Keeps the freed region at `start` with `len` usable bytes if it is
    /// small enough and a slot is free; otherwise gives it back (the
    /// caller then releases it).
    pub fn keep(&self, start: NonNull<u8>, len: usize) -> Result<(), NonNull<u8>> {
        if len > MAX_CACHED_LEN {
            return Err(start);
        }
        let mut slots = self.slots.lock();
        match slots.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => {
                *slot = Some(Kept {
                    start: start.as_ptr().expose_provenance(),
                    len,
                });
                Ok(())
            }
            None => Err(start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(address: usize) -> NonNull<u8> {
        NonNull::new(address as *mut u8).unwrap()
    }

    #[test]
    fn takes_a_kept_region_of_about_the_size_and_alignment_asked() {
        let cache = RegionCache::new();
        assert!(cache.keep(at(0x10_0000), 1 << 20).is_ok());
        // Too small, too large (over a quarter more), misaligned: not taken.
        assert!(cache.take((1 << 20) + 1, 8).is_none());
        assert!(cache.take(800 << 10, 8).is_none());
        assert!(cache.take(1 << 20, 1 << 21).is_none());
        assert_eq!(cache.take(1_000_000, 4096), Some((at(0x10_0000), 1 << 20)));
        assert!(cache.take(1_000_000, 8).is_none(), "taken once");
    }

    #[test]
    fn keeps_a_bounded_number_of_bounded_regions() {
        let cache = RegionCache::new();
        assert_eq!(
            cache.keep(at(0x1000), MAX_CACHED_LEN + 4096),
            Err(at(0x1000))
        );
        for slot in 0..SLOTS {
            assert!(cache.keep(at(0x1000 * (slot + 1)), 4096).is_ok());
        }
        assert_eq!(cache.keep(at(0x100_0000), 4096), Err(at(0x100_0000)));
    }
}
