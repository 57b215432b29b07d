//! C programs built for the POSIX personality (issue 18): compiled
//! against Ebbflow's musl ([`crate::musl`]), then linked with a platform
//! that provides `__ebb_syscall`, `__ebb_clone` and `__ebb_unmapself`:
//! hosted, into a static executable with `ebb-posix-hosted`'s library
//! (built by [`build_hosted_personality`]); natively, into a native image
//! by `apps/c-program`, which takes [`native_inputs`]. And the same
//! sources built as an ordinary Linux program (the system's gcc and
//! glibc), the reference a personality's output is compared with.

use std::fs;
use std::path::{Path, PathBuf};

use crate::command::{run, RunFailure};
use crate::musl::{MuslBuild, MuslFlags};

/// The hosted personality's package, built for the freestanding target
/// (its `Cargo.toml` says why).
pub const HOSTED_PERSONALITY: &str = "ebb-posix-hosted";
/// Where cargo puts it.
pub const FREESTANDING_TARGET: &str = "x86_64-unknown-none";

/// Why a program could not be built.
#[derive(Debug)]
pub enum ProgramError {
    /// A tool (gcc, cargo) failed: which step, and how.
    Step {
        /// What was being done.
        step: String,
        /// How it failed.
        failure: RunFailure,
    },
    /// A file operation failed.
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        error: std::io::Error,
    },
}

impl std::fmt::Display for ProgramError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProgramError::Step { step, failure } => write!(f, "{step} failed: {failure}"),
            ProgramError::Io { what, error } => write!(f, "{what}: {error}"),
        }
    }
}

impl std::error::Error for ProgramError {}

/// The user-space stack's personality: a static library with Rust's
/// std for musl (its `Cargo.toml` says why).
pub const USERSTACK_PERSONALITY: &str = "ebb-posix-userstack";
/// Its target.
pub const MUSL_TARGET: &str = "x86_64-unknown-linux-musl";

/// What a C program links besides musl: a personality's libraries, and
/// the flags it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Personality {
    /// Static libraries, in the group with musl's `libc.a`.
    pub libraries: Vec<PathBuf>,
    /// Linker flags.
    pub link_flags: Vec<String>,
}

impl Personality {
    /// The hosted personality: its one library.
    #[must_use]
    pub fn hosted(library: PathBuf) -> Personality {
        Personality {
            libraries: vec![library],
            link_flags: Vec::new(),
        }
    }
}

/// Builds the user-space stack's personality ([`USERSTACK_PERSONALITY`])
/// for [`MUSL_TARGET`] into `target_dir`: the library, Rust's own
/// `libunwind.a` for that target (std's unwinder, which the
/// toolchain ships with the target and a staticlib leaves out), and
/// `--wrap=main` (the library's `__wrap_main` starts the program).
///
/// Built without LTO: the release profile's thin LTO left this
/// staticlib's `#[no_mangle]` entries in LLVM bitcode that the system
/// linker cannot read (`nm` saw no `__ebb_syscall`).
///
/// # Errors
///
/// cargo or rustc fails (the target not installed: `./ebb` installs it).
pub fn build_userstack_personality(
    workspace: &Path,
    target_dir: &Path,
) -> Result<Personality, ProgramError> {
    let library = build_staticlib(
        workspace,
        target_dir,
        USERSTACK_PERSONALITY,
        MUSL_TARGET,
        &[("CARGO_PROFILE_RELEASE_LTO", "false")],
    )?;
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let sysroot = step(
        "rustc --print sysroot",
        run(&rustc, &["--print", "sysroot"], workspace),
    )?;
    let libunwind = Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(MUSL_TARGET)
        .join("lib/self-contained/libunwind.a");
    if !libunwind.is_file() {
        return Err(ProgramError::Io {
            what: format!("finding Rust's unwinder for {MUSL_TARGET}"),
            error: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "{} is missing: install the target with `rustup target add {MUSL_TARGET}`",
                    libunwind.display()
                ),
            ),
        });
    }
    Ok(Personality {
        libraries: vec![library, libunwind],
        link_flags: vec!["-Wl,--wrap=main".to_owned()],
    })
}

/// Builds the hosted personality's static library with `cargo` (the
/// `CARGO` the caller runs under, else the one on the path) from the
/// workspace at `workspace`, into `target_dir`; the library's path.
pub fn build_hosted_personality(
    workspace: &Path,
    target_dir: &Path,
) -> Result<PathBuf, ProgramError> {
    build_staticlib(
        workspace,
        target_dir,
        HOSTED_PERSONALITY,
        FREESTANDING_TARGET,
        &[],
    )
}

/// `cargo build --release -p PACKAGE --target TARGET` (the `CARGO` the
/// caller runs under, else the one on the path) from `workspace` into
/// `target_dir`, with `env` added; the package's static library.
fn build_staticlib(
    workspace: &Path,
    target_dir: &Path,
    package: &str,
    target: &str,
    env: &[(&str, &str)],
) -> Result<PathBuf, ProgramError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let target_arg = target_dir.to_string_lossy().into_owned();
    let args = [
        "build",
        "--release",
        "--quiet",
        "-p",
        package,
        "--target",
        target,
        "--target-dir",
        &target_arg,
    ];
    step(
        &format!("cargo build -p {package} --target {target}"),
        crate::command::run_with_env(&cargo, &args, workspace, env, &[]),
    )?;
    let library = format!("lib{}.a", package.replace('-', "_"));
    Ok(target_dir.join(target).join("release").join(library))
}

/// Compiles `sources` against `musl`'s headers with its flags, then
/// `extra_cflags` (later flags win: `-mred-zone` undoes musl's
/// `-mno-red-zone`), and the program's own headers in `include_dirs`,
/// into `objects_dir`; the objects, in the order of `sources`.
pub fn compile_with_musl(
    musl: &MuslBuild,
    sources: &[PathBuf],
    include_dirs: &[PathBuf],
    extra_cflags: &[String],
    objects_dir: &Path,
) -> Result<Vec<PathBuf>, ProgramError> {
    fs::create_dir_all(objects_dir).map_err(io(format!("creating {}", objects_dir.display())))?;
    // gcc's own headers (stdarg.h's builtins, intrinsics) stay visible;
    // the C library's are musl's alone.
    let gcc_include = gcc_print("-print-file-name=include")?;
    let cflags = MuslFlags::default().cflags;
    let include = musl.include_dir.to_string_lossy().into_owned();
    let own_includes: Vec<String> = include_dirs
        .iter()
        .map(|dir| format!("-I{}", dir.display()))
        .collect();
    let mut objects = Vec::new();
    for source in sources {
        let stem = source.file_stem().unwrap_or_default().to_string_lossy();
        let object = objects_dir.join(format!("{stem}.o"));
        let (source_arg, object_arg) = (lossy(source), lossy(&object));
        let mut args: Vec<&str> = cflags.split_whitespace().collect();
        args.extend(extra_cflags.iter().map(String::as_str));
        args.extend(own_includes.iter().map(String::as_str));
        args.extend([
            "-nostdinc",
            "-isystem",
            &include,
            "-isystem",
            &gcc_include,
            "-c",
            &source_arg,
            "-o",
            &object_arg,
        ]);
        step(
            &format!("compiling {source_arg}"),
            run("gcc", &args, Path::new("/")),
        )?;
        objects.push(object);
    }
    Ok(objects)
}

/// What a native image links for a program of `objects`: the objects
/// and musl's `libc.a` (the image's linker resolves archives in any
/// order); `apps/c-program` takes them in `EBB_C_PROGRAM`, joined by `:`.
/// Not gcc's `libgcc.a`: Debian builds it with the red zone, which an
/// interrupt on the same stack would overwrite natively; the image's own
/// `compiler_builtins` (built for `x86_64-unknown-none`, no red zone)
/// provides the same helpers.
pub fn native_inputs(musl: &MuslBuild, objects: &[PathBuf]) -> Vec<PathBuf> {
    let mut inputs = objects.to_vec();
    inputs.push(musl.libc_a.clone());
    inputs
}

/// Links `objects` with musl and `personality` into the static
/// executable `out` (hosted).
pub fn link_with_musl(
    musl: &MuslBuild,
    personality: &Personality,
    objects: &[PathBuf],
    out: &Path,
) -> Result<PathBuf, ProgramError> {
    let libgcc = gcc_print("-print-libgcc-file-name")?;
    let (crt1, crti, crtn) = (lossy(&musl.crt1), lossy(&musl.crti), lossy(&musl.crtn));
    let (libc, out_arg) = (lossy(&musl.libc_a), lossy(out));
    let libraries: Vec<String> = personality.libraries.iter().map(|l| lossy(l)).collect();
    let objects: Vec<String> = objects.iter().map(|object| lossy(object)).collect();
    // crt1 and crti first, crtn last (musl's INSTALL); libc and the
    // personality need each other, hence the group.
    let mut args = vec!["-static", "-nostdlib"];
    args.extend(personality.link_flags.iter().map(String::as_str));
    args.extend(["-o", &out_arg, &crt1, &crti]);
    args.extend(objects.iter().map(String::as_str));
    args.extend(["-Wl,--start-group", &libc]);
    args.extend(libraries.iter().map(String::as_str));
    args.extend([&libgcc, "-Wl,--end-group", &crtn]);
    step(
        &format!("linking {out_arg}"),
        run("gcc", &args, Path::new("/")),
    )?;
    Ok(out.to_owned())
}

/// `gcc ARG`'s answer (a path), trimmed.
pub(crate) fn gcc_print(arg: &str) -> Result<String, ProgramError> {
    run("gcc", &[arg], Path::new("/"))
        .map(|path| path.trim().to_owned())
        .map_err(|failure| ProgramError::Step {
            step: format!("asking gcc {arg}"),
            failure,
        })
}

/// Builds `sources` as an ordinary Linux program (gcc, glibc, threads
/// on, libm) with the program's own code generation flags and headers in
/// `include_dirs` into `out`: the reference.
pub fn build_for_linux(
    sources: &[PathBuf],
    include_dirs: &[PathBuf],
    extra_cflags: &[String],
    out: &Path,
) -> Result<PathBuf, ProgramError> {
    let out_arg = lossy(out);
    let source_args: Vec<String> = sources.iter().map(|source| lossy(source)).collect();
    let own_includes: Vec<String> = include_dirs
        .iter()
        .map(|dir| format!("-I{}", dir.display()))
        .collect();
    let mut args = vec!["-O2", "-pthread", "-o", &out_arg];
    args.extend(extra_cflags.iter().map(String::as_str));
    args.extend(own_includes.iter().map(String::as_str));
    args.extend(source_args.iter().map(String::as_str));
    args.push("-lm");
    step(
        &format!("building {out_arg} for Linux"),
        run("gcc", &args, Path::new("/")),
    )?;
    Ok(out.to_owned())
}

fn lossy(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn step<T>(step: &str, result: Result<T, RunFailure>) -> Result<T, ProgramError> {
    result.map_err(|failure| ProgramError::Step {
        step: step.to_owned(),
        failure,
    })
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> ProgramError {
    move |error| ProgramError::Io { what, error }
}
