//! `hello`'s entry points: hosted (this file's `main`) and native
//! (`native.rs`, built for `x86_64-unknown-none` by `./ebb run hello
//! --native`). The application itself is the library (`lib.rs`).

#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
mod native;

#[cfg(not(target_os = "none"))]
fn main() -> std::process::ExitCode {
    use std::process::ExitCode;

    use ebb_hosted::{Config, OPTIONS_HELP};
    use hello::USAGE;

    let (config, rest) = match Config::from_args(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(error) => {
            eprintln!("hello: {error}\n\n{USAGE}\n{OPTIONS_HELP}");
            return ExitCode::from(2);
        }
    };
    if rest.iter().any(|arg| arg == "--help" || arg == "-h") {
        println!("{USAGE}\n{OPTIONS_HELP}");
        return ExitCode::SUCCESS;
    }
    if let Some(arg) = rest.first() {
        eprintln!("hello: unexpected argument '{arg}'\n\n{USAGE}\n{OPTIONS_HELP}");
        return ExitCode::from(2);
    }
    let console = hello::Console {
        out: |line| println!("{line}"),
        err: |line| eprintln!("{line}"),
    };
    match ebb_hosted::run(config, move || hello::say_hello(console)) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(error) => {
            eprintln!("hello: {error}");
            ExitCode::FAILURE
        }
    }
}
