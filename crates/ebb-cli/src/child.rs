//! Running child processes: exit codes, and passing on the signals that
//! stop `./ebb` (see [`crate::stop`]).

use std::process::{Command, ExitStatus};

use crate::{build_profile, stop};

/// The shell's exit code for `status`: the code itself, or 128 + the signal
/// number for a child killed by a signal.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        // Linux exit codes are 0..=255; anything else is a failure all the same.
        u8::try_from(code).unwrap_or(1)
    } else if let Some(signal) = status.signal() {
        u8::try_from(signal).map_or(255, |s| s.saturating_add(128))
    } else {
        1
    }
}

/// Runs `command` to completion and returns its exit code (see
/// [`exit_code`]); a stop signal to this process is passed on to it
/// ([`stop::wait_passing_signals`]).
pub fn run(command: &mut Command) -> Result<u8, String> {
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", describe(command)))?;
    let status = stop::wait_passing_signals(&mut child)
        .map_err(|e| format!("waiting for `{}`: {e}", describe(command)))?;
    Ok(exit_code(status))
}

/// What [`build_hosted`] gives.
pub enum Built {
    /// The program, built.
    Binary(std::path::PathBuf),
    /// A stop signal came while it was built: `./ebb`'s exit code.
    Stopped(u8),
}

/// `cargo build --profile P -p PACKAGE` in `root` (hosted), saying so
/// first, where P is the profile this program was built with
/// ([`build_profile::calling_profile`]: release under `./ebb`,
/// test-release under the tests); the binary named after the package, in
/// the target directory (`CARGO_TARGET_DIR` or `root/target`).
pub fn build_hosted(root: &std::path::Path, package: &str) -> Result<Built, String> {
    let target = build_profile::target_dir(root, std::env::var_os("CARGO_TARGET_DIR"));
    let profile = build_profile::calling_profile(&target);
    eprintln!("ebb: building {package} ({}, hosted)...", profile.name);
    let mut build = Command::new("cargo");
    build
        .args(["build", "--profile", &profile.name, "-p", package])
        .current_dir(root);
    let built = run(&mut build)?;
    if let Some(code) = stop::report(&format!("building {package}")) {
        return Ok(Built::Stopped(code));
    }
    if built != 0 {
        return Err(format!("building {package} failed (exit code {built})"));
    }
    Ok(Built::Binary(target.join(profile.dir).join(package)))
}

/// `program arg arg ...` of `command`, for messages.
pub fn describe(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn exit_codes_pass_through() {
        assert_eq!(run(&mut sh("exit 0")), Ok(0));
        assert_eq!(run(&mut sh("exit 3")), Ok(3));
        assert_eq!(run(&mut sh("exit 255")), Ok(255));
    }

    #[test]
    fn signal_death_is_128_plus_signal() {
        assert_eq!(run(&mut sh("kill -TERM $$")), Ok(128 + 15));
        assert_eq!(run(&mut sh("kill -KILL $$")), Ok(128 + 9));
    }

    #[test]
    fn missing_program_is_a_clear_error() {
        let err =
            run(&mut Command::new("/nonexistent/ebb-no-such-program")).expect_err("cannot start");
        assert!(
            err.starts_with("cannot start `/nonexistent/ebb-no-such-program`"),
            "{err}"
        );
    }

    #[test]
    fn describe_joins_program_and_arguments() {
        let mut c = Command::new("cargo");
        c.args(["run", "-p", "hello", "--", "x"]);
        assert_eq!(describe(&c), "cargo run -p hello -- x");
    }
}
