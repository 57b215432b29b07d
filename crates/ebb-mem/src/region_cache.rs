//! `RegionCache`: a few freed large allocations kept for reuse.
//!
//! A large allocation is a virtual region of its own ([`crate::vmem`]);
//! releasing it and reserving a new one for the next request costs a fresh
//! mapping whose every page faults and is zeroed on first touch. A program
//! that frees and allocates large blocks of similar sizes in turn (memcached
//! storing 1 MB values, each evicting one: issue 15, defect 10) paid that
//! per request. Freed regions up to [`MAX_CACHED_LEN`] go here instead, at
//! most [`SLOTS`] of them, and the next large request of about their size
//! takes one back with its pages already present. A full cache gives up
//! the region it has kept longest for the one being freed: the sizes a
//! program frees change over time, and a cache never giving room would stay
//! full of sizes no one asks for any more (a test freeing a 1.5 MiB block
//! in turn lost its reuse whenever other work had filled the slots).

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
    /// When it was kept: the count of regions kept before it.
    kept_at: u64,
}

/// The slots, and how many regions were kept so far.
struct Slots {
    kept: [Option<Kept>; SLOTS],
    count: u64,
}

/// Freed regions waiting for reuse. The lock is held for a scan of
/// [`SLOTS`] entries, never across a system call.
pub struct RegionCache {
    slots: SpinLock<Slots>,
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
            slots: SpinLock::new(Slots {
                kept: [None; SLOTS],
                count: 0,
            }),
        }
    }

    /// Takes a kept region of at least `len` usable bytes, at most a quarter
    /// more (so that a small request does not pin a large region), starting
    /// at a multiple of `align`. Returns its start and usable length.
    pub fn take(&self, len: usize, align: usize) -> Option<(NonNull<u8>, usize)> {
        let most = len.saturating_add(len / 4);
        let mut slots = self.slots.lock();
        let slot = slots.kept.iter_mut().find(|slot| {
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
    /// small enough, in a free slot or else in place of the region kept
    /// longest. `Err` gives back the region the caller must release: this
    /// one (too large), or the one it displaced.
    pub fn keep(&self, start: NonNull<u8>, len: usize) -> Result<(), NonNull<u8>> {
        if len > MAX_CACHED_LEN {
            return Err(start);
        }
        let mut slots = self.slots.lock();
        let kept_at = slots.count;
        slots.count += 1;
        let new = Kept {
            start: start.as_ptr().expose_provenance(),
            len,
            kept_at,
        };
        if let Some(slot) = slots.kept.iter_mut().find(|slot| slot.is_none()) {
            *slot = Some(new);
            return Ok(());
        }
        let oldest = slots
            .kept
            .iter_mut()
            .min_by_key(|slot| slot.map_or(u64::MAX, |kept| kept.kept_at))
            .and_then(|slot| slot.replace(new));
        drop(slots);
        match oldest {
            Some(old) => {
                let old = core::ptr::with_exposed_provenance_mut::<u8>(old.start);
                NonNull::new(old).map_or(Ok(()), Err)
            }
            // Unreachable (every slot is full here); keeping nothing
            // displaced nothing.
            None => Ok(()),
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
        // Full: the region kept longest gives way to the new one.
        assert_eq!(cache.keep(at(0x100_0000), 4096), Err(at(0x1000)));
        assert!(cache.take(4096, 4096).is_some());
        assert!(
            cache.keep(at(0x3000_0000), 4096).is_ok(),
            "a slot came free"
        );
    }

    #[test]
    fn a_full_cache_makes_room_for_the_size_now_freed() {
        let cache = RegionCache::new();
        for slot in 0..SLOTS {
            assert!(cache.keep(at(0x10_0000 * (slot + 1)), 64 << 10).is_ok());
        }
        // Another size, freed and asked for in turn, gets reused.
        assert_eq!(cache.keep(at(0x1000_0000), 3 << 19), Err(at(0x10_0000)));
        assert_eq!(cache.take(3 << 19, 8), Some((at(0x1000_0000), 3 << 19)));
    }
}
