//! TCP (RFC 9293) for Ebbflow's own stack.
//!
//! Read first: RFC 9293 (the protocol; §3.10 is the event processing this
//! code follows step by step), RFC 6298 (retransmission timer), RFC 5681
//! and RFC 6582 (congestion control, NewReno), RFC 7323 §2 (window
//! scaling), RFC 5961 §3–4 (challenge ACKs for RST and SYN), RFC 1122
//! §4.2.3.2 (delayed ACKs).
//!
//! One job per file:
//!
//! * [`seq`]: sequence number arithmetic modulo 2^32.
//! * [`segment`]: parse and emit segments (smoltcp's `TcpPacket` view),
//!   options MSS and window scale.
//! * [`rto`]: RFC 6298 SRTT/RTTVAR/RTO with back-off.
//! * [`congestion`]: RFC 5681 + RFC 6582 NewReno.
//! * [`conn`]: one connection's transmission control block and the state
//!   machine of RFC 9293 §3.10 (`conn/input.rs`: segment arrival,
//!   `conn/output.rs`: sending, `conn/timers.rs`: timeouts).
//! * [`listener`]: listening ports with a bounded SYN backlog.
//! * [`table`]: the connection table of one stack: demultiplexing,
//!   RST for segments to nowhere, timers, events for the application;
//!   `flow_hash` is its keys' hash, `deadlines` the connections' timers
//!   ordered by when they are due.
//! * `ops`: the application's [`TcpConnection`](ebb_net::TcpConnection)
//!   handle and the delivery of events to its
//!   [`TcpHandler`](ebb_net::TcpHandler), run to completion.

pub mod congestion;
pub mod conn;
mod deadlines;
mod flow_hash;
pub mod listener;
pub(crate) mod ops;
pub mod rto;
pub mod segment;
pub mod seq;
pub mod table;
mod trace;

use core::time::Duration;

use ebb_core::CoreId;

pub use conn::{ConnInfo, State};
pub use seq::Seq;
pub use table::{TcpLayer, TcpStats};
pub use trace::{TraceEvent, TraceKind};

/// TCP settings of one stack.
#[derive(Clone, Copy, Debug)]
pub struct TcpConfig {
    /// The core the stack (and all its connections) lives on.
    pub core: CoreId,
    /// RTO before the first measurement (RFC 6298 §2.1: 1 s).
    pub initial_rto: Duration,
    /// Lower bound of the RTO (RFC 6298 §2.4: 1 s; smaller values are
    /// common and useful on fast links).
    pub min_rto: Duration,
    /// Upper bound of the RTO (RFC 6298 §2.5 allows 60 s or more).
    pub max_rto: Duration,
    /// Retransmissions of one segment before the connection is aborted
    /// (RFC 9293 §3.8.3, R2).
    pub max_retries: u32,
    /// Retransmissions of a SYN or SYN,ACK before giving up (RFC 9293
    /// §3.8.3: R2 for SYNs; Linux's default of 5 for SYN,ACKs keeps
    /// half-open connections from a SYN flood short-lived).
    pub max_syn_retries: u32,
    /// How long an ACK may be delayed (RFC 1122 §4.2.3.2: under 0.5 s);
    /// zero acknowledges every segment at once.
    pub delayed_ack: Duration,
    /// The least time between two ACKs answering unusable segments (out
    /// of window, challenges; RFC 5961 §7). Linux uses 500 ms.
    pub invalid_ack_interval: Duration,
    /// Maximum segment lifetime; TIME-WAIT lasts 2·MSL (RFC 9293 §3.4.2).
    pub msl: Duration,
    /// Receive buffer per connection: the largest window we advertise.
    pub recv_buffer: usize,
    /// Out-of-order segments held per connection (each holds a receive
    /// buffer; beyond this they are dropped and retransmitted later).
    pub max_out_of_order: usize,
    /// An upper bound on the MSS we announce and use (MSS clamping); the
    /// device MTU minus 40 bounds both anyway.
    pub mss: Option<u16>,
    /// Whether to offer window scaling (RFC 7323 §2).
    pub window_scaling: bool,
    /// Half-open (SYN-RECEIVED) connections per listener (the SYN backlog).
    /// 1024 by default, what memcached's `-b` defaults to: 400 clients
    /// connecting at once are all answered at once (with 128, a quarter of
    /// them waited a second for their SYN's retransmission). A flood costs
    /// at most this many TCBs per listener, for the SYN,ACK retries' time.
    pub syn_backlog: usize,
    /// Connections of all kinds in the table.
    pub max_connections: usize,
    /// Secret for initial sequence numbers (RFC 6528).
    pub seed: u64,
    /// Trace events kept for inspection (0: no trace).
    pub trace_capacity: usize,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            core: CoreId(0),
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            max_retries: 12,
            max_syn_retries: 5,
            delayed_ack: Duration::from_millis(40),
            invalid_ack_interval: Duration::from_millis(500),
            msl: Duration::from_secs(30),
            recv_buffer: 1 << 20,
            max_out_of_order: 512,
            mss: None,
            window_scaling: true,
            syn_backlog: 1024,
            max_connections: 65_536,
            seed: 0x7c9e_15d1_4a2b_3c4d,
            trace_capacity: 0,
        }
    }
}
