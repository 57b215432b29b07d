//! Ebbflow's zero-copy I/O buffers (DESIGN.md §4).
//!
//! * [`IoBuf`]: an immutable, reference-counted view of bytes. Cloning,
//!   slicing and splitting make new views of the same memory; nothing is
//!   copied. [`IoBuf::from_owner`] wraps memory owned by someone else (a
//!   device's receive buffer, an io_uring provided buffer) and gives it back
//!   when the last view is dropped.
//! * [`IoBufMut`]: a uniquely owned, writable buffer with headroom, so that
//!   protocol headers can be prepended in place; [`IoBufMut::freeze`] turns it
//!   into an [`IoBuf`] without copying.
//! * [`IoChain`]: an ordered sequence of [`IoBuf`] segments forming one
//!   logical byte stream (a received TCP stream, or a reply to send with
//!   scatter/gather).
//! * [`Cursor`]: reads integers, typed [`Header`]s and sub-chains from an
//!   [`IoChain`], across segment boundaries.
//!
//! **Error rule.** Every offset or length argument is checked: an operation
//! whose argument reaches past the end returns an [`IoBufError`] and leaves
//! its buffer, chain or cursor unchanged. Nothing clamps silently and nothing
//! panics on a length, so lengths read from the network can be passed
//! straight in.
//!
//! The crate is `no_std` + `alloc` and contains no `unsafe` code; the
//! reference counting and foreign-owner support come from the `bytes` crate.

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod chain;
mod cursor;
mod error;
mod iobuf;
mod iobuf_mut;
pub mod scan;
mod segments;

pub use chain::IoChain;
pub use cursor::{Cursor, Header};
pub use error::IoBufError;
pub use iobuf::IoBuf;
pub use iobuf_mut::IoBufMut;
pub use segments::IntoSegments;
