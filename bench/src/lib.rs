//! Ebbflow benchmarks.
//!
//! Each benchmark is a binary in `bench/src/bin`, run as `./ebb bench NAME`.
//! They share [`report`]: a table for people on stdout and the figures in
//! `target/bench/NAME.json` (flat keys to numbers, plus the exact command lines
//! and the versions used), and small statistics and measurement helpers.

pub mod report;
