//! The in-guest tests' platform-neutral part, run on the hosted platform
//! (the native run is `crates/ebb-cli/tests/native_guest.rs`).

use std::process::Command;

const TESTS: &str = env!("CARGO_BIN_EXE_native-tests");

#[test]
fn the_shared_tests_pass_hosted_on_1_and_4_cores() {
    for cores in [1, 4] {
        let output = Command::new(TESTS)
            .args(["--cores", &cores.to_string(), "--no-pin"])
            .output()
            .expect("run native-tests");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            stdout.contains(&format!("ebb-test: start 4 tests on {cores} cores")),
            "{stdout}"
        );
        assert!(
            stdout.contains("ebb-test: summary: passed 4, failed 0"),
            "{stdout}"
        );
    }
}
