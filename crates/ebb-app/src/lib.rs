//! The one interface an Ebbflow application is written against, the same
//! on every platform (hosted Linux process, our stack over TAP, native
//! image). See `README.md` beside this crate for why it is shaped so.
//!
//! An application is a library that declares an [`App`] (its name, its
//! options, the function that turns parsed options into the node's first
//! event) and a `main.rs` of three lines with no `cfg`:
//!
//! ```ignore
//! #![no_std]
//! #![no_main]
//! ebb_app::main!(memcached::APP);
//! ```
//!
//! [`main!`] expands to the platform's entry point. From then on the
//! application sees the same things everywhere: [`Args`] parsed from the
//! same option table with the same `--help`, the console ([`println!`]),
//! leveled messages ([`log`]), the wall clock ([`unix_time`]), exit codes
//! ([`exit`]), the network ([`net`]) and the one-line ready message
//! ([`ready`]).
//!
//! This crate is the platform layer's edge: it (and the platforms under
//! it) is where `cfg(target_os)` is said, once.
#![no_std]

extern crate alloc;
#[cfg(not(target_os = "none"))]
extern crate std;

mod args;
pub mod exit;
pub mod help;
pub mod log;
pub mod net;
mod options;
pub mod self_test;

#[cfg(not(target_os = "none"))]
#[path = "hosted/mod.rs"]
mod platform;
#[cfg(target_os = "none")]
#[path = "native/mod.rs"]
mod platform;

use alloc::boxed::Box;
use core::fmt;
use core::time::Duration;

pub use args::{parse, Args, Parsed, UsageError};
pub use ebb_boot_abi::{NodeContract, NodeContractError};
pub use options::{Kind, Operands, Opt, Section};
#[cfg(not(target_os = "none"))]
pub use platform::clap_command;

/// An application: what [`main!`] runs.
pub struct App {
    /// Its name, as the binary and the messages name it.
    pub name: &'static str,
    /// One sentence for the help.
    pub about: &'static str,
    /// Its own options (each platform adds its own, see the help).
    pub options: &'static [Opt],
    /// Free arguments after the options, if it takes any.
    pub operands: Option<Operands>,
    /// Checks the parsed options and returns how to run: called before the
    /// node starts, on every platform.
    pub setup: fn(&Args) -> Result<Launch, UsageError>,
}

/// How to run the node, as [`App::setup`] decided.
pub struct Launch {
    /// How many cores the application asks for (memcached's `-t`): hosted
    /// starts that many; a native image has the launcher's (`./ebb run APP
    /// --native --cores N`) and warns when they differ.
    pub cores: Option<usize>,
    /// Core 0's first event.
    pub start: Box<dyn FnOnce() + Send>,
}

impl Launch {
    /// Runs `start` as core 0's first event, on the platform's cores.
    pub fn new(start: impl FnOnce() + Send + 'static) -> Launch {
        Launch {
            cores: None,
            start: Box::new(start),
        }
    }

    /// Asks for `cores` cores.
    #[must_use]
    pub fn with_cores(mut self, cores: Option<usize>) -> Launch {
        self.cores = cores;
        self
    }
}

/// Which platform runs the application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlatformKind {
    /// A Linux process on kernel sockets.
    Hosted,
    /// A Linux process on our own network stack over a TAP device.
    UserStack,
    /// A native image under a hypervisor.
    Native,
}

impl fmt::Display for PlatformKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PlatformKind::Hosted => "hosted",
            PlatformKind::UserStack => "userstack",
            PlatformKind::Native => "native",
        })
    }
}

/// The running application: set once by the entry point.
struct Running {
    name: &'static str,
    kind: PlatformKind,
}

static RUNNING: spin::Once<Running> = spin::Once::new();

/// Records what runs (the entry point, before the node starts).
fn set_running(name: &'static str, kind: PlatformKind) {
    RUNNING.call_once(|| Running { name, kind });
}

/// The application's name ("app" before the entry point ran, in tests).
#[must_use]
pub fn name() -> &'static str {
    RUNNING.get().map_or("app", |running| running.name)
}

/// The platform running the application (hosted before the entry point
/// ran, in host tests).
#[must_use]
pub fn platform_kind() -> PlatformKind {
    RUNNING
        .get()
        .map_or(PlatformKind::Hosted, |running| running.kind)
}

/// Prints a line on standard output (the serial console natively).
#[macro_export]
macro_rules! println {
    ($($arg:tt)*) => { $crate::print_line(format_args!($($arg)*)) };
}

/// Prints a line on standard error (the serial console natively).
#[macro_export]
macro_rules! eprintln {
    ($($arg:tt)*) => { $crate::eprint_line(format_args!($($arg)*)) };
}

/// [`println!`]'s body.
pub fn print_line(line: fmt::Arguments<'_>) {
    platform::print(format_args!("{line}\n"));
}

/// [`eprintln!`]'s body.
pub fn eprint_line(line: fmt::Arguments<'_>) {
    platform::eprint(format_args!("{line}\n"));
}

/// The one-line message every server prints once it serves, the same shape
/// on every platform, which people and tests wait for:
/// `memcached: ready: listening on 127.0.0.1:11211 (4 cores, hosted)`.
#[must_use]
pub fn ready_line(
    name: &str,
    what: fmt::Arguments<'_>,
    cores: usize,
    kind: PlatformKind,
) -> alloc::string::String {
    let unit = if cores == 1 { "core" } else { "cores" };
    alloc::format!("{name}: ready: {what} ({cores} {unit}, {kind})")
}

/// Prints [`ready_line`] for this application, with the node's core count.
pub fn ready(what: fmt::Arguments<'_>) {
    let line = ready_line(name(), what, ebb_event::core_count(), platform_kind());
    print_line(format_args!("{line}"));
}

/// This node's place in a distributed application (DESIGN §5): its id,
/// the frontend's address, its global Ebb ids and its Messenger port. A
/// native node has them from its launcher on the kernel command line; a
/// hosted one from the `EBB_NODE` environment variable, in the same words
/// (`node=3 frontend=10.0.0.1:7100 ebb_ids=32832-32896
/// messenger_port=7100`). `Ok(None)` for a node started on its own.
///
/// # Errors
///
/// The words were given wrong (a native node does not boot then, and a
/// hosted one does not start).
pub fn node_contract() -> Result<Option<NodeContract>, NodeContractError> {
    platform::node_contract()
}

/// Time since the Unix epoch (hosted: the system clock; native: the
/// launcher's `wall=` or the CMOS RTC at boot, advanced by the TSC), or
/// `None` if the platform does not know it.
#[must_use]
pub fn unix_time() -> Option<Duration> {
    platform::unix_nanos().map(Duration::from_nanos)
}

/// Runs `app` with the platform's arguments: what [`main!`] calls.
#[doc(hidden)]
pub mod __private {
    pub use crate::platform::entry;
    #[cfg(not(target_os = "none"))]
    pub use ebb_mem::hosted::HostedAllocator;
    #[cfg(target_os = "none")]
    pub use ebb_native;
}

/// The application's entry point on Linux: a C `main` (the binary is
/// `no_main`; std's argument capture works without its `lang_start`, and
/// [`__private::entry`] restores what `lang_start` did that matters), and
/// Ebbflow's allocator as the global one.
#[cfg(not(target_os = "none"))]
#[macro_export]
macro_rules! main {
    ($app:expr) => {
        /// Ebbflow's general-purpose allocator: per-core slabs with no
        /// atomics on the local paths (crates/ebb-mem).
        #[global_allocator]
        static EBB_APP_ALLOCATOR: $crate::__private::HostedAllocator =
            $crate::__private::HostedAllocator::new();

        /// The process's entry, called by the C runtime.
        #[no_mangle]
        pub extern "C" fn main(_argc: i32, _argv: *const *const u8) -> i32 {
            $crate::__private::entry(&$app)
        }
    };
}

/// The application's entry point in a native image: the platform calls it
/// after boot with the arguments after `--` on the kernel command line.
#[cfg(target_os = "none")]
#[macro_export]
macro_rules! main {
    ($app:expr) => {
        $crate::__private::ebb_native::entry!(__ebb_app_main);

        fn __ebb_app_main(args: &[&str]) -> i32 {
            $crate::__private::entry(&$app, args)
        }
    };
}
