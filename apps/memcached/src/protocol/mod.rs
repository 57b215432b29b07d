//! The three request protocols. Each handler takes the bytes received so
//! far on a connection, handles the first complete request, appends its
//! reply to `out`, and says how many bytes it consumed.
//!
//! Binary requests start with the magic byte 0x80; anything else is the
//! text protocol, which also carries the meta commands (`mg`, `ms`, `md`,
//! `ma`, `mn`, `me`). As memcached does, a connection's protocol is fixed
//! by its first byte.

pub mod binary;
pub mod common;
pub mod meta;
mod stat_lists;
pub mod text;

use ebb_iobuf::{IoBuf, IoChain};
use ebb_mem::size_class::footprint;

use crate::stats::{Counters, Stats};
use crate::watch::Site;
use crate::{Settings, Store};

/// What a handler did with the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// One request handled; this many bytes consumed.
    Consumed(usize),
    /// The first request is not complete yet: wait for more bytes.
    Incomplete,
    /// Close the connection after sending `out` (quit, or an error after
    /// which memcached closes).
    Close,
    /// One request handled in `consumed` bytes, and the `discard` bytes
    /// after them are to be thrown away, whether they have arrived yet or
    /// not (memcached's "swallow": the data block of a refused store),
    /// without ever buffering them.
    Discard {
        /// Bytes of the request itself.
        consumed: usize,
        /// Bytes after it to throw away.
        discard: usize,
    },
}

/// What a handler may use.
pub struct Context<'a> {
    /// The shared store.
    pub store: &'a Store,
    /// Server settings.
    pub settings: &'a Settings,
    /// This core's counters.
    pub counters: &'a Counters,
    /// Every core's counters (for `stats`).
    pub stats: Stats,
    /// Unix time now, in seconds.
    pub now: u32,
    /// Unix time the server started.
    pub started: u32,
    /// Connections now, server-wide.
    pub connections: u64,
    /// Where the request came from, for `watch` lines.
    pub site: Site,
    /// Set by `watch`: the connection becomes a watcher of these streams
    /// (see `watch.rs`) and answers `OK`, or refuses past the limit.
    pub watch: Option<u8>,
    /// Set by a handler answering `Outcome::Incomplete` once it knows how
    /// many bytes the unfinished request takes in all (a storage command's
    /// line gives its data length); 0 otherwise. The connection then
    /// gathers the request into one buffer of that size as it arrives.
    pub expected: usize,
    /// Bytes of the store's memory limit held for the unfinished request's
    /// value ([`Context::reserve_value`]), carried by the connection from
    /// call to call until the value has arrived or the connection ends.
    pub reserved: usize,
    /// Whether `reserved` holds a value passing through to another node
    /// ([`Context::reserve_in_transit`]), not one to store here.
    pub reserved_in_transit: bool,
    /// Set by the connection for the one request it gathered into a
    /// buffer of its own as it arrived (see `expected`): that buffer's
    /// capacity, and the request is the first in the input; 0 otherwise.
    pub gathered: usize,
}

impl Context<'_> {
    /// Holds `bytes` of the memory limit for the value of the unfinished
    /// request (once per request: later calls find it held), as memcached
    /// allocates an item before reading its value. False: the values
    /// still arriving on all connections fill the limit, and the caller
    /// refuses the store as out of memory and swallows the value.
    pub fn reserve_value(&mut self, bytes: usize) -> bool {
        if self.reserved > 0 {
            return true;
        }
        if !self.store.reserve(bytes, self.now) {
            return false;
        }
        self.reserved = bytes;
        true
    }

    /// As [`Context::reserve_value`], for a value on its way to another
    /// node ([`Store::reserve_in_transit`]: nothing here is evicted).
    pub fn reserve_in_transit(&mut self, bytes: usize) -> bool {
        if self.reserved > 0 {
            return true;
        }
        if !self.store.reserve_in_transit(bytes) {
            return false;
        }
        self.reserved = bytes;
        self.reserved_in_transit = true;
        true
    }

    /// Gives back what [`Context::reserve_value`] (or
    /// [`Context::reserve_in_transit`]) held: the value has arrived (it is
    /// about to be charged as an item, or forwarded) or never will.
    pub fn release_value(&mut self) {
        if self.reserved > 0 {
            if self.reserved_in_transit {
                self.store.release_in_transit(self.reserved);
            } else {
                self.store.release(self.reserved);
            }
            self.reserved = 0;
        }
        self.reserved_in_transit = false;
    }

    /// Logs, when anyone watches `fetchers`, the lookup memcached makes of
    /// `key` before a command changes it (its `do_item_get`, which logs
    /// every lookup: delete, incr/decr, `md`, `ma` and binary ones too).
    pub fn log_lookup(&self, key: &[u8]) {
        if crate::watch::WATCHERS.active() {
            // Without an LRU bump: watching must not change the item
            // (memcached's lookups for delete and arithmetic do not bump).
            let size = self
                .store
                .fetch(key, self.now, false, |item, _| item.value.len());
            crate::watch::WATCHERS.item_get(self.site, key, size);
        }
    }

    /// Copies a value out of the receive buffers into its own allocation,
    /// the one allocation a store makes whose size the client chooses. If
    /// the allocator has no memory for it, evicts one item and tries once
    /// more, as memcached's `do_item_alloc` pulls from the LRU tail before
    /// giving up; `None` then means "out of memory" (the caller answers
    /// it, counts it and carries on: the server never aborts for it).
    ///
    /// A value of a request the connection gathered into one buffer of
    /// about the value's size (`gathered`) is not copied: the item keeps a
    /// view of that buffer, as memcached reads a value straight into its
    /// item (issue 15, defect 10: the copy of a 1 MB value was a fifth of
    /// an evicting `set`'s time). Only when the buffer's allocation takes
    /// what the value's own would ([`footprint`]), so that the item's
    /// charge ([`Store::cost`]) is still what it holds.
    pub fn copy_value(&self, value: &IoChain) -> Option<IoBuf> {
        if let Some(view) = self.gathered_value(value) {
            return Some(view);
        }
        value.try_to_iobuf().ok().or_else(|| {
            self.store.evict_for_allocation(self.now);
            value.try_to_iobuf().ok()
        })
    }

    /// `value` as a view of the buffer its request was gathered in, if
    /// that buffer costs what a copy would (see [`Context::copy_value`]).
    fn gathered_value(&self, value: &IoChain) -> Option<IoBuf> {
        let same_cost = footprint(self.gathered, 1) == footprint(value.len(), 1);
        if self.gathered == 0 || value.is_empty() || !same_cost {
            return None;
        }
        match value.segment_count() {
            1 => value.segments().next().cloned(),
            _ => None,
        }
    }
}

/// Which protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Text, including meta commands.
    Text,
    /// Binary.
    Binary,
}

impl Protocol {
    /// The protocol of a connection whose first byte is `first`.
    pub fn detect(first: u8) -> Protocol {
        if first == binary::REQUEST_MAGIC {
            Protocol::Binary
        } else {
            Protocol::Text
        }
    }

    /// Handles the first request in `input`.
    pub fn handle(self, input: &IoChain, ctx: &mut Context<'_>, out: &mut IoChain) -> Outcome {
        match self {
            Protocol::Text => text::handle(input, ctx, out),
            Protocol::Binary => binary::handle(input, ctx, out),
        }
    }
}
