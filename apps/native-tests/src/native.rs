//! The in-guest tests as a native image: `./ebb run native-tests --native
//! [--cores N] [-- FILTER...]`. Exits 0 when every selected test passed.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

ebb_native::entry!(main);

fn main(args: &[&str]) -> i32 {
    let filters: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    let filters: &'static [String] = filters.leak();
    let console = native_tests::Console {
        line: |line| ebb_native::println!("{line}"),
    };
    match ebb_native::run(move || native_tests::run_tests(console, filters)) {
        Ok(code) => code,
        Err(error) => {
            ebb_native::println!("native-tests: {error}");
            1
        }
    }
}
