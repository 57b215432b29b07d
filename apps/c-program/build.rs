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
    // Each archive is named through a link of its own in one directory
    // of ours, numbered in input order: `-l:NAME` takes the first NAME on
    // the search path, so the archives' own directories (which may hold
    // other archives of the same name) are never searched.
    let links = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("archives");
    let _ = std::fs::remove_dir_all(&links);
    std::fs::create_dir_all(&links).expect("creating OUT_DIR/archives");
    println!("cargo::rustc-link-search=native={}", links.display());
    for (index, input) in inputs
        .split(':')
        .filter(|input| !input.is_empty())
        .enumerate()
    {
        println!("cargo::rerun-if-changed={input}");
        let path = Path::new(input);
        match path.file_name().and_then(|name| name.to_str()) {
            Some(name) if name.ends_with(".a") => {
                let linked = format!("{index:04}-{name}");
                let absolute = std::fs::canonicalize(path)
                    .unwrap_or_else(|error| panic!("EBB_C_PROGRAM names {input}: {error}"));
                std::os::unix::fs::symlink(&absolute, links.join(&linked))
                    .unwrap_or_else(|error| panic!("linking {input} into OUT_DIR: {error}"));
                println!("cargo::rustc-link-lib=static:+verbatim={linked}");
            }
            _ => println!("cargo::rustc-link-arg-bins={input}"),
        }
    }
}
