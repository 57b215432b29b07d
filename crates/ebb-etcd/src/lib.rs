//! Ebbflow's [`GlobalIdMap`](ebb_core::GlobalIdMap) on etcd (DESIGN §5):
//! the store a cluster's frontend and hosted nodes share, so that global
//! id ranges, node registrations and Ebb entries live in a real
//! distributed store.
//!
//! - Keys live under `/ebbflow/APP/` ([`prefix`]), so applications can
//!   share one etcd.
//! - Global id ranges are reserved by etcd transactions on the counter
//!   `ids/next` (compare its mod revision, write the advanced value), so
//!   no two frontends ever get overlapping ranges.
//! - Leases are etcd leases: a node's registration set under one expires
//!   when nobody keeps the lease alive.
//! - Watches are etcd watches ([`watch`]).
//! - Each operation is bounded by a timeout; an unreachable etcd is
//!   [`MapError::Unreachable`](ebb_core::MapError) naming `etcd at
//!   HOST:PORT` (nothing was written), a write sent but not answered is
//!   [`MapError::OutcomeUnknown`](ebb_core::MapError) ([`classify`]), and
//!   the same map works again once etcd is back.
//!
//! The client is the `etcd-client` crate (etcd's v3 gRPC API on tonic and
//! tokio); the map runs it on a tokio runtime of its own thread
//! ([`runtime`]), since Ebbflow's event loops are not tokio. Hosted only:
//! native nodes reach this map through their hosted node over the
//! Messenger, with no etcd client in the guest.

#![forbid(unsafe_code)]

pub mod classify;
pub mod counter;
mod map;
pub mod prefix;
pub mod runtime;
pub mod watch;

pub use map::{EtcdGlobalIdMap, EtcdOptions, OpenError, DEFAULT_TIMEOUT, RESERVE_ATTEMPTS};
pub use prefix::{AppPrefix, BadAppName};
