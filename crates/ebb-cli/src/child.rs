//! Running child processes: Ctrl-C handling and exit codes.

use std::process::{Command, ExitStatus};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

/// Set once SIGINT has reached this process (after [`guard_sigint`]); only
/// tests read it: a child killed by Ctrl-C tells by its exit code (130).
static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Keeps this process alive on Ctrl-C so that it outlives its child.
///
/// The terminal sends SIGINT to the whole foreground process group, so the
/// child gets it directly and decides for itself; this process only records
/// it. A handler (rather than ignoring the signal) matters: an ignored signal
/// stays ignored across `exec`, a handled one goes back to the default, so the
/// child still reacts to Ctrl-C normally.
pub fn guard_sigint() {
    let flag = INTERRUPTED.get_or_init(|| Arc::new(AtomicBool::new(false)));
    if let Err(e) = signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(flag)) {
        eprintln!("warning: cannot handle Ctrl-C ({e}); Ctrl-C may end ./ebb before its child");
    }
}

/// Whether Ctrl-C was pressed since [`guard_sigint`].
#[cfg(test)]
pub fn interrupted() -> bool {
    INTERRUPTED
        .get()
        .is_some_and(|flag| flag.load(std::sync::atomic::Ordering::Relaxed))
}

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

/// Runs `command` to completion and returns its exit code (see [`exit_code`]).
pub fn run(command: &mut Command) -> Result<u8, String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot start `{}`: {e}", describe(command)))?;
    Ok(exit_code(status))
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

    #[test]
    fn guard_keeps_process_alive_and_child_gets_default_sigint() {
        guard_sigint();
        // A child sending SIGINT to itself still dies of it: the handler is
        // not inherited as "ignore" across exec.
        assert_eq!(run(&mut sh("kill -INT $$; sleep 5")), Ok(128 + 2));
        // SIGINT to this process is caught and recorded, not fatal.
        let me = std::process::id().to_string();
        assert_eq!(run(Command::new("kill").args(["-INT", &me])), Ok(0));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !interrupted() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(interrupted());
    }
}
