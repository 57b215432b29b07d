//! Server-wide counters for the `stats` command, kept per core so that
//! counting never makes cores write the same cache line: a multicore Ebb
//! whose representatives are atomics written only by their own core
//! (relaxed stores), summed when `stats` asks.
//!
//! `stats reset` (memcached's `stats_reset`) cannot zero another core's
//! counters without racing its writes, so it records the current totals
//! as a baseline in the Ebb's root instead, and every total is reported
//! since that baseline. As in memcached, what describes the present
//! (`curr_connections`, and the store's `curr_items` and `bytes`) is not
//! reset; the store's running counts (`total_items`, `evictions`,
//! `reclaimed`, `get_expired`, `get_flushed`) are.

use core::sync::atomic::{AtomicU64, Ordering};

use ebb_core::{CoreId, EbbError, EbbRef, Multicore, MulticoreEbb, MulticoreRoot};

use crate::store::{Refused, SetMode, SetResult, StoreStats};

/// One core's counters.
#[derive(Default, Debug)]
pub struct Counters {
    /// `get`-family keys looked up.
    pub cmd_get: AtomicU64,
    /// Keys found.
    pub get_hits: AtomicU64,
    /// Keys not found.
    pub get_misses: AtomicU64,
    /// Store commands whose data was read.
    pub cmd_set: AtomicU64,
    /// Meta commands memcached 1.6.18 counts (`me`; see `protocol::meta`).
    pub cmd_meta: AtomicU64,
    /// Store commands refused as larger than `-I` (text and meta only, as
    /// in memcached 1.6.18).
    pub store_too_large: AtomicU64,
    /// Store commands refused as larger than `-m` (text and meta only).
    pub store_no_memory: AtomicU64,
    /// `touch`/`gat` commands.
    pub cmd_touch: AtomicU64,
    /// Touch hits.
    pub touch_hits: AtomicU64,
    /// Touch misses.
    pub touch_misses: AtomicU64,
    /// `flush_all` commands.
    pub cmd_flush: AtomicU64,
    /// Delete hits.
    pub delete_hits: AtomicU64,
    /// Delete misses.
    pub delete_misses: AtomicU64,
    /// incr hits.
    pub incr_hits: AtomicU64,
    /// incr misses.
    pub incr_misses: AtomicU64,
    /// decr hits.
    pub decr_hits: AtomicU64,
    /// decr misses.
    pub decr_misses: AtomicU64,
    /// cas hits.
    pub cas_hits: AtomicU64,
    /// cas misses.
    pub cas_misses: AtomicU64,
    /// cas with a wrong CAS value.
    pub cas_badval: AtomicU64,
    /// Bytes read from clients.
    pub bytes_read: AtomicU64,
    /// Bytes written to clients.
    pub bytes_written: AtomicU64,
    /// Connections now.
    pub curr_connections: AtomicU64,
    /// Connections ever.
    pub total_connections: AtomicU64,
    /// Connections refused for `-c`.
    pub rejected_connections: AtomicU64,
}

impl Counters {
    /// Adds `n` to `counter` (only this core writes it).
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Counts a store command's outcome as memcached's `do_store_item`
    /// does: only `cas` has hit, bad value and miss counters.
    pub fn count_store(&self, mode: SetMode, result: SetResult) {
        let counter = match (mode, result) {
            (SetMode::Cas, SetResult::Stored(_)) => &self.cas_hits,
            (SetMode::Cas, SetResult::Exists) => &self.cas_badval,
            (SetMode::Cas, SetResult::NotFound) => &self.cas_misses,
            _ => return,
        };
        Counters::add(counter, 1);
    }

    /// Counts a store command the size rule refused before its data was
    /// read.
    pub fn count_refused(&self, refused: Refused) {
        let counter = match refused {
            Refused::TooLarge => &self.store_too_large,
            Refused::NoMemory => &self.store_no_memory,
        };
        Counters::add(counter, 1);
    }
}

impl Counters {
    /// Every counter `stats reset` resets: all but `curr_connections`.
    fn resettable(&self) -> [&AtomicU64; 24] {
        [
            &self.cmd_get,
            &self.get_hits,
            &self.get_misses,
            &self.cmd_set,
            &self.cmd_meta,
            &self.store_too_large,
            &self.store_no_memory,
            &self.cmd_touch,
            &self.touch_hits,
            &self.touch_misses,
            &self.cmd_flush,
            &self.delete_hits,
            &self.delete_misses,
            &self.incr_hits,
            &self.incr_misses,
            &self.decr_hits,
            &self.decr_misses,
            &self.cas_hits,
            &self.cas_misses,
            &self.cas_badval,
            &self.bytes_read,
            &self.bytes_written,
            &self.total_connections,
            &self.rejected_connections,
        ]
    }
}

/// The totals at the last `stats reset` (zero before any).
#[derive(Default, Debug)]
pub struct Baseline {
    counters: Counters,
    total_items: AtomicU64,
    evictions: AtomicU64,
    reclaimed: AtomicU64,
    get_expired: AtomicU64,
    get_flushed: AtomicU64,
}

impl MulticoreEbb for Counters {
    type Root = Baseline;

    fn create_rep(_: &'static MulticoreRoot<Self>, _: CoreId) -> Result<Self, EbbError> {
        Ok(Counters::default())
    }
}

/// The counters Ebb.
pub type Stats = EbbRef<Multicore<Counters>>;

/// Sums one counter over every core, since the last `stats reset`.
pub fn total(stats: Stats, field: impl Fn(&Counters) -> &AtomicU64) -> u64 {
    let Ok(root) = Multicore::root(stats) else {
        return 0;
    };
    let sum = root
        .cores_with_reps()
        .filter_map(|core| root.rep_on(core))
        .map(|counters| field(counters).load(Ordering::Relaxed))
        .fold(0u64, u64::wrapping_add);
    sum.wrapping_sub(field(&root.shared().counters).load(Ordering::Relaxed))
}

/// The store's counters, its running counts since the last `stats reset`.
pub fn store_since_reset(stats: Stats, mut store: StoreStats) -> StoreStats {
    let Ok(root) = Multicore::root(stats) else {
        return store;
    };
    let base = root.shared();
    let since = |now: &mut u64, base: &AtomicU64| {
        *now = now.saturating_sub(base.load(Ordering::Relaxed));
    };
    since(&mut store.total_items, &base.total_items);
    since(&mut store.evictions, &base.evictions);
    since(&mut store.reclaimed, &base.reclaimed);
    since(&mut store.get_expired, &base.get_expired);
    since(&mut store.get_flushed, &base.get_flushed);
    store
}

/// `stats reset`: from now on, counters count from their current totals
/// (see the module documentation).
pub fn reset(stats: Stats, store: StoreStats) {
    let Ok(root) = Multicore::root(stats) else {
        return;
    };
    let base = root.shared();
    let mut sums = [0u64; 24];
    for counters in root.cores_with_reps().filter_map(|core| root.rep_on(core)) {
        for (sum, counter) in sums.iter_mut().zip(counters.resettable()) {
            *sum = sum.wrapping_add(counter.load(Ordering::Relaxed));
        }
    }
    for (sum, counter) in sums.iter().zip(base.counters.resettable()) {
        counter.store(*sum, Ordering::Relaxed);
    }
    // `stats` adds memcached's listening connection to `total_connections`;
    // a reset zeroes memcached's count, listener included.
    Counters::add(&base.counters.total_connections, 1);
    base.total_items.store(store.total_items, Ordering::Relaxed);
    base.evictions.store(store.evictions, Ordering::Relaxed);
    base.reclaimed.store(store.reclaimed, Ordering::Relaxed);
    base.get_expired.store(store.get_expired, Ordering::Relaxed);
    base.get_flushed.store(store.get_flushed, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_reset_resets_every_counter_but_curr_connections() {
        // `Counters` is all `AtomicU64`s: a counter added without adding it
        // to `resettable` (or to the exceptions here) fails this count.
        let counters = Counters::default();
        let fields = core::mem::size_of::<Counters>() / core::mem::size_of::<AtomicU64>();
        let kept_across_reset = 1; // curr_connections
        assert_eq!(counters.resettable().len() + kept_across_reset, fields);
    }
}
