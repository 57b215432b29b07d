//! memcached on Ebbflow: the text, binary and meta protocols of memcached
//! 1.6 over Ebbflow's network interface, with a store every core reads
//! without locks.
//!
//! The crate is platform-neutral (`no_std` + `alloc`, no `unsafe`),
//! written against `ebb-app` ([`APP`], `app.rs`); `main.rs` runs it on
//! every platform: hosted, on our stack over TAP, native.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod app;
pub mod cluster;
pub mod connection;
pub mod memory;
pub mod protocol;
pub mod settings;
pub mod stats;
pub mod store;
pub mod watch;

pub use app::APP;
pub use connection::{accept_fn, Connection, Server};
pub use settings::Settings;
pub use store::{
    expiry, ArithError, DeleteResult, Delta, Item, NewItem, Refused, SetMode, SetResult, Store,
    StoreStats, Update,
};
