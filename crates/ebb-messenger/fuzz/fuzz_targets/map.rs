//! Fuzzes the decoders of the global id map's protocol over the
//! Messenger: the input is read as one operation's request or reply
//! (see `map_wire_support`). Nothing may panic, and whatever decodes must
//! re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/map_wire_support/mod.rs"]
mod map_wire_support;

fuzz_target!(|data: &[u8]| {
    map_wire_support::run(data);
});
