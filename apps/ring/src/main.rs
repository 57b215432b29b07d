//! `ring`'s entry point, the same on every platform (see `ebb-app`): a
//! node of the ring application ([`ring::node`]).
#![no_std]
#![no_main]

ebb_app::main!(ring::APP);
