//! In-guest tests: tests that need a running node (every core's event loop,
//! its allocator, its Ebb table, its timers) and so run inside a native
//! image — and, the same code, in a hosted process (`main.rs` is the one
//! entry, `ebb-app`). After its own tests it runs the platform's
//! (`ebb_app::self_test::platform_tests`: natively demand paging, guard
//! pages, large allocations). `crates/ebb-cli/tests/native_guest.rs` boots
//! the image on q35 with 1 and with 4 cores and checks the report.
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

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use ebb_app::{exit, App, Args, Launch, Operands, UsageError};
use ebb_event::{core_count, spawn_task};

pub use ebb_app::self_test::{Outcome, SelfTest as Test};

/// Every test, in the order they run.
pub const TESTS: &[Test] = &[
    allocators::TEST,
    ebbs::TEST,
    events::SPAWN_ON_TEST,
    events::TIMERS_TEST,
];

/// The application: `native-tests [FILTER]...`.
pub static APP: App = App {
    name: "native-tests",
    about: "Runs Ebbflow's in-guest tests on every core and reports each; exits 0 if all passed.",
    options: &[],
    operands: Some(Operands {
        name: "FILTER",
        help: "Run only the tests whose names contain one of these",
    }),
    setup,
};

fn setup(args: &Args) -> Result<Launch, UsageError> {
    let filters: Vec<String> = args.operands().iter().map(ToString::to_string).collect();
    Ok(Launch::new(move || {
        run_tests(filters.leak(), ebb_app::self_test::platform_tests());
    }))
}

/// Core 0's first event: runs [`TESTS`] and then the platform's own
/// `platform_tests` whose names contain one of `filters` (all when empty),
/// one after the other, reports each, and shuts the node down with 0 if all
/// passed, else 1.
pub fn run_tests(filters: &'static [String], platform_tests: &'static [Test]) {
    spawn_task(async move {
        let selected = || {
            TESTS.iter().chain(platform_tests).filter(|test| {
                filters.is_empty() || filters.iter().any(|f| test.name.contains(f.as_str()))
            })
        };
        ebb_app::println!(
            "ebb-test: start {} tests on {} cores",
            selected().count(),
            core_count()
        );
        let (mut passed, mut failed) = (0, 0);
        for test in selected() {
            ebb_app::println!("ebb-test: run {}", test.name);
            match (test.run)().await {
                Ok(()) => {
                    passed += 1;
                    ebb_app::println!("ebb-test: ok {}", test.name);
                }
                Err(why) => {
                    failed += 1;
                    ebb_app::println!("ebb-test: FAIL {}: {why}", test.name);
                }
            }
        }
        ebb_app::println!("ebb-test: summary: passed {passed}, failed {failed}");
        exit::stop(if failed == 0 {
            exit::SUCCESS
        } else {
            exit::FAILURE
        });
    });
}

/// Turns anything printable into a test failure.
fn fail(what: &str, error: impl fmt::Display) -> String {
    alloc::format!("{what}: {error}")
}
