//! Fuzzes the Messenger's decoders: the input is read as one header, as
//! each control structure, and as a byte stream cut into messages twice
//! (whole, and in pieces whose sizes the input chooses). Nothing may
//! panic, and both framings must agree (see `wire_support`).
#![no_main]

use libfuzzer_sys::fuzz_target;

// The corpus test uses the rest of the support module.
#[allow(dead_code)]
#[path = "../../tests/wire_support/mod.rs"]
mod wire_support;

fuzz_target!(|data: &[u8]| {
    wire_support::run(data);
});
