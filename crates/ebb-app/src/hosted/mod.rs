//! The hosted platform under [`crate::App`]: argv parsed by clap (the
//! application's options, and the platform's own, declared by the crates
//! they configure: `ebb_hosted::PlatformArgs`, `ebb_userstack::TapArgs`),
//! the node run by `ebb_hosted` (on `ebb_userstack` with `--tap`),
//! standard output and error, the system clock.

pub mod clap_command;

use std::io::Write;
use std::string::String;
use std::time::{SystemTime, UNIX_EPOCH};
use std::vec::Vec;

use core::fmt;

use clap::{Args as _, FromArgMatches};
use ebb_hosted::PlatformArgs;
use ebb_userstack::TapArgs;

use crate::options::Section;
use crate::self_test::SelfTest;
use crate::{exit, help, App, NodeContract, NodeContractError, PlatformKind};

/// Hosted has no tests of its own to run in a node.
pub const PLATFORM_TESTS: &[SelfTest] = &[];

/// `app`'s whole command line on this platform: its own options, then the
/// platform's under their headings.
#[must_use]
pub fn command(app: &App) -> clap::Command {
    let own = clap_command::command(app.name, app.about, &sections(app), app.operands);
    TapArgs::augment_args(PlatformArgs::augment_args(own))
}

fn sections(app: &App) -> [Section; 1] {
    [Section {
        heading: None,
        options: app.options,
    }]
}

/// Runs `app` with the process's arguments and returns its exit code.
pub fn entry(app: &'static App) -> i32 {
    restore_lang_start_defaults();
    let code = run(app);
    // std's `lang_start` flushes standard output at exit; this entry
    // replaces it (the binary is `no_main`), so flush here.
    let _ = std::io::stdout().flush();
    code
}

fn run(app: &'static App) -> i32 {
    let sections = sections(app);
    let argv: Vec<String> = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let matches = match command(app).try_get_matches_from(argv) {
        Ok(matches) => matches,
        Err(error) => {
            // Help goes to standard output with 0, mistakes to standard
            // error with 2.
            let _ = error.print();
            return error.exit_code();
        }
    };
    let args = clap_command::to_args(&matches, &sections);
    let usage_error = |error: &dyn fmt::Display| {
        std::eprintln!(
            "error: {error}\n\n{}\n\nFor more information, try '--help'.",
            help::usage(app.name, app.operands)
        );
        exit::USAGE
    };
    let platform = PlatformArgs::from_arg_matches(&matches);
    let tap = TapArgs::from_arg_matches(&matches);
    let (mut config, userstack) = match (platform, tap) {
        (Ok(platform), Ok(tap)) => match tap.options() {
            Ok(userstack) => (platform.config(), userstack),
            Err(error) => return usage_error(&error),
        },
        (Err(error), _) | (_, Err(error)) => return usage_error(&error),
    };
    let kind = if userstack.is_some() {
        PlatformKind::UserStack
    } else {
        PlatformKind::Hosted
    };
    if let Err(error) = node_contract() {
        crate::error!("EBB_NODE: {error}");
        return exit::USAGE;
    }
    crate::set_running(app.name, kind);
    let launch = match (app.setup)(&args) {
        Ok(launch) => launch,
        Err(error) => return usage_error(&error),
    };
    if let Some(cores) = launch.cores {
        config.cores = Some(cores);
    }
    if let Some(userstack) = userstack {
        // One TAP queue: the stack serves core 0 only.
        config.cores.get_or_insert(1);
        if let Err(error) = ebb_userstack::install(&mut config, userstack) {
            crate::error!("{error}");
            return exit::FAILURE;
        }
    }
    match ebb_hosted::run(config, launch.start) {
        Ok(code) => code,
        Err(error) => {
            crate::error!("{error}");
            exit::FAILURE
        }
    }
}

/// What std's `lang_start` sets up that a server needs: SIGPIPE ignored,
/// so that writing to a socket the peer closed is an `EPIPE` error, not
/// the end of the process.
fn restore_lang_start_defaults() {
    // SAFETY: installs the "ignore" disposition for one signal, before any
    // other thread exists; no handler code runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Writes to standard output.
pub fn print(text: fmt::Arguments<'_>) {
    let _ = std::io::stdout().write_fmt(text);
}

/// Writes to standard error.
pub fn eprint(text: fmt::Arguments<'_>) {
    let _ = std::io::stderr().write_fmt(text);
}

/// The node words of `EBB_NODE`, if it is set.
pub fn node_contract() -> Result<Option<NodeContract>, NodeContractError> {
    match std::env::var_os("EBB_NODE") {
        None => Ok(None),
        Some(words) => NodeContract::parse_words(words.to_string_lossy().split_whitespace()),
    }
}

/// The system clock, in nanoseconds since the Unix epoch.
pub fn unix_nanos() -> Option<u64> {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_nanos()).ok()
}
