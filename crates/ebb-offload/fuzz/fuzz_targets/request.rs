//! Fuzzes the FileSystem Ebb's decoders: the input's first byte chooses a
//! message number, the rest is read as that request's control, as its
//! reply's, and as a directory listing. Nothing may panic, and what
//! decodes must encode back to the same bytes (see `wire_support`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/wire_support/mod.rs"]
mod wire_support;

fuzz_target!(|data: &[u8]| {
    wire_support::run(data);
});
