//! The hosted platform under [`crate::App`]: argv parsed by clap (the
//! application's options and the platform's, `platform_options.rs`), the
//! node run by `ebb_hosted` (on `ebb_userstack` with `--tap`), standard
//! output and error, the system clock.

pub mod clap_command;
mod platform_options;

use std::io::Write;
use std::string::String;
use std::time::{SystemTime, UNIX_EPOCH};
use std::vec::Vec;

use core::fmt;

use crate::options::Section;
use crate::self_test::SelfTest;
use crate::{exit, help, App, PlatformKind};

pub use platform_options::{PLATFORM, USERSTACK};

/// Hosted has no tests of its own to run in a node.
pub const PLATFORM_TESTS: &[SelfTest] = &[];

/// The sections of `app`'s command line on this platform.
#[must_use]
pub fn sections(app: &App) -> [Section; 3] {
    [
        Section {
            heading: None,
            options: app.options,
        },
        PLATFORM,
        USERSTACK,
    ]
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
    let matches = match clap_command::command(app.name, app.about, &sections, app.operands)
        .try_get_matches_from(argv)
    {
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
    let (mut config, userstack) = match platform_options::configure(&args) {
        Ok(configured) => configured,
        Err(error) => return usage_error(&error),
    };
    let kind = if userstack.is_some() {
        PlatformKind::UserStack
    } else {
        PlatformKind::Hosted
    };
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

/// The system clock, in nanoseconds since the Unix epoch.
pub fn unix_nanos() -> Option<u64> {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_nanos()).ok()
}
