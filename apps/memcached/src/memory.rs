//! How much of a fixed amount of RAM the items may take (issue 15,
//! defect 1): natively the guest's RAM is all there is, and `-m` beyond
//! what it allows ran the allocator dry and panicked the guest.
//!
//! Items are charged what they really cost (see "Memory budget" in
//! `store.rs`), so `-m` may take what remains after a headroom for what is
//! not charged: the image and boot structures, the item table's buckets
//! (8 bytes per 256 of `-m`), connections' receive and reply buffers, and
//! the allocator's partly used slabs. The headroom is 48 MiB plus an
//! eighth of RAM, and the items get 5/6 of the rest (the hosted memory
//! test bounds RSS by `-m` × 1.2). A larger `-m` is clamped, not refused,
//! with a warning: memcached accepts any `-m`, and a server started with
//! a too-large one keeps serving, evicting earlier.

use crate::Settings;

/// Fixed part of the headroom, in bytes.
const HEADROOM_FIXED: usize = 48 << 20;

/// The smallest `-m` ever used, in bytes (memcached's minimum is 1 MiB
/// of slabs per class; this keeps a tiny guest serving).
const MINIMUM: usize = 1 << 20;

/// The most `ram` bytes of RAM allow for items.
pub fn memory_allowed(ram: usize) -> usize {
    let rest = ram.saturating_sub(HEADROOM_FIXED + ram / 8);
    (rest / 6 * 5).max(MINIMUM)
}

/// `-m` for a node with `ram` bytes: the given one if RAM allows it, else
/// what RAM allows; without `-m`, what RAM allows.
pub fn fit_memory_limit(settings: &Settings, ram: usize) -> usize {
    let allowed = memory_allowed(ram);
    if settings.memory_limit_given {
        settings.memory_limit.min(allowed)
    } else {
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_takes_what_ram_allows() {
        let settings = Settings::default();
        // A 128 MiB guest: 128 - 48 - 16 = 64 MiB, 5/6 of it for items.
        assert_eq!(fit_memory_limit(&settings, 128 << 20), (64 << 20) / 6 * 5);
        assert_eq!(
            memory_allowed(1 << 30),
            ((1 << 30) - (48 << 20) - (128 << 20)) / 6 * 5
        );
    }

    #[test]
    fn a_larger_limit_is_clamped_and_a_smaller_one_kept() {
        let mut settings = Settings {
            memory_limit: 1024 << 20,
            memory_limit_given: true,
            ..Settings::default()
        };
        assert_eq!(
            fit_memory_limit(&settings, 256 << 20),
            memory_allowed(256 << 20)
        );
        settings.memory_limit = 16 << 20;
        assert_eq!(fit_memory_limit(&settings, 256 << 20), 16 << 20);
    }

    #[test]
    fn a_tiny_guest_still_gets_the_minimum() {
        assert_eq!(memory_allowed(32 << 20), MINIMUM);
    }
}
