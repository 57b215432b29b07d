//! In-guest tests: tests that need a running node. `apps/native-tests`
//! runs its own (allocators, Ebbs, events) and then [`platform_tests`],
//! the tests of what only this platform has (natively: demand paging,
//! guard pages, the large-allocation window), so the application itself
//! never names a platform.

use alloc::boxed::Box;
use alloc::string::String;
use core::future::Future;
use core::pin::Pin;

/// What a test returns: `Err` says why it failed.
pub type Outcome = Result<(), String>;

/// One in-guest test.
pub struct SelfTest {
    /// Its name, as reported.
    pub name: &'static str,
    /// Starts it (on core 0, inside the event loop).
    pub run: fn() -> Pin<Box<dyn Future<Output = Outcome>>>,
}

/// This platform's own in-guest tests (none on hosted).
#[must_use]
pub fn platform_tests() -> &'static [SelfTest] {
    crate::platform::PLATFORM_TESTS
}
