//! Links the C program named by `EBB_C_PROGRAM` into the native image:
//! a list of object files and archives (the program's objects and musl's
//! `libc.a`) separated by `:`, as `ebb-cbuild posix-programs` prints it on
//! its `native NAME INPUTS` lines. Without it the image says no program was
//! linked (cfg `no_c_program`), so `cargo build --workspace` and clippy
//! build this crate too.
//!
//! Objects are link arguments. Archives are native libraries instead, so
//! that they come before Rust's `compiler_builtins` on the linker's
//! command line: on `x86_64-unknown-none` it defines the C math functions
//! (`log`, `ceil`, ...) for a soft-float ABI, arguments in integer
//! registers, and the linker takes a symbol from the first archive that
//! has it. After it, a C program's `log(x)` returned `x` (Redis's latency
//! histograms then failed to start); before it, musl's `libm` wins.

use std::collections::BTreeSet;
use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(no_c_program)");
    println!("cargo::rerun-if-env-changed=EBB_C_PROGRAM");
    let native = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "none");
    let inputs = std::env::var("EBB_C_PROGRAM").unwrap_or_default();
    if !native || inputs.is_empty() {
        println!("cargo::rustc-cfg=no_c_program");
        return;
    }
    let mut archive_names = BTreeSet::new();
    for input in inputs.split(':').filter(|input| !input.is_empty()) {
        println!("cargo::rerun-if-changed={input}");
        let path = Path::new(input);
        let name = path.file_name().and_then(|name| name.to_str());
        let dir = path.parent().and_then(Path::to_str);
        match (name, dir) {
            // `-l:NAME` finds the first NAME on the search path: two
            // archives of one name stay link arguments, in their order.
            (Some(name), Some(dir))
                if name.ends_with(".a") && archive_names.insert(name.to_owned()) =>
            {
                println!("cargo::rustc-link-search=native={dir}");
                println!("cargo::rustc-link-lib=static:+verbatim={name}");
            }
            _ => println!("cargo::rustc-link-arg-bins={input}"),
        }
    }
}
