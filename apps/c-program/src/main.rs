//! A C program as a native image (issue 18): Ebbflow's native platform
//! boots, then the POSIX personality starts the linked program
//! (`ebb_posix_native::start_c_program`), whose system calls the library
//! OS serves and whose exit code ends the image. Build it with the
//! program to link in `EBB_C_PROGRAM` (`build.rs`).
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
ebb_native::entry!(start);

#[cfg(all(target_os = "none", not(no_c_program)))]
fn start(args: &[&str]) -> i32 {
    ebb_posix_native::start_c_program("c-program", args)
}

#[cfg(all(target_os = "none", no_c_program))]
fn start(_args: &[&str]) -> i32 {
    ebb_native::arch::x86_64::console::print(format_args!(
        "c-program: no C program was linked into this image (build it with EBB_C_PROGRAM, see apps/c-program/build.rs)\n"
    ));
    2
}

#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!(
        "c-program is a native image (./ebb run c-program --native); hosted, a C program links ebb-posix-hosted (crates/ebb-cbuild)"
    );
    std::process::exit(2);
}
