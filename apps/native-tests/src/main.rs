//! The in-guest tests' entry points: native (`native.rs`, the point of this
//! package: `./ebb run native-tests --native`) and hosted (this `main`,
//! the same tests in a Linux process: `./ebb run native-tests`).

#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod native;

#[cfg(not(target_os = "none"))]
fn main() -> std::process::ExitCode {
    use std::process::ExitCode;

    use ebb_hosted::{Config, OPTIONS_HELP};

    let (config, filters) = match Config::from_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(error) => {
            eprintln!("native-tests: {error}\n\nusage: native-tests [OPTIONS] [FILTER...]\n{OPTIONS_HELP}");
            return ExitCode::from(2);
        }
    };
    let filters: &'static [String] = filters.leak();
    let console = native_tests::Console {
        line: |line| println!("{line}"),
    };
    match ebb_hosted::run(config, move || {
        native_tests::run_tests(console, filters, &[])
    }) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("native-tests: {error}");
            ExitCode::FAILURE
        }
    }
}
