//! Links the C program named by `EBB_C_PROGRAM` into the native image:
//! a list of object files and archives (the program's objects and musl's
//! `libc.a`) separated by `:`, as `ebb-cbuild posix-programs` prints it on
//! its `native NAME INPUTS` lines. Without it the image says no program was
//! linked (cfg `no_c_program`), so `cargo build --workspace` and clippy
//! build this crate too.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(no_c_program)");
    println!("cargo::rerun-if-env-changed=EBB_C_PROGRAM");
    let native = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "none");
    let inputs = std::env::var("EBB_C_PROGRAM").unwrap_or_default();
    if !native || inputs.is_empty() {
        println!("cargo::rustc-cfg=no_c_program");
        return;
    }
    for input in inputs.split(':').filter(|input| !input.is_empty()) {
        println!("cargo::rerun-if-changed={input}");
        println!("cargo::rustc-link-arg-bins={input}");
    }
}
