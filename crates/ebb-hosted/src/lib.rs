//! Ebbflow's hosted platform: a node is a Linux process, a core is a pinned
//! thread running an event loop over io_uring (or epoll where io_uring is
//! unavailable).
//!
//! ```no_run
//! let code = ebb_hosted::run(ebb_hosted::Config::default(), || {
//!     println!("hello from core {}", ebb_event::current_core());
//!     ebb_event::shutdown(0).unwrap();
//! })
//! .unwrap();
//! std::process::exit(code);
//! ```
//!
//! Cross-core wake-ups are eventfd writes, made only when the target core
//! is halted (see `ebb_event`'s mailbox protocol), so a busy node makes no
//! wake-up system calls. An idle core blocks in the kernel and uses no CPU.

mod config;
mod driver;
pub mod net;
pub mod node_thread;
mod platform;
mod readiness;
mod runtime;
mod sys;

pub use config::{
    parse_cores, parse_cpus, Config, ConfigError, CpuList, NetStackFactory, PlatformArgs,
};
pub use driver::Backend;
pub use platform::HostedPlatform;
pub use readiness::{watch_readable, ReadableWatch};
pub use runtime::{run, run_task, run_with, HostedError, NodeHandle};

/// Process CPU time (user + system) so far, in nanoseconds, for tests and
/// benchmarks that check what a node costs.
pub fn process_cpu_ns() -> u64 {
    let mut usage = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into a live local.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut usage) };
    u64::try_from(usage.tv_sec).unwrap_or(0) * 1_000_000_000
        + u64::try_from(usage.tv_nsec).unwrap_or(0)
}
