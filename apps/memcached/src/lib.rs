//! memcached on Ebbflow: the text, binary and meta protocols of memcached
//! 1.6 over Ebbflow's network interface, with a store every core reads
//! without locks.
//!
//! The crate is platform-neutral protocol logic (`no_std` + `alloc`, no
//! `unsafe`); `main.rs` runs it on the hosted platform, and the same
//! library will run natively.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

pub mod connection;
pub mod protocol;
pub mod settings;
pub mod stats;
pub mod store;

pub use connection::{accept_fn, Connection, Server};
pub use settings::Settings;
pub use store::{
    expiry, ArithError, DeleteResult, Delta, Item, NewItem, Refused, SetMode, SetResult, Store,
    StoreStats, Update,
};
