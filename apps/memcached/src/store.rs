//! The item store: key → item, shared by every core, and the one place
//! that decides what a store command does.
//!
//! Every core reads the table without locks (an RCU hash map from
//! `ebb-event`); writers lock one stripe of buckets. LRU bookkeeping is a
//! per-item last-access time that a read updates only when it is more than
//! a second old, so reads of hot keys do not all write the same cache line;
//! eviction samples a few items and evicts the least recently used one
//! (approximated LRU, as Redis does), which needs no shared list that every
//! read would have to relink.
//!
//! Semantics follow memcached 1.6: expiry times up to 30 days are relative,
//! larger ones are Unix times, negative ones mean "already expired";
//! `flush_all` invalidates items stored at or before its time; every
//! successful store gets a fresh CAS value. As in memcached's
//! `do_item_get`, any lookup (get, store, delete, incr, touch) that finds a
//! flushed or expired item removes it and counts it once, as `get_flushed`
//! or `get_expired` (flushed is checked first).
//!
//! # Store outcomes
//!
//! [`Store::set`] (set, add, replace, append, prepend, cas) and
//! [`Store::add_delta`] (incr, decr) decide every outcome; the text, meta
//! and binary protocols only translate it into their replies. They follow
//! memcached 1.6.18's `do_store_item` and `do_add_delta`:
//! * `Cas` stores only if the client's CAS value is not 0 and equals the
//!   item's; append and prepend given a CAS value (binary, meta) refuse a
//!   different one with `Exists`; the other modes ignore it.
//! * With CAS disabled (`-C`) the client's CAS value is 0 and so is every
//!   item's, as memcached's `ITEM_set_cas` and `ITEM_get_cas` do there.
//! * Append and prepend keep the old item's flags and expiry.
//!
//! # The size rule
//!
//! An item is measured as memcached's slab allocator measures it
//! (`ITEM_ntotal`, [`item_size`]): a 48-byte header, the key and its NUL,
//! 4 bytes of client flags unless they are 0, 8 bytes of CAS value unless
//! CAS is disabled, and the data with its CRLF. With the data excluding
//! that CRLF:
//!
//! `size = 48 + (key + 1) + (flags ≠ 0 ? 4 : 0) + (CAS ? 8 : 0) + (data + 2)`
//!
//! and an item is refused as too large when `size > -I` (memcached's
//! `item_size_ok`), and as not fitting in memory when `size > -m`. The
//! same size is what `stats bytes` adds up; what an item is charged
//! against `-m` is its real cost (the next section). The protocols apply the rule ([`Store::admit`]) before
//! they read a value, as memcached's `item_alloc` does, and [`Store::set`]
//! applies it again to what it is about to store, including the joined
//! value of an append or prepend. Where an older version of this server
//! had three rules (value ≤ `-I`; memcached's formula; formula plus
//! `48 + key + value ≤ -m`), this is memcached 1.6.18's, checked against
//! the real server (`tests/differential.rs`): with `-I 1k` a one-byte key
//! with flags 0 takes at most 964 bytes of data.
//!
//! What a refused store does, as memcached 1.6.18 does it: a value too
//! large for `-I` is answered with the protocol's "too large" error (its
//! data is read and thrown away); an append or prepend whose joined value
//! would be too large is `NotStored`.
//!
//! # Memory budget
//!
//! memcached's `ITEM_ntotal` is what an item takes in memcached's slabs,
//! not in ours: a 10-byte value under a short key costs about 80 bytes
//! by that measure and about 150 here, so a store that evicted by it grew
//! to twice `-m` and more (issue 15). Eviction therefore keeps the sum of
//! every item's real cost ([`Store::cost`]) within `-m`: the allocations
//! an item holds, each rounded as the allocator rounds it
//! (`ebb_mem::size_class::footprint`): the table entry (key box pointer,
//! item, last access, chain link), the key, the value, and the three-word
//! header the value's buffer allocates when it is first shared (every
//! `get` shares it). Computing it from the allocator's size classes makes
//! the budget deterministic and testable, where measuring the
//! allocator's bytes in use would charge one core's buffers to another's
//! items.
//!
//! Not charged, and so a fixed overhead beyond `-m`: the table's buckets
//! (8 bytes per 256 bytes of `-m`, 3%), connections and their receive
//! and reply buffers, entries replaced or evicted but not yet freed
//! (freed after an RCU grace period, a few milliseconds), and the partly
//! used slab of each size class on each core (at most 44 × 64 KiB per
//! core), and the freed large regions `ebb-mem` keeps for reuse (at most
//! 16 MiB). `tests/memory_budget.rs` bounds the peak RSS by `-m` × 1.2, the
//! idle process's RSS and 4 MiB for those.

mod commands;
mod crawler;
#[cfg(test)]
mod tests;

use alloc::boxed::Box;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ebb_event::rcu::try_read;
use ebb_event::rcu_map::{MapUpdate, RcuHashMap};
use ebb_iobuf::IoBuf;
use ebb_mem::size_class::footprint;

use crate::Settings;

pub use commands::{Delta, NewItem};
pub use crawler::ItemMeta;

/// memcached's boundary between relative and absolute expiry times.
pub const RELATIVE_EXPIRY_MAX: i64 = 60 * 60 * 24 * 30;

/// memcached's `sizeof(item)` on 64-bit systems: the header every item
/// carries before its key and data.
pub const ITEM_OVERHEAD: usize = 48;

/// A stored item. Cloning it clones a reference to the value (no copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Item {
    /// The client's opaque flags.
    pub flags: u32,
    /// Unix time it expires at; 0: never.
    pub expires: u32,
    /// Compare-and-swap value.
    pub cas: u64,
    /// When it was stored (Unix time), for `flush_all`.
    pub stored: u32,
    /// The data.
    pub value: IoBuf,
    /// Invalidated by meta delete's `I` (memcached's `ITEM_STALE`): still
    /// served, flagged `X`, and its first meta get wins the right to
    /// recache it (`W`).
    pub stale: bool,
}

/// How a store command treats an existing item (memcached's `NREAD_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetMode {
    /// Store unconditionally.
    Set,
    /// Store only if absent.
    Add,
    /// Store only if present.
    Replace,
    /// Add the data after the existing value (flags and expiry kept).
    Append,
    /// Add the data before the existing value.
    Prepend,
    /// Store only if present with the client's CAS value.
    Cas,
}

/// What a store command did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetResult {
    /// Stored, with its new CAS value.
    Stored(u64),
    /// The mode's condition failed (add of a present key, replace/append of
    /// an absent one, an append or prepend whose joined value is too large).
    NotStored,
    /// A CAS value was given and the item has a different one.
    Exists,
    /// `cas` found no item.
    NotFound,
    /// The item is larger than `-I` allows.
    TooLarge,
    /// The item is larger than `-m`.
    OutOfMemory,
}

/// Why an item cannot be stored at all (memcached's failed `item_alloc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Larger than `-I` allows.
    TooLarge,
    /// Larger than `-m`.
    NoMemory,
}

/// What a delete did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteResult {
    /// Removed.
    Deleted,
    /// No such item.
    NotFound,
    /// The CAS value given did not match.
    Exists,
}

/// Why incr/decr failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithError {
    /// No such item.
    NotFound,
    /// The value is not a decimal number below 2^64.
    NonNumeric,
    /// A CAS value was given and differs.
    Exists,
}

/// What an `update` closure decides.
pub enum Update<R> {
    /// Leave the item as it is.
    Keep(R),
    /// Store this item as a new one (its `cas` and `stored` are assigned by
    /// the store; counted in `total_items`, as memcached links a new item).
    Put(Item, R),
    /// Change the item in place (memcached's in-place incr/decr, meta
    /// delete's invalidation): like `Put`, with a new CAS value, but not a
    /// new item, so not counted in `total_items`. It stays fetched if it
    /// was, and keeps its win token unless it becomes stale (meta delete's
    /// `I` hands the token out again).
    Modify(Item, R),
    /// Store a new item whose win token is already given out (meta get's
    /// `N` creating an item: the creator wins).
    PutWon(Item, R),
    /// Remove the item.
    Remove(R),
}

/// Counters the `stats` command reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Items now.
    pub curr_items: u64,
    /// Items ever stored.
    pub total_items: u64,
    /// Bytes of items now ([`item_size`] of every item).
    pub bytes: u64,
    /// Live items evicted to make room.
    pub evictions: u64,
    /// Dead (expired or flushed) items removed to make room.
    pub reclaimed: u64,
    /// Expired items found by a lookup.
    pub get_expired: u64,
    /// Flushed items found by a lookup.
    pub get_flushed: u64,
}

/// Converts a client's expiry time to a Unix time (0: never).
pub fn expiry(exptime: i64, now: u32) -> u32 {
    if exptime == 0 {
        0
    } else if exptime < 0 {
        // Already expired.
        1
    } else if exptime > RELATIVE_EXPIRY_MAX {
        u32::try_from(exptime).unwrap_or(u32::MAX).max(1)
    } else {
        now.saturating_add(u32::try_from(exptime).unwrap_or(u32::MAX))
    }
}

/// The size rule's measure of an item (memcached's `ITEM_ntotal`; see the
/// module documentation): header, key and its NUL, the flags if not zero,
/// the CAS value if enabled, and the data with its CRLF.
pub fn item_size(key_len: usize, flags: u32, value_len: usize, cas_enabled: bool) -> usize {
    let suffix = if flags == 0 { 0 } else { 4 };
    let cas = if cas_enabled { 8 } else { 0 };
    ITEM_OVERHEAD
        .saturating_add(key_len + 1 + suffix + cas)
        .saturating_add(value_len)
        .saturating_add(2)
}

/// Why a lookup found no live item where there is an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dead {
    /// Invalidated by `flush_all`.
    Flushed,
    /// Past its expiry time.
    Expired,
}

/// What an item is counted as: its size by memcached's measure (`stats
/// bytes`) and its real cost (the memory budget).
#[derive(Clone, Copy, Debug)]
struct Charge {
    size: u64,
    cost: u64,
}

/// What the table holds per key.
struct Entry {
    item: Item,
    /// Unix time of the last write, or of a read after the first (for LRU
    /// eviction and meta get's `l`): as memcached's `do_item_bump`, one
    /// fetch only marks the item fetched, the next ones bump its time.
    last_access: AtomicU32,
    /// Fetched since it was stored (memcached's `ITEM_FETCHED`, meta get's
    /// `h`).
    fetched: AtomicBool,
    /// A meta get was told it won the right to recache this item
    /// (memcached's `ITEM_TOKEN_SENT`): later ones are told `Z`.
    token_sent: AtomicBool,
    /// Read since eviction last sampled it: a second chance (the CLOCK
    /// algorithm's reference bit). `last_access` has one-second steps, so
    /// within a second an item read all along and one never read look the
    /// same age; this bit keeps the read one, as memcached's segmented LRU
    /// keeps active items out of the cold tail.
    referenced: AtomicBool,
}

impl Entry {
    fn new(item: Item, now: u32) -> Self {
        Entry {
            item,
            last_access: AtomicU32::new(now),
            fetched: AtomicBool::new(false),
            token_sent: AtomicBool::new(false),
            referenced: AtomicBool::new(false),
        }
    }

    /// A fetch's LRU bump (memcached's `do_item_bump`): the first marks
    /// the item fetched; later ones record the time (written only when it
    /// changed, so hot keys do not bounce a cache line).
    fn bump(&self, now: u32) {
        if !self.referenced.load(Ordering::Relaxed) {
            self.referenced.store(true, Ordering::Relaxed);
        }
        if !self.fetched.load(Ordering::Relaxed) {
            self.fetched.store(true, Ordering::Relaxed);
        } else if self.last_access.load(Ordering::Relaxed) != now {
            self.last_access.store(now, Ordering::Relaxed);
        }
    }
}

/// What meta get reads of an item besides the item itself, as it was
/// before this fetch's bump (memcached reads them under the item lock
/// and bumps afterwards).
pub struct Marks<'a> {
    entry: &'a Entry,
}

impl Marks<'_> {
    /// Fetched before (meta get's `h`).
    pub fn fetched(&self) -> bool {
        self.entry.fetched.load(Ordering::Relaxed)
    }

    /// Unix time of the last access as the LRU records it (meta get's `l`).
    pub fn last_access(&self) -> u32 {
        self.entry.last_access.load(Ordering::Relaxed)
    }

    /// A win token was already handed out (meta get's `Z`).
    pub fn token_sent(&self) -> bool {
        self.entry.token_sent.load(Ordering::Relaxed)
    }

    /// Takes the win token: `true` for the one caller that gets it (two
    /// cores racing for a stale item cannot both win).
    pub fn claim_token(&self) -> bool {
        !self.entry.token_sent.swap(true, Ordering::Relaxed)
    }
}

/// Where an entry's new item comes from (which marks it inherits).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A new item ([`Update::Put`]).
    New,
    /// A new item whose win token is given out ([`Update::PutWon`]).
    Won,
    /// The old item changed in place ([`Update::Modify`]).
    Modified,
}

/// Sets the marks of `entry`, which replaces `old`, as memcached's item
/// flags carry over: an item changed in place stays fetched and keeps its
/// win token unless it becomes stale (meta delete's `I` hands it out
/// again); a stale item stored over a stale one (meta set's `I` with an
/// older CAS value, memcached's `CAS_STALE`) keeps the token; the creator
/// of a [`Update::PutWon`] item holds it.
fn inherit_marks(entry: &Entry, old: Option<&Entry>, origin: Origin) {
    let old_token = old.is_some_and(|old| old.token_sent.load(Ordering::Relaxed));
    let token = match origin {
        Origin::Won => true,
        Origin::New => entry.item.stale && old_token,
        Origin::Modified => !entry.item.stale && old_token,
    };
    entry.token_sent.store(token, Ordering::Relaxed);
    if origin == Origin::Modified {
        let fetched = old.is_some_and(|old| old.fetched.load(Ordering::Relaxed));
        entry.fetched.store(fetched, Ordering::Relaxed);
    }
}

/// An item's place in eviction order, lowest first: dead items (rank 0,
/// given by the caller), then items not read since eviction last sampled
/// them, then read ones, whose second chance (the CLOCK reference bit)
/// the sample uses up. Within each, the oldest `last_access` first, and
/// within one second items never fetched before fetched ones: memcached's
/// segmented LRU keeps fetched (active) items in its warm segment, out of
/// the cold tail, and `last_access`'s one-second steps alone would tie a
/// key read a moment ago with every item a fast fill wrote in that second.
fn eviction_rank(entry: &Entry) -> u64 {
    // Written only when set, so sampling does not bounce the cache lines
    // of entries nobody reads.
    let referenced = entry.referenced.load(Ordering::Relaxed);
    if referenced {
        entry.referenced.store(false, Ordering::Relaxed);
    }
    let fetched = entry.fetched.load(Ordering::Relaxed);
    let rank = (u64::from(entry.last_access.load(Ordering::Relaxed)) << 1) | u64::from(fetched);
    if referenced {
        rank | REFERENCED_RANK
    } else {
        rank
    }
}

/// The rank bit of items read since they were last sampled
/// ([`eviction_rank`]): above any `last_access << 1 | fetched`.
const REFERENCED_RANK: u64 = 1 << 33;

/// How many items eviction looks at to pick the least recently used.
const EVICTION_SAMPLE: usize = 16;

/// How many buckets eviction scans at most for one victim once it has
/// seen an item. The table has a bucket per 256 bytes of `-m`, so with
/// large items it is sparse (with `-m 1024` and 1 MB values, 4 M buckets
/// for 1,000 items): a sample of 16 would scan 64 K buckets per victim,
/// milliseconds per evicting set (issue 15, defect 10). With this bound a
/// sparse table's sample is smaller, which matters little there: few
/// large items, each evicted one frees much. Samples resume where the last
/// stopped, so over a sweep of the table each bucket is read about once.
const EVICTION_SCAN: usize = 4096;

/// How many eviction attempts in a row may free nothing (their victim was
/// replaced or removed by another core meanwhile) before a store gives up.
/// Attempts that free something do not count: a large item stored over
/// small ones evicts as many as it takes to fit (a fixed count let 1 MB
/// values over tiny items grow the store past `-m` without limit).
const EVICTION_FUTILE_ATTEMPTS: usize = 64;

/// A counter of charges read as the signed sum it is. Charges are added
/// and taken off after the map's bucket lock is released, so a removal on
/// one core can land before the matching addition on another: the sum then
/// dips below zero for a moment, which unsigned arithmetic would read as
/// about 2⁶⁴ (every store over budget, `stats bytes` absurd).
fn not_below_zero(counter: u64) -> u64 {
    if counter > i64::MAX as u64 {
        0
    } else {
        counter
    }
}

/// The high bits of a CAS value that name the node that handed it out,
/// on a node of several ([`Store::number_cas_for_node`]); the low 48
/// count, which at a million stores a second lasts nine years.
pub const CAS_NODE_BITS: u32 = 16;

/// The store. Thread-safe; shared by all cores.
pub struct Store {
    map: RcuHashMap<Box<[u8]>, Entry>,
    /// `-m`, changed at run time by `cache_memlimit`.
    memory_limit: AtomicUsize,
    item_size_max: usize,
    cas_enabled: bool,
    next_cas: AtomicU64,
    /// `flush_all` with a delay: items stored at or before this Unix time
    /// are invalid once it has come (memcached's `oldest_live`); 0: none.
    oldest_live: AtomicU64,
    /// `flush_all` now: items with a CAS value up to this are invalid
    /// (memcached's `oldest_cas`, so that sets in the same second as the
    /// flush survive it).
    oldest_cas: AtomicU64,
    bytes: AtomicU64,
    /// Sum of every item's [`Store::cost`]: what eviction keeps within
    /// `memory_limit`.
    cost: AtomicU64,
    total_items: AtomicU64,
    evictions: AtomicU64,
    reclaimed: AtomicU64,
    get_expired: AtomicU64,
    get_flushed: AtomicU64,
    /// Bytes reserved for values still arriving ([`Store::reserve`]),
    /// also counted in `cost`.
    reserved: AtomicU64,
    /// Where the next eviction sample starts.
    sample_cursor: AtomicUsize,
    /// Buckets read by eviction samples so far.
    buckets_scanned: AtomicU64,
}

impl Store {
    /// An empty store for `memory_limit` bytes of items, each at most
    /// `item_size_max` bytes as the size rule measures them, with CAS
    /// enabled. The table has a bucket per 256 bytes of memory limit
    /// (short chains for small items, no resizing).
    pub fn new(memory_limit: usize, item_size_max: usize) -> Self {
        Store {
            map: RcuHashMap::with_buckets((memory_limit / 256).clamp(1024, 1 << 24)),
            memory_limit: AtomicUsize::new(memory_limit),
            item_size_max,
            cas_enabled: true,
            next_cas: AtomicU64::new(1),
            oldest_live: AtomicU64::new(0),
            oldest_cas: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            cost: AtomicU64::new(0),
            total_items: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            reclaimed: AtomicU64::new(0),
            get_expired: AtomicU64::new(0),
            get_flushed: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            sample_cursor: AtomicUsize::new(0),
            buckets_scanned: AtomicU64::new(0),
        }
    }

    /// Reserves `bytes` of the memory limit for a value that is still
    /// arriving, evicting items to make room, as memcached allocates a
    /// `set`'s item (from `-m`) when it reads the command line and then
    /// reads the value into it. False, reserving nothing, when the values
    /// still arriving already hold so much of the limit that this one
    /// cannot fit whatever is evicted: memcached's `item_alloc` fails then
    /// too (the items being filled cannot be evicted), and the caller
    /// answers `SERVER_ERROR out of memory storing object`. So many slow
    /// uploads cannot grow the server past `-m`, however many connections
    /// send them. Undone by [`Store::release`].
    pub fn reserve(&self, bytes: usize, now: u32) -> bool {
        if !self.hold_arriving(bytes) {
            return false;
        }
        self.cost.fetch_add(bytes as u64, Ordering::Relaxed);
        self.evict(&[], now);
        true
    }

    /// Adds `bytes` to the values on their way unless that would take
    /// them past `-m`; whether it did.
    fn hold_arriving(&self, bytes: usize) -> bool {
        let bytes = bytes as u64;
        let limit = self.memory_limit() as u64;
        let before = self.reserved.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > limit {
            self.reserved.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Gives back a reservation of [`Store::reserve`] (the value arrived
    /// and is about to be stored, charged as an item, or it never will).
    pub fn release(&self, bytes: usize) {
        let bytes = bytes as u64;
        self.reserved.fetch_sub(bytes, Ordering::Relaxed);
        self.cost.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Holds `bytes` for a value passing through this node to another
    /// (a store forwarded to its key's owner): counted with the values
    /// arriving and refused past `-m` as [`Store::reserve`] is, but
    /// without evicting. Such a value leaves a round trip later, and an
    /// eviction is for good: on a full cache, evicting for every value
    /// that passes through would cost the node as many of its own bytes
    /// each time. The node's memory is then at most `-m` of items plus
    /// `-m` on its way. Undone by [`Store::release_in_transit`].
    pub fn reserve_in_transit(&self, bytes: usize) -> bool {
        self.hold_arriving(bytes)
    }

    /// Gives back a reservation of [`Store::reserve_in_transit`].
    pub fn release_in_transit(&self, bytes: usize) {
        self.reserved.fetch_sub(bytes as u64, Ordering::Relaxed);
    }

    /// Bytes reserved for values still arriving.
    pub fn reserved(&self) -> u64 {
        not_below_zero(self.reserved.load(Ordering::Relaxed))
    }

    /// The store `settings` ask for: `-m`, `-I` and `-C`.
    pub fn from_settings(settings: &Settings) -> Self {
        Store {
            cas_enabled: !settings.cas_disabled,
            ..Store::new(settings.memory_limit, settings.item_size_max)
        }
    }

    /// The largest item accepted (`-I`).
    pub fn item_size_max(&self) -> usize {
        self.item_size_max
    }

    /// The memory limit (`-m`), in bytes.
    pub fn memory_limit(&self) -> usize {
        self.memory_limit.load(Ordering::Relaxed)
    }

    /// `cache_memlimit`: a new memory limit, in bytes. A lower one than
    /// the items now use is reached by evicting on the next stores, as
    /// memcached's slab rebalancer frees pages over time.
    pub fn set_memory_limit(&self, bytes: usize) {
        self.memory_limit.store(bytes, Ordering::Relaxed);
    }

    /// Whether items have CAS values (not `-C`).
    pub fn cas_enabled(&self) -> bool {
        self.cas_enabled
    }

    /// The CAS value clients see for `cas` (0 with CAS disabled).
    pub fn shown_cas(&self, cas: u64) -> u64 {
        if self.cas_enabled {
            cas
        } else {
            0
        }
    }

    /// Buckets read by eviction samples so far (what a sample costs on a
    /// sparse table).
    pub fn buckets_scanned(&self) -> u64 {
        self.buckets_scanned.load(Ordering::Relaxed)
    }

    /// Buckets in the table (a power of two), for `stats hash_*`.
    pub fn buckets(&self) -> usize {
        self.map.bucket_count()
    }

    /// The size rule's measure of an item in this store.
    pub fn item_size(&self, key_len: usize, flags: u32, value_len: usize) -> usize {
        item_size(key_len, flags, value_len, self.cas_enabled)
    }

    /// The size rule (see the module documentation): whether an item with
    /// this key, flags and `value_len` bytes of data can be stored at all.
    pub fn admit(&self, key_len: usize, flags: u32, value_len: usize) -> Result<(), Refused> {
        let size = self.item_size(key_len, flags, value_len);
        if size > self.item_size_max {
            Err(Refused::TooLarge)
        } else if size > self.memory_limit() {
            Err(Refused::NoMemory)
        } else {
            Ok(())
        }
    }

    fn charge(&self, key: &[u8], item: &Item) -> Charge {
        let size = self.item_size(key.len(), item.flags, item.value.len());
        Charge {
            size: u64::try_from(size).unwrap_or(u64::MAX),
            cost: u64::try_from(Store::cost(key.len(), item.value.len())).unwrap_or(u64::MAX),
        }
    }

    /// What an item with a `key_len`-byte key and `value_len` bytes of data
    /// really takes from memory (see "Memory budget" in the module
    /// documentation): its allocations as the allocator rounds them.
    pub fn cost(key_len: usize, value_len: usize) -> usize {
        let entry = RcuHashMap::<Box<[u8]>, Entry>::ENTRY_LAYOUT;
        let value = if value_len == 0 {
            0
        } else {
            // The buffer, and the header (pointer, capacity, reference
            // count) its first clone allocates to share it.
            footprint(value_len, 1) + footprint(3 * size_of::<usize>(), align_of::<usize>())
        };
        footprint(entry.size(), entry.align()) + footprint(key_len, 1) + value
    }

    /// Adds `charge` to the counters; returns the new total cost.
    fn add_charge(&self, charge: Charge) -> u64 {
        self.bytes.fetch_add(charge.size, Ordering::Relaxed);
        not_below_zero(
            self.cost
                .fetch_add(charge.cost, Ordering::Relaxed)
                .wrapping_add(charge.cost),
        )
    }

    /// Takes `charge` off the counters.
    fn remove_charge(&self, charge: Charge) {
        self.bytes.fetch_sub(charge.size, Ordering::Relaxed);
        self.cost.fetch_sub(charge.cost, Ordering::Relaxed);
    }

    /// Whether the items' cost is over the memory limit.
    fn over_budget(&self) -> bool {
        not_below_zero(self.cost.load(Ordering::Relaxed)) > self.memory_limit() as u64
    }

    /// Why `item` is no longer live, if it is not: flushed first, then
    /// expired, in memcached's order.
    fn dead(&self, item: &Item, now: u32) -> Option<Dead> {
        let oldest_live = self.oldest_live.load(Ordering::Relaxed);
        let flushed_later = oldest_live != 0
            && u64::from(item.stored) <= oldest_live
            && oldest_live <= u64::from(now);
        let flushed_now = item.cas <= self.oldest_cas.load(Ordering::Relaxed);
        if flushed_later || flushed_now {
            Some(Dead::Flushed)
        } else if item.expires != 0 && item.expires <= now {
            Some(Dead::Expired)
        } else {
            None
        }
    }

    fn next_cas(&self) -> u64 {
        self.next_cas.fetch_add(1, Ordering::Relaxed)
    }

    /// Numbers every CAS value handed out from now on with `node` in its
    /// top [`CAS_NODE_BITS`] bits (`node` modulo 2^16), for a node of a
    /// cache of several (`docs/distributed-memcached.md`, "CAS values"):
    /// a key that moved to another node gets its new values from that
    /// node's range, so a client's CAS value from the old owner never
    /// matches there. Values stay increasing (never below what was handed
    /// out already), which `flush_all` relies on. A single memcached never
    /// calls it and numbers from 1, as memcached does.
    pub fn number_cas_for_node(&self, node: u32) {
        let node = u64::from(node) & ((1 << CAS_NODE_BITS) - 1);
        let first = (node << (64 - CAS_NODE_BITS)) | 1;
        self.next_cas.fetch_max(first, Ordering::Relaxed);
    }

    /// The live item under `key` (a reference to its value, not a copy).
    /// A dead item found is removed and counted.
    pub fn get(&self, key: &[u8], now: u32) -> Option<Item> {
        self.fetch(key, now, true, |item, _| item.clone())
    }

    /// Fetches the live item under `key` for meta get: `read` sees it and
    /// its [`Marks`] as they were before this fetch, then the fetch bumps
    /// it unless `bump` is false (meta get's `u`). A dead item found is
    /// removed and counted.
    pub fn fetch<R>(
        &self,
        key: &[u8],
        now: u32,
        bump: bool,
        read: impl FnOnce(&Item, &Marks<'_>) -> R,
    ) -> Option<R> {
        let mut read = Some(read);
        let mut found = |entry: Option<&Entry>| {
            let entry = entry?;
            if self.dead(&entry.item, now).is_some() {
                return Some(None);
            }
            let result = read.take().map(|read| read(&entry.item, &Marks { entry }));
            if bump {
                entry.bump(now);
            }
            Some(result)
        };
        let outcome = match try_read(|guard| found(self.map.get(key, guard))) {
            Some(outcome) => outcome,
            None => self.map.read_locked(key, &mut found),
        };
        match outcome? {
            Some(result) => Some(result),
            None => {
                // Only dead items take the write path: removed (and
                // counted) once, as memcached unlinks them on lookup.
                self.update(key, now, |_| Update::Keep(()));
                None
            }
        }
    }

    /// Reads, and maybe replaces or removes, the item under `key` in one
    /// atomic step. `f` sees the live item (a dead one is removed and
    /// counted). Returns `f`'s result and, if an item was put, its new CAS
    /// value.
    pub fn update<R>(
        &self,
        key: &[u8],
        now: u32,
        f: impl FnOnce(Option<&Item>) -> Update<R>,
    ) -> (R, Option<u64>) {
        let (result, cas, dead) = self.apply(key, now, f);
        if let Some(dead) = dead {
            self.count_dead(dead);
        }
        (result, cas)
    }

    /// [`Store::update`] without counting the dead item it removes (which
    /// it returns).
    fn apply<R>(
        &self,
        key: &[u8],
        now: u32,
        f: impl FnOnce(Option<&Item>) -> Update<R>,
    ) -> (R, Option<u64>, Option<Dead>) {
        let mut added: Option<(Charge, bool)> = None;
        let mut removed: Option<Charge> = None;
        let mut dead = None;
        let (result, cas) = self.map.update(
            key,
            || Box::from(key),
            |current| {
                dead = current.and_then(|entry| self.dead(&entry.item, now));
                let live = current.filter(|_| dead.is_none());
                if let Some(old) = current {
                    removed = Some(self.charge(key, &old.item));
                }
                let (mut item, origin, result) = match f(live.map(|entry| &entry.item)) {
                    Update::Keep(result) if dead.is_some() => {
                        return MapUpdate::Remove((result, None))
                    }
                    Update::Keep(result) => {
                        removed = None;
                        return MapUpdate::Keep((result, None));
                    }
                    Update::Remove(result) => return MapUpdate::Remove((result, None)),
                    Update::Put(item, result) => (item, Origin::New, result),
                    Update::PutWon(item, result) => (item, Origin::Won, result),
                    Update::Modify(item, result) => (item, Origin::Modified, result),
                };
                let cas = self.next_cas();
                item.cas = cas;
                item.stored = now;
                added = Some((self.charge(key, &item), origin != Origin::Modified));
                let entry = Entry::new(item, now);
                let old = live.filter(|_| origin != Origin::Won);
                inherit_marks(&entry, old, origin);
                MapUpdate::Put(entry, (result, Some(cas)))
            },
        );
        if let Some(charge) = removed {
            self.remove_charge(charge);
        }
        if let Some((charge, new)) = added {
            if new {
                self.total_items.fetch_add(1, Ordering::Relaxed);
            }
            if self.add_charge(charge) > self.memory_limit() as u64 {
                self.evict(key, now);
            }
        }
        (result, cas, dead)
    }

    /// Evicts least recently used items (never `keep`, the one just stored)
    /// until the store fits its memory limit again. Dead items go first and
    /// count as reclaimed, live ones as evictions (memcached's
    /// `lru_pull_tail`).
    fn evict(&self, keep: &[u8], now: u32) {
        let mut futile = 0;
        while futile < EVICTION_FUTILE_ATTEMPTS {
            if !self.over_budget() {
                return;
            }
            match self.evict_one(keep, now) {
                None => return,
                Some(true) => {}
                Some(false) => futile += 1,
            }
        }
    }

    /// Evicts the least recently used item of a sample, for a request whose
    /// allocation failed and will be retried once (memcached's
    /// `do_item_alloc` pulls from the LRU tail and tries again). False if
    /// the store had nothing to evict.
    pub fn evict_for_allocation(&self, now: u32) -> bool {
        self.evict_one(&[], now).is_some()
    }

    /// Removes one victim (never `keep`), counted as reclaimed if dead,
    /// else as an eviction: whether it was removed (another core may have
    /// replaced or removed it meanwhile), or `None` if there was no victim.
    fn evict_one(&self, keep: &[u8], now: u32) -> Option<bool> {
        let victim = self.pick_victim(keep, now)?;
        let (evicted, _, dead) = self.apply(&victim.0, now, |current| match current {
            Some(item) if item.cas == victim.1 => Update::Remove(true),
            _ => Update::Keep(false),
        });
        if dead.is_some() {
            self.reclaimed.fetch_add(1, Ordering::Relaxed);
        } else if evicted {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        Some(dead.is_some() || evicted)
    }

    /// The key and CAS of the least recently used of a sample of items.
    fn pick_victim(&self, keep: &[u8], now: u32) -> Option<(Box<[u8]>, u64)> {
        let buckets = self.map.bucket_count();
        let start = self.sample_cursor.load(Ordering::Relaxed);
        let mut best: Option<(u64, Box<[u8]>, u64)> = None;
        let seen = core::cell::Cell::new(0);
        let unread_seen = core::cell::Cell::new(false);
        // The map hands out `&K`, and `K` is `Box<[u8]>`.
        #[allow(clippy::borrowed_box)]
        let mut sample = |key: &Box<[u8]>, entry: &Entry| {
            if &**key != keep {
                seen.set(seen.get() + 1);
                let rank = if self.dead(&entry.item, now).is_none() {
                    eviction_rank(entry)
                } else {
                    0
                };
                if rank < REFERENCED_RANK {
                    unread_seen.set(true);
                }
                if best.as_ref().is_none_or(|(lowest, _, _)| rank < *lowest) {
                    best = Some((rank, key.clone(), entry.item.cas));
                }
            }
            seen.get() < EVICTION_SAMPLE
        };
        // One read section for the whole scan (entering one per bucket
        // cost more than reading the bucket). A sparse table's sample may
        // stop early, but not on read items alone: their second chance
        // was just used up, and the next unread item may be a bucket away.
        let mut read = 0;
        try_read(|guard| {
            while read < buckets {
                self.map
                    .for_each_in_bucket(start.wrapping_add(read), guard, &mut sample);
                read += 1;
                let enough = seen.get() >= EVICTION_SAMPLE;
                if enough || (read > EVICTION_SCAN && unread_seen.get()) {
                    break;
                }
            }
        });
        // The next sample starts where this one stopped (a clock hand): a
        // sample starting a fixed step further would walk again the run of
        // buckets this one's victims have just emptied, and on a sparse
        // table those runs grow with every eviction (issue 15, defect 10).
        // Racing cores may both sample a stretch; that only costs a read.
        self.sample_cursor
            .store(start.wrapping_add(read), Ordering::Relaxed);
        self.buckets_scanned
            .fetch_add(read as u64, Ordering::Relaxed);
        best.map(|(_, key, cas)| (key, cas))
    }

    /// Removes the entry under `key` whatever it holds, a live item or a
    /// dead one no lookup has removed yet (not counted as either); whether
    /// there was one. The cluster's sweep (`cluster/sweep.rs`) drops the
    /// keys a node gave away with it: a flushed item left in the table
    /// would come back to life should a later `flush_all` with a delay
    /// replace the flush that killed it.
    pub fn forget(&self, key: &[u8]) -> bool {
        let removed = self.map.update(
            key,
            || Box::from(key),
            |current| match current {
                Some(entry) => MapUpdate::Remove(Some(self.charge(key, &entry.item))),
                None => MapUpdate::Keep(None),
            },
        );
        match removed {
            Some(charge) => {
                self.remove_charge(charge);
                true
            }
            None => false,
        }
    }

    /// `delete`, optionally only if the CAS value matches.
    pub fn delete(&self, key: &[u8], cas: Option<u64>, now: u32) -> DeleteResult {
        self.update(key, now, |current| match (current, cas) {
            (None, _) => Update::Keep(DeleteResult::NotFound),
            (Some(item), Some(cas)) if item.cas != cas => Update::Keep(DeleteResult::Exists),
            (Some(_), _) => Update::Remove(DeleteResult::Deleted),
        })
        .0
    }

    /// Sets a new expiry time on a live item and returns it. The item keeps
    /// its CAS value, as in memcached. A dead item found is removed and
    /// counted.
    pub fn touch(&self, key: &[u8], expires: u32, now: u32) -> Option<Item> {
        let (touched, dead) = self.map.update(
            key,
            || Box::from(key),
            |current| {
                let Some(entry) = current else {
                    return MapUpdate::Keep((None, None));
                };
                if let Some(dead) = self.dead(&entry.item, now) {
                    let charged = self.charge(key, &entry.item);
                    return MapUpdate::Remove((None, Some((dead, charged))));
                }
                let mut item = entry.item.clone();
                item.expires = expires;
                // Touched in place in memcached: fetched (a touch is a
                // fetch), the win token kept.
                let touched = Entry::new(item.clone(), now);
                inherit_marks(&touched, Some(entry), Origin::Modified);
                touched.bump(now);
                MapUpdate::Put(touched, (Some(item), None))
            },
        );
        if let Some((dead, charge)) = dead {
            self.remove_charge(charge);
            self.count_dead(dead);
        }
        touched
    }

    fn count_dead(&self, dead: Dead) {
        let counter = match dead {
            Dead::Flushed => &self.get_flushed,
            Dead::Expired => &self.get_expired,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `flush_all`: with `at` (a Unix time in the future), every item
    /// stored before `at` becomes invalid when `at` comes; without, every
    /// item stored so far is invalid now.
    pub fn flush_all(&self, at: Option<u32>, now: u32) {
        match at {
            Some(at) if at > now => self.oldest_live.store(u64::from(at - 1), Ordering::Relaxed),
            _ => {
                // As memcached: a pending delayed flush becomes "now" too.
                self.oldest_live
                    .store(u64::from(now.saturating_sub(1)), Ordering::Relaxed);
                let newest = self.next_cas.load(Ordering::Relaxed).saturating_sub(1);
                self.oldest_cas.store(newest, Ordering::Relaxed);
            }
        }
    }

    /// Current counters. `curr_items` counts entries in the table, which
    /// includes expired and flushed items no lookup has found yet
    /// (memcached too reclaims lazily).
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            curr_items: self.map.len() as u64,
            total_items: self.total_items.load(Ordering::Relaxed),
            bytes: not_below_zero(self.bytes.load(Ordering::Relaxed)),
            evictions: self.evictions.load(Ordering::Relaxed),
            reclaimed: self.reclaimed.load(Ordering::Relaxed),
            get_expired: self.get_expired.load(Ordering::Relaxed),
            get_flushed: self.get_flushed.load(Ordering::Relaxed),
        }
    }
}
