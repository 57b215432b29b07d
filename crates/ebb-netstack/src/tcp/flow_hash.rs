//! The hash for the connection table's keys (4-tuples and connection ids).
//!
//! foldhash (the hash `hashbrown` itself defaults to; already in the
//! build through it) is fast on small fixed-size keys. It is seeded from
//! the stack's own secret rather than from a global random source, so
//! that a peer choosing ports cannot aim at known buckets, and a stack
//! given the same seed behaves the same way in the simulated-link tests.
//! It is not a cryptographic PRF; the table's size is bounded by
//! `TcpConfig::max_connections` whatever the peer sends.

/// Builds the table's hashers.
pub(crate) type FlowHash = foldhash::fast::FixedState;
