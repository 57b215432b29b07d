//! `./ebb test`: the ordered list of checks CI runs, and how they are run.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::{child, test_summary};

/// One step of `./ebb test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Short name shown in headers and the summary.
    pub name: &'static str,
    /// The command line, split on whitespace (no quoting: call a script for
    /// anything more complex). It is also the rerun hint on failure.
    pub command: &'static str,
    /// Whether `--quick` runs this step.
    pub quick: bool,
    /// Why the step is the way it is, shown in its header; may be empty.
    pub note: &'static str,
}

/// The steps, in order. Adding a check is one line here.
pub const STEPS: &[Step] = &[
    Step {
        name: "fmt",
        command: "cargo fmt --all -- --check",
        quick: false,
        note: "",
    },
    Step {
        name: "clippy",
        command: "cargo clippy --workspace --all-targets -- -D warnings",
        quick: false,
        note: "",
    },
    Step {
        name: "no_std",
        command:
            "cargo build --release -p ebb-boot-abi -p ebb-core -p ebb-event -p ebb-mem -p ebb-messenger -p ebb-fs -p ebb-offload -p ebb-posix -p ebb-posix-hosted -p ebb-posix-files -p ebb-posix-native --target x86_64-unknown-none",
        quick: false,
        note: "the shared crates build for the bare-metal target",
    },
    Step {
        name: "native",
        command: "cargo clippy --release -p ebb-native -p hello -p echo -p memcached -p netpipe -p native-tests -p ring -p filecheck -p ebb-messenger -p ebb-offload -p ebb-posix -p ebb-posix-hosted -p ebb-posix-files -p ebb-posix-native -p c-program --target x86_64-unknown-none -- -D warnings",
        quick: false,
        note: "the native platform and the native apps, linted for the bare-metal target",
    },
    Step {
        name: "musl",
        command: "cargo clippy --release -p ebb-posix-userstack --target x86_64-unknown-linux-musl -- -D warnings",
        quick: false,
        note: "the user-space stack's POSIX personality, linted for the musl target it is built for",
    },
    Step {
        name: "test",
        command: "cargo test --workspace --profile test-release",
        quick: true,
        note: "test-release (release without LTO): the concurrency tests are heavy, not timing-sensitive",
    },
    Step {
        name: "unsafe",
        command: "bash crates/ebb-cli/scripts/check-unsafe.sh",
        quick: false,
        note: "loom models of the lock-free handshakes; Miri (nightly) over the unsafe code",
    },
    Step {
        name: "fuzz",
        command: "bash crates/ebb-cli/scripts/fuzz.sh",
        quick: false,
        note: "each cargo-fuzz target, 30 s under CI=true (10 s elsewhere, skipped without cargo-fuzz)",
    },
];

/// The step that `tests` narrows.
const TEST_STEP: &str = "test";

/// The steps whose output is counted (libtest's `test result:` lines,
/// skipped tests), each summed on a line of its own. A script step that
/// skips a group of tests (Miri or cargo-fuzz missing) reports it as a
/// skipping test does: one passed result, recorded in `EBB_TEST_SKIPS`.
const COUNTED_STEPS: &[&str] = &[TEST_STEP, "unsafe", "fuzz"];

/// Why a step failed when it died of SIGINT (exit code 130).
const INTERRUPTED: &str = "interrupted";

/// What happened to a step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// Exit code 0, after this many seconds.
    Passed(f64),
    /// Non-zero exit code (or could not start), after this many seconds.
    Failed(f64),
    /// Left out by `--quick`.
    Skipped,
    /// Not reached because an earlier step failed.
    NotRun,
}

impl Outcome {
    fn result(self) -> &'static str {
        match self {
            Outcome::Passed(_) => "passed",
            Outcome::Failed(_) => "FAILED",
            Outcome::Skipped => "skipped",
            Outcome::NotRun => "not run",
        }
    }

    fn seconds(self) -> String {
        match self {
            Outcome::Passed(s) | Outcome::Failed(s) => format!("{s:.1}"),
            Outcome::Skipped | Outcome::NotRun => "-".to_owned(),
        }
    }
}

/// The `Command` for `step`, run in `root`.
pub fn command(step: &Step, root: &Path) -> Command {
    let mut words = step.command.split_whitespace();
    let mut c = Command::new(words.next().unwrap_or("true"));
    c.args(words).current_dir(root).env("EBB_ROOT", root);
    c
}

/// The test step's command with `cargo test --profile test-release`
/// arguments `tests`
/// instead of the whole workspace (none: the step's own command).
pub fn test_command(step: &Step, root: &Path, tests: &[String]) -> Command {
    if tests.is_empty() {
        return command(step, root);
    }
    let mut c = Command::new("cargo");
    c.args(["test", "--profile", "test-release"])
        .args(tests)
        .current_dir(root)
        .env("EBB_ROOT", root);
    c
}

/// Runs the steps of `steps` in order (those with `quick` only when `quick`),
/// stopping at the first failure; prints a header per step and a summary.
/// `tests`, when not empty, narrows the test step ([`test_command`]).
/// Returns the exit code: 0, 1 on a failure, 130 when interrupted.
pub fn run_all(steps: &[Step], root: &Path, quick: bool, tests: &[String]) -> u8 {
    let mut outcomes: Vec<Outcome> = steps
        .iter()
        .map(|s| {
            if quick && !s.quick {
                Outcome::Skipped
            } else {
                Outcome::NotRun
            }
        })
        .collect();
    let to_run = outcomes.iter().filter(|o| **o == Outcome::NotRun).count();
    let mut failure: Option<(usize, String)> = None;
    let mut ordinal = 0;
    let mut counts: Vec<String> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if outcomes[i] == Outcome::Skipped {
            continue;
        }
        ordinal += 1;
        let note = if step.note.is_empty() {
            String::new()
        } else {
            format!("  ({})", step.note)
        };
        println!(
            "==> [{ordinal}/{to_run}] {}: {}{note}",
            step.name, step.command
        );
        let start = Instant::now();
        let result = if COUNTED_STEPS.contains(&step.name) {
            let mut command = if step.name == TEST_STEP {
                test_command(step, root, tests)
            } else {
                command(step, root)
            };
            test_summary::run_counting(&mut command, root).map(|(code, summary)| {
                counts.push(if step.name == TEST_STEP {
                    summary
                } else {
                    summary.replace("tests: ", &format!("tests ({} step): ", step.name))
                });
                code
            })
        } else {
            child::run(&mut command(step, root))
        };
        let secs = start.elapsed().as_secs_f64();
        match result {
            Ok(0) => {
                println!("--> {} passed in {secs:.1} s", step.name);
                outcomes[i] = Outcome::Passed(secs);
            }
            Ok(code) => {
                println!("--> {} FAILED in {secs:.1} s (exit code {code})", step.name);
                outcomes[i] = Outcome::Failed(secs);
                let why = if code == 128 + 2 || crate::stop::received().is_some() {
                    INTERRUPTED.to_owned()
                } else {
                    format!("exit code {code}")
                };
                failure = Some((i, why));
                break;
            }
            Err(e) => {
                outcomes[i] = Outcome::Failed(secs);
                failure = Some((i, e));
                break;
            }
        }
    }
    println!();
    print!("{}", summary(steps, &outcomes));
    for lines in counts {
        print!("{lines}");
    }
    match failure {
        None => {
            let skipped = steps.len() - to_run;
            let plural = if to_run == 1 { "" } else { "s" };
            if skipped == 0 {
                println!("ebb test: passed ({to_run} step{plural})");
            } else {
                println!("ebb test: passed ({to_run} step{plural}; {skipped} skipped by --quick)");
            }
            0
        }
        Some((i, why)) => {
            let step = &steps[i];
            if why == INTERRUPTED {
                let signal = crate::stop::received().unwrap_or(crate::stop::SIGINT);
                eprintln!(
                    "ebb: stopped on {} during step '{}'",
                    crate::stop::signal_name(signal),
                    step.name
                );
                crate::stop::exit_code(signal)
            } else {
                eprintln!(
                    "error: step '{}' failed ({why}); rerun it with: {}",
                    step.name, step.command
                );
                1
            }
        }
    }
}

/// The summary table: step, result, seconds; columns aligned.
pub fn summary(steps: &[Step], outcomes: &[Outcome]) -> String {
    let width = steps
        .iter()
        .map(|s| s.name.len())
        .chain(std::iter::once("step".len()))
        .max()
        .unwrap_or(4);
    let mut out = format!("{:<width$}  {:<7}  {:>7}\n", "step", "result", "seconds");
    for (step, outcome) in steps.iter().zip(outcomes) {
        out.push_str(&format!(
            "{:<width$}  {:<7}  {:>7}\n",
            step.name,
            outcome.result(),
            outcome.seconds()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::root::tests::TempDir;

    #[test]
    fn steps_are_fmt_clippy_no_std_native_musl_test_unsafe_fuzz_and_quick_runs_only_tests() {
        let names: Vec<_> = STEPS.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["fmt", "clippy", "no_std", "native", "musl", "test", "unsafe", "fuzz"]
        );
        let quick: Vec<_> = STEPS.iter().filter(|s| s.quick).map(|s| s.name).collect();
        assert_eq!(quick, ["test"]);
        assert!(STEPS[5].command.contains("--profile test-release"));
        assert!(STEPS[2].command.contains("x86_64-unknown-none"));
        assert!(STEPS[3].command.contains("x86_64-unknown-none"));
        assert!(STEPS[4].command.contains("x86_64-unknown-linux-musl"));
    }

    #[test]
    fn command_splits_words_and_runs_in_root() {
        let dir = TempDir::new("cmd");
        let c = command(&STEPS[1], &dir.0);
        assert_eq!(c.get_program(), "cargo");
        let args: Vec<_> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings"
            ]
        );
        assert_eq!(c.get_current_dir(), Some(dir.0.as_path()));
    }

    #[test]
    fn the_test_step_can_be_narrowed_to_some_tests() {
        let dir = TempDir::new("narrow");
        let whole = test_command(&STEPS[5], &dir.0, &[]);
        assert_eq!(whole.get_args().count(), 4);
        let narrow = test_command(&STEPS[5], &dir.0, &["-p".into(), "ebb-userstack".into()]);
        let args: Vec<_> = narrow
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            ["test", "--profile", "test-release", "-p", "ebb-userstack"]
        );
        assert_eq!(narrow.get_current_dir(), Some(dir.0.as_path()));
    }

    const FAKE: &[Step] = &[
        Step {
            name: "one",
            command: "true",
            quick: false,
            note: "",
        },
        Step {
            name: "two",
            command: "false",
            quick: true,
            note: "fails",
        },
        Step {
            name: "three",
            command: "true",
            quick: true,
            note: "",
        },
    ];

    #[test]
    fn stops_at_first_failure() {
        let dir = TempDir::new("fail");
        assert_eq!(run_all(FAKE, &dir.0, false, &[]), 1);
        assert_eq!(run_all(&FAKE[..1], &dir.0, false, &[]), 0);
        // --quick skips "one"; "two" still fails.
        assert_eq!(run_all(FAKE, &dir.0, true, &[]), 1);
        assert_eq!(run_all(&[FAKE[0], FAKE[2]], &dir.0, true, &[]), 0);
    }

    #[test]
    fn sigint_death_is_an_interruption() {
        let dir = TempDir::new("sigint");
        let steps = [Step {
            name: "x",
            command: "sh -c kill${IFS}-INT${IFS}$$",
            quick: true,
            note: "",
        }];
        assert_eq!(run_all(&steps, &dir.0, false, &[]), 130);
    }

    #[test]
    fn missing_program_fails_the_step() {
        let dir = TempDir::new("missing");
        let steps = [Step {
            name: "x",
            command: "/nonexistent/ebb-step",
            quick: true,
            note: "",
        }];
        assert_eq!(run_all(&steps, &dir.0, false, &[]), 1);
    }

    #[test]
    fn summary_is_aligned() {
        let table = summary(
            FAKE,
            &[Outcome::Passed(1.5), Outcome::Failed(10.0), Outcome::NotRun],
        );
        assert_eq!(
            table,
            "step   result   seconds\n\
             one    passed       1.5\n\
             two    FAILED      10.0\n\
             three  not run        -\n"
        );
        let skipped = summary(&FAKE[..1], &[Outcome::Skipped]);
        assert_eq!(skipped, "step  result   seconds\none   skipped        -\n");
    }
}
