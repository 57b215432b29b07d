//! `filecheck`'s entry point, the same on every platform (see `ebb-app`):
//! a node that copies files of the hosted node's shared directory when
//! the frontend asks ([`filecheck::node`]).
#![no_std]
#![no_main]

ebb_app::main!(filecheck::APP);
