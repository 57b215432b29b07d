//! What the tests of hosted nodes share: the node's configuration.

use ebb_hosted::Backend;

/// One unpinned core on io_uring, no signal handling: tests run side by
/// side in one process.
pub fn node_config() -> ebb_hosted::Config {
    ebb_hosted::Config {
        cores: Some(1),
        backend: Backend::IoUring,
        pin: false,
        handle_signals: false,
        ..ebb_hosted::Config::default()
    }
}
