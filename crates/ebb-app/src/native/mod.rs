//! The native platform under [`crate::App`]: the arguments are what the
//! launcher put after `--` on the kernel command line, parsed by the
//! crate's own `no_std` parser against the same table hosted gives clap;
//! the console is the serial port; the wall clock is `ebb_native`'s.

mod self_tests;

use core::fmt;

use crate::args::{parse, Parsed};
use crate::options::Section;
use crate::{exit, help, App, NodeContract, NodeContractError, PlatformKind};

pub use self_tests::NATIVE_TESTS as PLATFORM_TESTS;

/// Where a native image's platform options are set (they are not the
/// application's arguments): printed after the help.
const PLATFORM_NOTE: &str = "\
Platform options (cores, memory, network) are the launcher's:
  ./ebb run APP --native --cores N --mem SIZE --forward PORT -- [OPTIONS]";

/// Runs `app` with `argv` (the kernel command line after `--`) and
/// returns the image's exit code.
pub fn entry(app: &'static App, argv: &[&str]) -> i32 {
    let sections = [Section {
        heading: None,
        options: app.options,
    }];
    let usage_error = |error: &dyn fmt::Display| {
        ebb_native::println!(
            "error: {error}\n\n{}\n\nFor more information, try '--help'.",
            help::usage(app.name, app.operands)
        );
        exit::USAGE
    };
    let args = match parse(&sections, app.operands, argv.iter().copied()) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            ebb_native::print!(
                "{}",
                help::render(app.name, app.about, &sections, app.operands)
            );
            ebb_native::println!("\n{PLATFORM_NOTE}");
            return exit::SUCCESS;
        }
        Err(error) => return usage_error(&error),
    };
    crate::set_running(app.name, PlatformKind::Native);
    let launch = match (app.setup)(&args) {
        Ok(launch) => launch,
        Err(error) => return usage_error(&error),
    };
    let wanted = launch.cores;
    let start = launch.start;
    let result = ebb_native::run(move || {
        if let Some(wanted) = wanted.filter(|&wanted| wanted != ebb_event::core_count()) {
            crate::warn!(
                "{wanted} cores asked for, but this image has {} (./ebb run --native --cores N)",
                ebb_event::core_count()
            );
        }
        start();
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            crate::error!("{error}");
            exit::FAILURE
        }
    }
}

/// Writes to the serial console.
pub fn print(text: fmt::Arguments<'_>) {
    ebb_native::print!("{text}");
}

/// Writes to the serial console (natively there is one stream).
pub fn eprint(text: fmt::Arguments<'_>) {
    ebb_native::print!("{text}");
}

/// The node words of the kernel command line (checked at boot).
pub fn node_contract() -> Result<Option<NodeContract>, NodeContractError> {
    ebb_native::runtime::options().node
}

/// The wall clock, in nanoseconds since the Unix epoch.
pub fn unix_nanos() -> Option<u64> {
    ebb_native::unix_nanos()
}
