//! Fuzzes the decoders of distributed memcached's controls: the input's
//! first byte is a payload length and the rest a forwarded request's or
//! reply's control; the whole input is also read as a shard map. Nothing
//! may panic, and whatever decodes must encode back to the same bytes
//! (see `forward_support`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/forward_support/mod.rs"]
mod forward_support;

fuzz_target!(|data: &[u8]| {
    let _ = forward_support::run(data);
});
