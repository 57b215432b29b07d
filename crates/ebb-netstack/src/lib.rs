//! Ebbflow's own network stack, lower half (DESIGN.md §4, issue 7).
//!
//! A `no_std` + `alloc`, platform-neutral stack with no `unsafe` code:
//!
//! * [`device`]: the [`Device`] trait at the bottom (frames in as
//!   [`IoBuf`](ebb_iobuf::IoBuf), out as [`IoChain`](ebb_iobuf::IoChain)) and
//!   wrappers that compose with any device: [`Tracer`], [`PcapWriter`] and
//!   [`FaultInjector`].
//! * One module per protocol — [`ethernet`], [`arp`] (RFC 826), [`ipv4`]
//!   (RFC 791), [`icmp`] (RFC 792), [`udp`] (RFC 768), [`dhcp`] (RFC 2131) —
//!   parsing and emitting through smoltcp's `wire` views; the meaning (what
//!   to answer, what to cache, what to deliver) is ours.
//! * [`Stack`] (in [`iface`]): one interface's state and its dispatch. A
//!   received frame is processed run-to-completion from the device into the
//!   application's [`UdpHandler`](ebb_net::UdpHandler); the payload reaches
//!   the application as a view of the receive buffer. Sends write all
//!   headers into one header buffer chained in front of the application's
//!   payload buffers, which are never copied.
//! * [`tcp`]: TCP (RFC 9293) with RFC 6298 retransmission, RFC 5681/6582
//!   congestion control and RFC 7323 window scaling; connections are driven
//!   by the same [`TcpHandler`](ebb_net::TcpHandler) interface the hosted
//!   platform implements.
//! * [`sim`]: several stacks in one process on a simulated clock, joined by
//!   a wire with programmable loss, duplication, reordering, delay and
//!   bandwidth, deterministic for a given seed.
//!
//! Time never comes from a clock here: every call that needs it takes
//! `now: Instant`, so the simulated clock drives the stack exactly.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod arp;
pub mod checksum;
pub mod device;
pub mod dhcp;
pub mod error;
pub mod ethernet;
pub mod icmp;
pub mod iface;
pub mod ipv4;
pub mod poll_timer;
pub mod rng;
pub mod sim;
pub mod steering;
pub mod tcp;
pub mod udp;

pub use device::{
    ChecksumCapabilities, Device, DeviceCapabilities, Direction, FaultConfig, FaultInjector,
    PcapSink, PcapWriter, RxChecksum, Tracer,
};
pub use ebb_event::Instant;
pub use error::RxError;
pub use iface::{Config, EchoReplyHandler, IpConfig, IpSetup, Stack, Stats};
pub use smoltcp::wire::EthernetAddress;
