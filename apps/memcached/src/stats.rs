//! Server-wide counters for the `stats` command, kept per core so that
//! counting never makes cores write the same cache line: a multicore Ebb
//! whose representatives are atomics written only by their own core
//! (relaxed stores), summed when `stats` asks.

use core::sync::atomic::{AtomicU64, Ordering};

use ebb_core::{CoreId, EbbError, EbbRef, Multicore, MulticoreEbb, MulticoreRoot};

use crate::store::{Refused, SetMode, SetResult};

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

impl MulticoreEbb for Counters {
    type Root = ();

    fn create_rep(_: &'static MulticoreRoot<Self>, _: CoreId) -> Result<Self, EbbError> {
        Ok(Counters::default())
    }
}

/// The counters Ebb.
pub type Stats = EbbRef<Multicore<Counters>>;

/// Sums one counter over every core.
pub fn total(stats: Stats, field: impl Fn(&Counters) -> &AtomicU64) -> u64 {
    let Ok(root) = Multicore::root(stats) else {
        return 0;
    };
    root.cores_with_reps()
        .filter_map(|core| root.rep_on(core))
        .map(|counters| field(counters).load(Ordering::Relaxed))
        .sum()
}
