//! In-guest tests: tests that need a running node (every core's event loop,
//! its allocator, its Ebb table, its timers) and so run inside a native
//! image (`src/native.rs`) — and, the same code, in a hosted process
//! (`src/main.rs`). `crates/ebb-cli/tests/native_guest.rs` boots the image on
//! q35 with 1 and with 4 cores and checks the report.
//!
//! Report format, one line each on the console (the serial port natively):
//!
//! ```text
//! ebb-test: start 4 tests on 4 cores
//! ebb-test: run NAME
//! ebb-test: ok NAME                      (or: ebb-test: FAIL NAME: why)
//! ebb-test: summary: passed 4, failed 0
//! ```
//!
//! The node then exits 0 if every test passed, 1 otherwise. A test that
//! panics or faults ends the image with the platform's report instead (its
//! `ok` line is missing, which the host-side test catches).

#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod allocators;
pub mod ebbs;
mod events;

use alloc::boxed::Box;
use alloc::string::String;
use core::fmt;
use core::future::Future;
use core::pin::Pin;

use ebb_event::{core_count, shutdown, spawn_task};

/// What a test returns: `Err` says why it failed.
pub type Outcome = Result<(), String>;

/// One in-guest test.
pub struct Test {
    /// Its name, as reported.
    pub name: &'static str,
    /// Starts it (on core 0, inside the event loop).
    pub run: fn() -> Pin<Box<dyn Future<Output = Outcome>>>,
}

/// Every test, in the order they run.
pub const TESTS: &[Test] = &[
    allocators::TEST,
    ebbs::TEST,
    events::SPAWN_ON_TEST,
    events::TIMERS_TEST,
];

/// Where the report goes: a platform's console.
#[derive(Clone, Copy)]
pub struct Console {
    /// Prints one line.
    pub line: fn(fmt::Arguments<'_>),
}

/// Core 0's first event: runs [`TESTS`] and then the platform's own
/// `platform_tests` whose names contain one of `filters` (all when empty),
/// one after the other, reports each, and shuts the node down with 0 if all
/// passed, else 1.
pub fn run_tests(console: Console, filters: &'static [String], platform_tests: &'static [Test]) {
    spawn_task(async move {
        let selected = || {
            TESTS.iter().chain(platform_tests).filter(|test| {
                filters.is_empty() || filters.iter().any(|f| test.name.contains(f.as_str()))
            })
        };
        let out = console.line;
        out(format_args!(
            "ebb-test: start {} tests on {} cores",
            selected().count(),
            core_count()
        ));
        let (mut passed, mut failed) = (0, 0);
        for test in selected() {
            out(format_args!("ebb-test: run {}", test.name));
            match (test.run)().await {
                Ok(()) => {
                    passed += 1;
                    out(format_args!("ebb-test: ok {}", test.name));
                }
                Err(why) => {
                    failed += 1;
                    out(format_args!("ebb-test: FAIL {}: {why}", test.name));
                }
            }
        }
        out(format_args!(
            "ebb-test: summary: passed {passed}, failed {failed}"
        ));
        shutdown(i32::from(failed != 0)).expect("the first shutdown");
    });
}

/// Turns anything printable into a test failure.
fn fail(what: &str, error: impl fmt::Display) -> String {
    alloc::format!("{what}: {error}")
}
