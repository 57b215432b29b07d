//! musl for Ebbflow: a copy of Debian's musl source tree, patched so that
//! every system call is a call ([`crate::musl_patch`]), built as a static
//! `libc.a` with the start files (`crt1.o`, `crti.o`, `crtn.o`) and the
//! installed headers.
//!
//! Builds are cached under `out_dir/musl-VERSION-KEY`, where KEY hashes
//! the patch and the compiler flags: `./ebb test` builds it once, and a
//! changed patch or flag builds anew. A build happens in a temporary
//! directory renamed into place when complete, marked by a stamp file.

use std::fs;
use std::path::{Path, PathBuf};

use crate::cache_dir::place_stamped;
use crate::command::{run, RunFailure};
use crate::debian_source::SourceTree;
use crate::musl_patch::REPLACEMENTS;
use crate::patch::{self, PatchError, PatchReport};
use crate::stable_hash::fnv1a64;

/// The flags musl is compiled with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MuslFlags {
    /// CFLAGS passed to musl's configure (added to musl's own).
    pub cflags: String,
}

impl Default for MuslFlags {
    /// What the native target needs: no red zone (an interrupt on the
    /// same stack would overwrite it) and no stack protector (it reads a
    /// canary through the FS base before any thread pointer is set).
    fn default() -> Self {
        MuslFlags {
            cflags: "-mno-red-zone -fno-stack-protector -O2".to_owned(),
        }
    }
}

/// A finished build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MuslBuild {
    /// The build's directory (cached).
    pub dir: PathBuf,
    /// The static C library.
    pub libc_a: PathBuf,
    /// The program entry object (`_start`).
    pub crt1: PathBuf,
    /// The prologue of `_init`/`_fini`, linked before every other object.
    pub crti: PathBuf,
    /// Their epilogue, linked after every other object.
    pub crtn: PathBuf,
    /// The installed headers (`make install-headers`).
    pub include_dir: PathBuf,
    /// The patched files alone, at their paths in the tree.
    pub patched_dir: PathBuf,
    /// Changed lines against upstream.
    pub patch: PatchReport,
}

/// Why musl could not be built.
#[derive(Debug)]
pub enum MuslError {
    /// The patch does not apply to this tree.
    Patch(PatchError),
    /// A build step failed: which, and the end of its output.
    Step {
        /// The step (configure, make, ...).
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

impl std::fmt::Display for MuslError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MuslError::Patch(error) => write!(f, "patching musl: {error}"),
            MuslError::Step { step, failure } => {
                write!(f, "building musl: {step} failed: {failure}")
            }
            MuslError::Io { what, error } => write!(f, "building musl: {what}: {error}"),
        }
    }
}

impl std::error::Error for MuslError {}

impl From<PatchError> for MuslError {
    fn from(error: PatchError) -> Self {
        MuslError::Patch(error)
    }
}

/// The stamp that marks a complete build.
const STAMP: &str = ".ebb-built";

/// What a build leaves, in `lib/`; a change here is a new cache key.
const LIB_FILES: [&str; 4] = ["libc.a", "crt1.o", "crti.o", "crtn.o"];

/// The cache key of a build: the patch, the flags and what it leaves.
pub fn build_key(flags: &MuslFlags) -> u64 {
    let key = format!(
        "{:016x} {} {}",
        patch::fingerprint(REPLACEMENTS),
        flags.cflags,
        LIB_FILES.join(" ")
    );
    fnv1a64(key.as_bytes())
}

/// The patch's report for `tree` without building (what a build prints).
pub fn patch_report(tree: &SourceTree) -> Result<PatchReport, MuslError> {
    Ok(patch::apply(&tree.dir, REPLACEMENTS)?.report)
}

/// Builds musl from `tree` under `out_dir`, or returns the cached build.
pub fn build(tree: &SourceTree, out_dir: &Path, flags: &MuslFlags) -> Result<MuslBuild, MuslError> {
    // Applied in memory first: a tree the patch does not fit fails here,
    // even when an old build is cached.
    let patched = patch::apply(&tree.dir, REPLACEMENTS)?;
    // Absolute: configure and make run in the copied tree.
    let out_dir =
        &std::path::absolute(out_dir).map_err(io(format!("resolving {}", out_dir.display())))?;
    // The compiler is part of the key: an upgraded gcc rebuilds.
    let compiler = run("gcc", &["-dumpfullversion"], &tree.dir)
        .map(|version| version.trim().to_owned())
        .unwrap_or_default();
    let key = build_key(flags) ^ fnv1a64(compiler.as_bytes());
    let name = format!("musl-{}-{key:016x}", tree.version);
    let dir = out_dir.join(&name);
    let result = |dir: &Path| MuslBuild {
        libc_a: dir.join("lib/libc.a"),
        crt1: dir.join("lib/crt1.o"),
        crti: dir.join("lib/crti.o"),
        crtn: dir.join("lib/crtn.o"),
        include_dir: dir.join("include"),
        patched_dir: dir.join("patched"),
        dir: dir.to_owned(),
        patch: patched.report.clone(),
    };
    if dir.join(STAMP).exists() {
        return Ok(result(&dir));
    }
    let work = out_dir.join(format!(".tmp-{name}-{}", std::process::id()));
    let built = build_in(tree, &patched, &work, flags).and_then(|()| {
        place_stamped(&work, &dir, STAMP).map_err(|(what, error)| MuslError::Io { what, error })
    });
    let _ = fs::remove_dir_all(&work);
    built.map(|()| result(&dir))
}

/// Copies, patches, configures and builds in `work`.
fn build_in(
    tree: &SourceTree,
    patched: &patch::PatchedFiles,
    work: &Path,
    flags: &MuslFlags,
) -> Result<(), MuslError> {
    let _ = fs::remove_dir_all(work);
    fs::create_dir_all(work).map_err(io(format!("creating {}", work.display())))?;
    let source = work.join("src");
    let tree_arg = format!("{}/.", tree.dir.display());
    let source_arg = source.to_string_lossy().into_owned();
    step(
        "copying the source tree",
        run("cp", &["-a", &tree_arg, &source_arg], work),
    )?;
    patch::write(&source, patched)?;
    let prefix = format!("--prefix={}", work.display());
    let cflags = format!("CFLAGS={}", flags.cflags);
    // musl's INSTALL: configure, then make; only the static library and
    // the start files are built (no libc.so, no dynamic linker).
    step(
        "configure",
        run(
            "./configure",
            &[&prefix, "--disable-shared", &cflags],
            &source,
        ),
    )?;
    step(
        "make",
        run(
            "make",
            &[
                "-j2",
                "lib/libc.a",
                "lib/crt1.o",
                "lib/crti.o",
                "lib/crtn.o",
            ],
            &source,
        ),
    )?;
    let includedir = format!("includedir={}", work.join("include").display());
    step(
        "make install-headers",
        run("make", &["install-headers", &includedir], &source),
    )?;
    let lib = work.join("lib");
    fs::create_dir_all(&lib).map_err(io(format!("creating {}", lib.display())))?;
    for file in LIB_FILES {
        fs::rename(source.join("lib").join(file), lib.join(file))
            .map_err(io(format!("moving lib/{file}")))?;
    }
    // The patched files alone stay, to read and to diff against upstream.
    patch::write(&work.join("patched"), patched)?;
    fs::remove_dir_all(&source).map_err(io(format!("removing {}", source.display())))?;
    fs::write(work.join(STAMP), format!("{}\n", flags.cflags))
        .map_err(io("stamping the build".to_owned()))
}

fn step<T>(step: &str, result: Result<T, RunFailure>) -> Result<T, MuslError> {
    result.map_err(|failure| MuslError::Step {
        step: step.to_owned(),
        failure,
    })
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> MuslError {
    move |error| MuslError::Io { what, error }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_changes_with_the_flags() {
        let other = MuslFlags {
            cflags: "-O0".to_owned(),
        };
        assert_ne!(build_key(&MuslFlags::default()), build_key(&other));
        assert_eq!(
            build_key(&MuslFlags::default()),
            build_key(&MuslFlags::default())
        );
    }
}
