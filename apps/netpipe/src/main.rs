//! `netpipe`'s entry points: hosted (`hosted.rs`) and native (`native.rs`,
//! built for `x86_64-unknown-none` by `./ebb run netpipe --native`). The
//! servers themselves are the library (`lib.rs`).

#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(not(target_os = "none"))]
mod hosted;
#[cfg(target_os = "none")]
mod native;

#[cfg(not(target_os = "none"))]
fn main() -> std::process::ExitCode {
    hosted::main()
}
