//! A bounded trace of what TCP did, on the stack's clock, for tests that
//! assert the dynamics (cwnd per RTT, RTO doubling, Karn's rule, ACK
//! delays).

use alloc::vec::Vec;
use core::time::Duration;

use ebb_event::Instant;

use super::segment::Flags;
use super::seq::Seq;

/// One thing that happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// A segment was sent.
    Sent {
        /// SEG.SEQ.
        seq: Seq,
        /// SEG.ACK.
        ack: Seq,
        /// Data bytes.
        len: usize,
        /// Control bits.
        flags: Flags,
        /// The window field as sent (before scaling).
        window: u16,
        /// Whether the bytes were sent before.
        retransmission: bool,
    },
    /// A segment was accepted for processing.
    Received {
        /// SEG.SEQ.
        seq: Seq,
        /// Data bytes.
        len: usize,
    },
    /// cwnd or ssthresh changed.
    Cwnd {
        /// cwnd.
        cwnd: usize,
        /// ssthresh.
        ssthresh: usize,
    },
    /// An RTT measurement was taken (RFC 6298 §3).
    RttSample {
        /// The measurement.
        rtt: Duration,
        /// The RTO after it.
        rto: Duration,
    },
    /// The retransmission timer expired.
    Timeout {
        /// The RTO that expired.
        rto: Duration,
    },
    /// Three duplicate ACKs: fast retransmit (RFC 5681 §3.2).
    FastRetransmit {
        /// The retransmitted sequence number.
        seq: Seq,
        /// ssthresh after the reduction.
        ssthresh: usize,
    },
}

/// One trace entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// When.
    pub at: Instant,
    /// The connection's id.
    pub conn: u64,
    /// What.
    pub kind: TraceKind,
}

/// The trace: the first `capacity` events.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    pub(crate) events: Vec<TraceEvent>,
    pub(crate) capacity: usize,
}

impl Trace {
    pub(crate) fn record(&mut self, at: Instant, conn: u64, kind: TraceKind) {
        if self.events.len() < self.capacity {
            self.events.push(TraceEvent { at, conn, kind });
        }
    }
}
