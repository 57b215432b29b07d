//! Fuzzes the packed-directory loader: any bytes as a cpio newc archive.
//! Nothing may panic, and what loads reads back (see `archive_support`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/archive_support/mod.rs"]
mod archive_support;

fuzz_target!(|data: &[u8]| {
    let _ = archive_support::run(data);
});
