//! Exit codes, the same on every platform (a native image's code is what
//! `./ebb run APP --native` exits with).

/// Everything went as asked.
pub const SUCCESS: i32 = 0;
/// The application failed (its message says why).
pub const FAILURE: i32 = 1;
/// The command line was wrong (as clap and `./ebb` exit).
pub const USAGE: i32 = 2;
/// An operating-system resource was refused, e.g. the port to listen on
/// (sysexits' `EX_OSERR`, which memcached uses for this).
pub const OS_ERROR: i32 = 71;

/// Stops the node: every core leaves its loop and the application exits
/// with `code`. Later calls keep the first code.
pub fn stop(code: i32) {
    // Only the first stop counts; the node is already stopping otherwise.
    let _ = ebb_event::shutdown(code);
}
