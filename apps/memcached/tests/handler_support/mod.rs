//! Runs a protocol handler (text and meta, or binary) in-process, as a
//! connection does: requests handled one at a time from the bytes received
//! so far, checking the handler's contract on every call.
#![allow(dead_code)]

use ebb_core::{enter_core, CoreId, Multicore, Node};
use ebb_event::Instant;
use ebb_iobuf::{IoBuf, IoChain};
use memcached::protocol::{Context, Outcome, Protocol};
use memcached::stats::{Baseline, Counters, Stats};
use memcached::watch::Site;
use memcached::{Settings, Store};

/// The Unix time the handler is told it is.
pub const NOW: u32 = 1_700_000_000;

thread_local! {
    static STATS: Stats = {
        // Each test thread is core 0 of a node of its own, for the counters.
        let node = Node::standalone(1);
        std::mem::forget(enter_core(CoreId(0), node).expect("enter core"));
        Multicore::<Counters>::create(Baseline::default()).expect("counters")
    };
}

/// A server's state without the network.
pub struct Harness {
    protocol: Protocol,
    store: Store,
    settings: Settings,
    stats: Stats,
    /// What the unfinished request's value holds of the memory limit,
    /// carried from call to call as a connection carries it.
    reserved: std::cell::Cell<usize>,
}

/// What a run of the handler produced.
#[derive(Debug, PartialEq, Eq)]
pub struct Run {
    /// Every reply byte.
    pub out: Vec<u8>,
    /// Whether the handler asked to close the connection.
    pub closed: bool,
    /// Bytes left unconsumed.
    pub left: usize,
}

impl Harness {
    /// A fresh text-protocol server with a small store (64 KiB, values up
    /// to 4 KiB), so that limits are easy to reach.
    pub fn text() -> Harness {
        let settings = Settings {
            memory_limit: 64 << 10,
            item_size_max: 4 << 10,
            ..Settings::default()
        };
        Harness::with_settings(Protocol::Text, settings)
    }

    /// A fresh binary-protocol server with default settings.
    pub fn binary() -> Harness {
        Harness::with_settings(Protocol::Binary, Settings::default())
    }

    /// A fresh server speaking `protocol` with `settings`.
    pub fn with_settings(protocol: Protocol, settings: Settings) -> Harness {
        let stats = STATS.with(|stats| *stats);
        let store = Store::from_settings(&settings);
        // The thread's counters start from zero for every fresh server, so
        // that a `stats reset` in one run does not show in the next.
        memcached::stats::reset(stats, store.stats());
        Harness {
            protocol,
            store,
            settings,
            stats,
            reserved: std::cell::Cell::new(0),
        }
    }

    /// Handles every complete request in `input` (consuming them) and
    /// appends the replies to `out`, checking the handler's contract: it
    /// consumes at least one byte and never more than it was given, and
    /// appends nothing when it needs more bytes. `discarding` carries the
    /// bytes still to swallow from one call to the next, as a connection
    /// does. Returns whether it asked to close.
    pub fn drive(&self, input: &mut IoChain, out: &mut IoChain, discarding: &mut usize) -> bool {
        let counters = self.stats.get().expect("counters");
        let mut ctx = Context {
            store: &self.store,
            settings: &self.settings,
            counters,
            stats: self.stats,
            now: NOW,
            started: NOW - 100,
            connections: 1,
            site: Site {
                started: NOW - 100,
                started_mono: Instant(0),
                client: 1,
            },
            watch: None,
            expected: 0,
            reserved: self.reserved.get(),
            reserved_in_transit: false,
            gathered: 0,
        };
        loop {
            // Throw away what a refused store left to swallow.
            let now = (*discarding).min(input.len());
            input.trim_front(now).expect("trim");
            *discarding -= now;
            if input.is_empty() {
                return false;
            }
            let before = out.len();
            let outcome = self.protocol.handle(input, &mut ctx, out);
            if outcome != Outcome::Incomplete {
                ctx.release_value();
            }
            self.reserved.set(ctx.reserved);
            match outcome {
                Outcome::Consumed(n) => {
                    assert!(n > 0, "consumed nothing");
                    assert!(n <= input.len(), "consumed {n} of {} bytes", input.len());
                    input.trim_front(n).expect("trim");
                    // `watch`: the connection answers and starts watching;
                    // here the harness answers and goes on reading.
                    if ctx.watch.take().is_some() {
                        out.push_back(IoBuf::from_static(b"OK\r\n"));
                    }
                }
                Outcome::Incomplete => {
                    assert_eq!(out.len(), before, "replied to an incomplete request");
                    return false;
                }
                Outcome::Close => return true,
                Outcome::Discard { consumed, discard } => {
                    assert!(consumed > 0, "consumed nothing");
                    assert!(
                        consumed <= input.len(),
                        "consumed {consumed} of {} bytes",
                        input.len()
                    );
                    input.trim_front(consumed).expect("trim");
                    *discarding = discard;
                }
            }
        }
    }

    /// Delivers `chunks` one after another, handling requests after each
    /// (as a connection does), and stops at a close.
    pub fn deliver<'a>(&self, chunks: impl IntoIterator<Item = &'a [u8]>) -> Run {
        let mut input = IoChain::new();
        let mut out = IoChain::new();
        let mut closed = false;
        let mut discarding = 0;
        for chunk in chunks {
            if !chunk.is_empty() {
                input.push_back(IoBuf::copy_from_slice(chunk));
            }
            if self.drive(&mut input, &mut out, &mut discarding) {
                closed = true;
                break;
            }
        }
        Run {
            out: out.to_vec(),
            closed,
            left: input.len(),
        }
    }

    /// Delivers `stream` at once and returns the replies as text.
    pub fn run(&self, stream: &[u8]) -> String {
        String::from_utf8_lossy(&self.deliver([stream]).out).into_owned()
    }
}
