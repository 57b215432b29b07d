//! Fuzzes the text protocol handler (text and meta commands): the input is a
//! byte stream from a client, delivered in reads whose size the first byte
//! chooses (the check is `tests/fuzz_check`'s, which the corpus replay in
//! `tests/fuzz_corpus.rs` also runs).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/handler_support/mod.rs"]
mod handler_support;

#[path = "../../tests/fuzz_check/mod.rs"]
mod fuzz_check;

fuzz_target!(|data: &[u8]| {
    fuzz_check::check(handler_support::Harness::text, data);
});
