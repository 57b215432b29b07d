//! SQLite, unchanged (issue 18): Debian's `sqlite3` source package, its
//! amalgamation (`sqlite3.c`, made by the tree's own `configure` and
//! `make sqlite3.c`, which need gcc and tclsh), and two programs on it,
//! each built three ways (with Ebbflow's musl and the hosted personality,
//! as objects a native image links, and for Linux):
//! - `speedtest1`: SQLite's own benchmark, `test/speedtest1.c`;
//! - `sqlite-kv`: our key-value load (`apps/sqlite-kv/sqlite-kv.c`).
//!
//! Nothing of SQLite is changed: the changed-line count against the
//! source package is 0, and the build says so. Compile-time options are
//! SQLite's defaults.

use std::fs;
use std::path::{Path, PathBuf};

use crate::c_program::{
    build_for_linux, compile_with_musl, link_with_musl, native_inputs, Personality, ProgramError,
};
use crate::cache_dir::place_stamped;
use crate::command::run;
use crate::debian_source::{self, SourceTree};
use crate::musl::MuslBuild;
use crate::posix_programs::{musl_and_personality, Dirs, PrepareError};
use crate::stable_hash::fnv1a64;

/// The stamp of a finished amalgamation or object build.
const STAMP: &str = ".ebb-built";

/// A program on SQLite, built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteProgram {
    /// Its name: `speedtest1` or `sqlite-kv`.
    pub name: String,
    /// The SQLite version (Debian's).
    pub version: String,
    /// Linked with musl and the hosted personality.
    pub ebbflow: PathBuf,
    /// Built for Linux (gcc, glibc).
    pub linux: PathBuf,
    /// What a native image links (`apps/c-program`'s `EBB_C_PROGRAM`).
    pub native_inputs: Vec<PathBuf>,
}

/// The amalgamation of `tree` under `out_dir` (cached): its directory,
/// holding `sqlite3.c` and `sqlite3.h`.
pub fn amalgamation(tree: &SourceTree, out_dir: &Path) -> Result<PathBuf, ProgramError> {
    let compiler = run("gcc", &["-dumpfullversion"], Path::new("/")).unwrap_or_default();
    let key = fnv1a64(format!("{} {}", tree.version, compiler.trim()).as_bytes());
    let dir = out_dir.join(format!("sqlite3-{}-{key:016x}", tree.version));
    if dir.join(STAMP).exists() {
        return Ok(dir);
    }
    let work = out_dir.join(format!(".tmp-sqlite3-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(io(format!("creating {}", work.display())))?;
    let configure = tree.dir.join("configure").to_string_lossy().into_owned();
    // Out of the source tree (SQLite's README: "building in a separate
    // directory"), without the Tcl extension, which only the test
    // harness needs; tclsh itself still generates the amalgamation.
    step("configure", run(&configure, &["--disable-tcl"], &work))?;
    step("make sqlite3.c", run("make", &["sqlite3.c"], &work))?;
    let placed = work.join("placed");
    fs::create_dir_all(&placed).map_err(io(format!("creating {}", placed.display())))?;
    for file in ["sqlite3.c", "sqlite3.h"] {
        fs::rename(work.join(file), placed.join(file)).map_err(io(format!("moving {file}")))?;
    }
    fs::write(placed.join(STAMP), &tree.version).map_err(io("stamping".to_owned()))?;
    let placed_result = place_stamped(&placed, &dir, STAMP)
        .map_err(|(what, error)| ProgramError::Io { what, error });
    let _ = fs::remove_dir_all(&work);
    placed_result.map(|()| dir)
}

/// Everything the SQLite programs need, built (each step cached but the
/// links): musl, the hosted personality, SQLite's amalgamation, and both
/// programs three ways. Prints the changed-line count when `say` is set.
pub fn prepare(dirs: &Dirs, say: bool) -> Result<Vec<SqliteProgram>, PrepareError> {
    let (musl, personality) = musl_and_personality(dirs)?;
    let tree = debian_source::fetch("sqlite3", &dirs.source_cache).map_err(PrepareError::Source)?;
    if say {
        println!("source sqlite3 {}: {}", tree.version, tree.dir.display());
        // Nothing of the source package is patched.
        println!("changed lines against upstream: 0");
    }
    let out_dir = dirs.target_dir.join("sqlite");
    let amalgamation = amalgamation(&tree, &out_dir).map_err(PrepareError::Program)?;
    let library = amalgamation.join("sqlite3.c");
    let includes = [amalgamation.clone()];
    let mains = [
        ("speedtest1", tree.dir.join("test/speedtest1.c")),
        (
            "sqlite-kv",
            dirs.workspace.join("apps/sqlite-kv/sqlite-kv.c"),
        ),
    ];
    let mut programs = Vec::new();
    for (name, main) in mains {
        let sources = [library.clone(), main.clone()];
        let built = (|| {
            let mut objects = musl_objects(
                &musl,
                std::slice::from_ref(&library),
                &includes,
                &amalgamation,
                "sqlite3",
            )?;
            objects.extend(musl_objects(
                &musl,
                &[main],
                &includes,
                &amalgamation,
                name,
            )?);
            let ebbflow = link_with_musl(
                &musl,
                &Personality::hosted(personality.clone()),
                &objects,
                &out_dir.join(name),
            )?;
            let linux = linux_build(&sources, &includes, &amalgamation, name)?;
            Ok(SqliteProgram {
                name: name.to_owned(),
                version: tree.version.clone(),
                ebbflow,
                linux,
                native_inputs: native_inputs(&musl, &objects),
            })
        })()
        .map_err(PrepareError::Program)?;
        programs.push(built);
    }
    Ok(programs)
}

/// The musl objects of `sources` under the name `name` (SQLite's own,
/// compiled once for every program, is large: a minute), cached beside
/// the amalgamation per musl build and checked against the sources'
/// modification times.
fn musl_objects(
    musl: &MuslBuild,
    sources: &[PathBuf],
    includes: &[PathBuf],
    amalgamation: &Path,
    name: &str,
) -> Result<Vec<PathBuf>, ProgramError> {
    let musl_name = musl.dir.file_name().unwrap_or_default().to_string_lossy();
    let dir = amalgamation.join(format!("objects-{name}-{musl_name}"));
    let objects: Vec<PathBuf> = sources
        .iter()
        .map(|source| {
            dir.join(format!(
                "{}.o",
                source.file_stem().unwrap_or_default().to_string_lossy()
            ))
        })
        .collect();
    if is_newer_than_sources(&dir.join(STAMP), sources) {
        return Ok(objects);
    }
    // Compiled aside and renamed into place whole, so that a run at the
    // same time never links a half-written object; the stamp is taken
    // before compiling, so a source changed meanwhile is newer than it.
    let work = amalgamation.join(format!(".tmp-objects-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(io(format!("creating {}", work.display())))?;
    fs::write(work.join(STAMP), "").map_err(io("stamping the objects".to_owned()))?;
    let compiled = compile_with_musl(musl, sources, includes, &[], &work);
    let placed = compiled.and_then(|_| {
        // A stale build (its sources changed) gives way.
        if dir.exists() && !is_newer_than_sources(&dir.join(STAMP), sources) {
            fs::remove_dir_all(&dir).map_err(io(format!("removing {}", dir.display())))?;
        }
        place_stamped(&work, &dir, STAMP).map_err(|(what, error)| ProgramError::Io { what, error })
    });
    let _ = fs::remove_dir_all(&work);
    placed.map(|()| objects)
}

/// Whether `stamp` exists and is newer than every one of `sources`.
fn is_newer_than_sources(stamp: &Path, sources: &[PathBuf]) -> bool {
    let modified = |path: &Path| fs::metadata(path).and_then(|meta| meta.modified()).ok();
    let Some(stamped) = modified(stamp) else {
        return false;
    };
    sources
        .iter()
        .all(|source| modified(source).is_some_and(|time| time <= stamped))
}

/// A program for Linux, cached beside the amalgamation.
fn linux_build(
    sources: &[PathBuf],
    includes: &[PathBuf],
    amalgamation: &Path,
    name: &str,
) -> Result<PathBuf, ProgramError> {
    let out = amalgamation.join(format!("{name}.linux"));
    let stamp = amalgamation.join(format!(".{name}.linux-built"));
    if out.exists() && is_newer_than_sources(&stamp, sources) {
        return Ok(out);
    }
    build_for_linux(sources, includes, &[], &out)?;
    fs::write(&stamp, "").map_err(io("stamping the Linux build".to_owned()))?;
    Ok(out)
}

fn step<T>(step: &str, result: Result<T, crate::command::RunFailure>) -> Result<T, ProgramError> {
    result.map_err(|failure| ProgramError::Step {
        step: format!("SQLite's {step}"),
        failure,
    })
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> ProgramError {
    move |error| ProgramError::Io { what, error }
}
