//! Running the host's build tools (apt-get, dpkg-source, make) and keeping
//! what they said for the error when they fail.

use std::path::Path;
use std::process::{Command, Output};

/// How a tool run ended when it did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunFailure {
    /// The program could not be started (missing, not executable).
    NotStarted(String),
    /// It ran and failed: its exit status and the tail of its output.
    Failed {
        /// Its exit status, as std prints it.
        status: String,
        /// The end of its stdout and stderr.
        output: String,
    },
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunFailure::NotStarted(why) => write!(f, "could not start: {why}"),
            RunFailure::Failed { status, output } => write!(f, "{status}: {output}"),
        }
    }
}

/// The lines of output kept in an error: the end of a long build log is
/// where the reason is.
const KEPT_LINES: usize = 30;

/// Runs `program args` in `dir`; its stdout on success.
pub fn run(program: &str, args: &[&str], dir: &Path) -> Result<String, RunFailure> {
    run_with_env(program, args, dir, &[], &[])
}

/// [`run`], with `env` added to the environment and `unset` taken out of
/// it.
pub fn run_with_env(
    program: &str,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
    unset: &[&str],
) -> Result<String, RunFailure> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied());
    for name in unset {
        command.env_remove(name);
    }
    let output = command
        .output()
        .map_err(|e| RunFailure::NotStarted(format!("{program}: {e}")))?;
    finished(output)
}

fn finished(output: Output) -> Result<String, RunFailure> {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let both = format!("{stdout}{stderr}");
    Err(RunFailure::Failed {
        status: output.status.to_string(),
        output: tail(&both, KEPT_LINES),
    })
}

/// The last `lines` lines of `text`, trimmed.
pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_program_reports_its_status_and_output() {
        let failure = run(
            "sh",
            &["-c", "echo out; echo err >&2; exit 3"],
            Path::new("/"),
        )
        .unwrap_err();
        match failure {
            RunFailure::Failed { status, output } => {
                assert!(status.contains('3'), "{status}");
                assert_eq!(output, "out\nerr");
            }
            other => panic!("expected Failed, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_program_is_not_started() {
        let failure = run("ebb-no-such-program", &[], Path::new("/")).unwrap_err();
        assert!(matches!(failure, RunFailure::NotStarted(_)), "{failure:?}");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
