//! Fuzzes TCP segment input: the input is a sequence of records, each a
//! TCP segment (header and payload, checksum filled in by the harness
//! unless the record says not to) with control bits and a time advance,
//! received by a stack with an echo listener, a listener that never reads
//! and one active connection, on a simulated clock. The stack must never
//! panic, keep its connection table within its limit, and send only
//! well-formed segments (see `segment_support`).
#![no_main]

use libfuzzer_sys::fuzz_target;

// The corpus test uses the rest of the support module.
#[allow(dead_code)]
#[path = "../../tests/segment_support/mod.rs"]
mod segment_support;

fuzz_target!(|data: &[u8]| {
    segment_support::run(data);
});
