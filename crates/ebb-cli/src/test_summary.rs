//! The closing lines of `./ebb test`'s test step: libtest's totals with
//! the skipped tests taken out of "passed".
//!
//! Stable libtest has no runtime skip, so a test whose prerequisite is
//! missing returns early and libtest counts it as passed; it also records
//! itself in the file named by `EBB_TEST_SKIPS` (`ebb_testbed::skip`,
//! see crates/ebb-testbed/README.md). The test step runs with that
//! variable set, its output is read as it streams by for libtest's `test
//! result:` lines, and the summary then says `tests: N passed, N failed,
//! N skipped`, where passed excludes the skipped ones.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{child, stop};

/// Where the test step's skips are collected, under the target directory.
pub fn skips_file(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("test-skips.txt")
}

/// libtest's totals over every test binary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Tests libtest counted as passed (the skipped ones among them).
    pub passed: usize,
    /// Tests that failed.
    pub failed: usize,
    /// `#[ignore]`d tests.
    pub ignored: usize,
}

impl Totals {
    /// Adds the counts of one `test result: ok. 3 passed; 0 failed; 1
    /// ignored; ...` line; other lines are left alone.
    pub fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(count)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(count) = count.parse::<usize>() else {
                continue;
            };
            match what {
                "passed" => self.passed += count,
                "failed" => self.failed += count,
                "ignored" => self.ignored += count,
                _ => {}
            }
        }
    }
}

/// The summary: each skipped test with its reason, then `tests: N passed,
/// N failed, N skipped`.
pub fn summary(totals: Totals, skips: &[(String, String)]) -> String {
    let mut out = String::new();
    if !skips.is_empty() {
        out.push_str(
            "skipped tests (a prerequisite is missing; counted as skipped, not passed):\n",
        );
        for (test, reason) in skips {
            out.push_str(&format!("  {test}: {reason}\n"));
        }
    }
    out.push_str(&format!(
        "tests: {} passed, {} failed, {} skipped\n",
        totals.passed.saturating_sub(skips.len()),
        totals.failed,
        skips.len()
    ));
    out
}

/// Runs the test step's `command` with `EBB_TEST_SKIPS` set (the file
/// emptied first), passing its stdout through while counting libtest's
/// results; returns its exit code and the summary.
pub fn run_counting(command: &mut Command, root: &Path) -> Result<(u8, String), String> {
    let skips = skips_file(root);
    if let Some(dir) = skips.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&skips, "").map_err(|e| format!("cannot empty {}: {e}", skips.display()))?;
    // Its own process group, so that a stop signal to `./ebb` reaches the
    // test binaries and the servers they started, not only cargo
    // (`stop::PassTo::Group`); the output is read on another thread
    // meanwhile.
    let mut child = command
        .env(ebb_testbed::need::SKIPS_ENV, &skips)
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", child::describe(command)))?;
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut totals = Totals::default();
        if let Some(stdout) = stdout {
            let mut out = std::io::stdout();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                totals.add_line(&line);
                let _ = writeln!(out, "{line}");
            }
        }
        totals
    });
    let status = stop::wait_passing(&mut child, stop::PassTo::Group)
        .map_err(|e| format!("waiting for the tests: {e}"))?;
    let totals = reader
        .join()
        .map_err(|_| "the thread reading the tests' output panicked".to_owned())?;
    let recorded = std::fs::read_to_string(&skips).unwrap_or_default();
    let skipped = ebb_testbed::need::read_skips(&recorded);
    Ok((child::exit_code(status), summary(totals, &skipped)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_add_up_and_other_lines_do_not_count() {
        let mut totals = Totals::default();
        for line in [
            "test result: ok. 36 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 10.27s",
            "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.1s",
            "test a::b ... ok",
            "running 4 tests",
        ] {
            totals.add_line(line);
        }
        assert_eq!(
            totals,
            Totals {
                passed: 39,
                failed: 2,
                ignored: 1
            }
        );
    }

    #[test]
    fn skipped_tests_are_listed_and_not_counted_as_passed() {
        let totals = Totals {
            passed: 10,
            failed: 0,
            ignored: 0,
        };
        let skips = [
            ("namespace::ping".to_owned(), "not root".to_owned()),
            ("native_mq::dhcp".to_owned(), "no /dev/net/tun".to_owned()),
        ];
        assert_eq!(
            summary(totals, &skips),
            "skipped tests (a prerequisite is missing; counted as skipped, not passed):\n  \
             namespace::ping: not root\n  native_mq::dhcp: no /dev/net/tun\n\
             tests: 8 passed, 0 failed, 2 skipped\n"
        );
        assert_eq!(
            summary(totals, &[]),
            "tests: 10 passed, 0 failed, 0 skipped\n"
        );
    }

    #[test]
    fn the_step_streams_its_output_and_reads_the_skips_it_recorded() {
        let dir = crate::root::tests::TempDir::new("skips");
        let mut command = Command::new("sh");
        command.env("CARGO_TARGET_DIR", dir.0.join("target")).args([
            "-c",
            "echo 'test result: ok. 5 passed; 0 failed; 0 ignored;'; \
             printf 't::one\\tnot root\\n' >> \"$EBB_TEST_SKIPS\"",
        ]);
        // CARGO_TARGET_DIR of this process decides the file; point the
        // child at the same one by passing it through the root.
        let (code, text) = run_counting(&mut command, &dir.0).expect("run");
        assert_eq!(code, 0);
        if std::env::var_os("CARGO_TARGET_DIR").is_none() {
            assert!(
                text.ends_with("  t::one: not root\ntests: 4 passed, 0 failed, 1 skipped\n"),
                "{text}"
            );
        }
    }
}
