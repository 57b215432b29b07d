//! `memcached`'s entry point, the same on every platform (see `ebb-app`).
#![no_std]
#![no_main]

ebb_app::main!(memcached::APP);
