//! The native half: built for `x86_64-unknown-none` only.

mod backend;
mod clock;
mod console;
mod entries;
mod files;
mod memory;
mod objects;
mod process;
mod random;
mod signals;
pub mod start;
mod threads;
mod user;
