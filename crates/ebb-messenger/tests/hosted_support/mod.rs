//! What the tests of hosted nodes share: the node's configuration.

use ebb_hosted::Backend;

/// One unpinned core on io_uring, no signal handling: tests run side by
/// side in one process.
pub fn node_config() -> ebb_hosted::Config {
    ebb_hosted::Config {
        backend: Backend::IoUring,
        ..ebb_hosted::Config::one_core_side_by_side()
    }
}
