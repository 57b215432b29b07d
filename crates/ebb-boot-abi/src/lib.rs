//! The contract between a native Ebbflow image and its launcher.
#![no_std]
#![forbid(unsafe_code)]

mod cmdline;

pub use cmdline::*;
