//! Redis, unchanged (issue 19): Debian's `redis` source package built by
//! Redis's own Makefile, its compiler the musl wrapper (`musl_cc.rs`), so
//! that `redis-server` is linked with Ebbflow's musl and the hosted POSIX
//! personality. Nothing of Redis is changed: the changed-line count
//! against the source package is 0, and the build says so.
//!
//! Make's settings (`src/Makefile`): `MALLOC=libc` (musl's allocator,
//! which the personality's memory calls serve, rather than the bundled
//! jemalloc, which would need its own port), `USE_SYSTEMD=no` and
//! `BUILD_TLS=no` (no libsystemd or OpenSSL built for musl). The bundled
//! dependencies (Lua, hiredis, linenoise, hdr_histogram) build with the
//! same compiler.
//!
//! The objects are cached per Redis version, musl build and gcc; the link
//! is made on every call, since the personality changes with the
//! workspace.

use std::fs;
use std::path::{Path, PathBuf};

use crate::c_program::{build_hosted_personality, ProgramError};
use crate::cache_dir::place_stamped;
use crate::command::{run, run_with_env};
use crate::debian_source::{self, SourceTree};
use crate::musl::{self, MuslBuild, MuslFlags};
use crate::musl_cc::write_wrapper;
use crate::posix_programs::{Dirs, PrepareError};
use crate::stable_hash::fnv1a64;

/// The stamp of a finished object build.
const STAMP: &str = ".ebb-built";

/// Make's settings for a Redis on Ebbflow's musl (see the module's text).
const MAKE_SETTINGS: &[&str] = &["MALLOC=libc", "USE_SYSTEMD=no", "BUILD_TLS=no"];

/// Redis, built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisBuild {
    /// The version (Debian's).
    pub version: String,
    /// `redis-server`, linked with musl and the hosted personality.
    pub server: PathBuf,
}

/// Builds Redis's server (each step cached but the link). Prints the
/// source and the changed-line count when `say` is set.
///
/// # Errors
///
/// The source package cannot be had, or musl, the personality or Redis
/// does not build.
pub fn prepare(dirs: &Dirs, say: bool) -> Result<RedisBuild, PrepareError> {
    let musl_tree =
        debian_source::fetch("musl", &dirs.source_cache).map_err(PrepareError::Source)?;
    let musl = musl::build(&musl_tree, &dirs.musl_out, &MuslFlags::default())
        .map_err(PrepareError::Musl)?;
    let personality = build_hosted_personality(&dirs.workspace, &dirs.target_dir)
        .map_err(PrepareError::Program)?;
    let tree = debian_source::fetch("redis", &dirs.source_cache).map_err(PrepareError::Source)?;
    if say {
        println!("source redis {}: {}", tree.version, tree.dir.display());
        // Built as it comes: no line of the source package is patched.
        println!("changed lines against upstream: 0");
    }
    let out_dir = dirs.target_dir.join("redis");
    fs::create_dir_all(&out_dir)
        .map_err(io(format!("creating {}", out_dir.display())))
        .map_err(PrepareError::Program)?;
    let cc = write_wrapper(&musl, &personality, &out_dir.join("ebb-musl-cc"))
        .map_err(PrepareError::Program)?;
    let built = (|| {
        let objects = objects(&tree, &musl, &cc, &out_dir)?;
        let server = link_server(&objects, &cc, &out_dir)?;
        Ok(RedisBuild {
            version: tree.version.clone(),
            server,
        })
    })();
    built.map_err(PrepareError::Program)
}

/// The tree of compiled objects (cached): a copy of the source package
/// in which Redis's Makefile built the server once.
fn objects(
    tree: &SourceTree,
    musl: &MuslBuild,
    cc: &Path,
    out_dir: &Path,
) -> Result<PathBuf, ProgramError> {
    let compiler = run("gcc", &["-dumpfullversion"], Path::new("/")).unwrap_or_default();
    let musl_name = musl.dir.file_name().unwrap_or_default().to_string_lossy();
    let key = fnv1a64(format!("{} {musl_name} {}", tree.version, compiler.trim()).as_bytes());
    let dir = out_dir.join(format!("redis-{}-{key:016x}", tree.version));
    if dir.join(STAMP).exists() {
        return Ok(dir);
    }
    let work = out_dir.join(format!(".tmp-redis-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    let source = tree.dir.to_string_lossy().into_owned();
    let work_arg = work.to_string_lossy().into_owned();
    // A copy: the source cache stays as apt unpacked it.
    step(
        "copying the source",
        run("cp", &["-a", &source, &work_arg], Path::new("/")),
    )?;
    let made = make(&work, cc, &["redis-server"]);
    let placed = made.and_then(|()| {
        fs::write(work.join(STAMP), &tree.version).map_err(io("stamping".to_owned()))?;
        place_stamped(&work, &dir, STAMP).map_err(|(what, error)| ProgramError::Io { what, error })
    });
    let _ = fs::remove_dir_all(&work);
    placed.map(|()| dir)
}

/// Links `redis-server` from the objects in `objects` with the current
/// personality, under a name of its own (two builds at once never write
/// one file), then renames it to `out_dir/redis-server`.
fn link_server(objects: &Path, cc: &Path, out_dir: &Path) -> Result<PathBuf, ProgramError> {
    let name = format!("redis-server.link-{}", std::process::id());
    let linked = objects.join("src").join(&name);
    let _ = fs::remove_file(&linked);
    make(objects, cc, &[&format!("REDIS_SERVER_NAME={name}"), &name])?;
    let server = out_dir.join("redis-server");
    fs::rename(&linked, &server).map_err(io(format!(
        "moving {} to {}",
        linked.display(),
        server.display()
    )))?;
    Ok(server)
}

/// `make -C src` in `tree` with the wrapper and [`MAKE_SETTINGS`], then
/// `args`. Redis's `mkreleasehdr.sh` asks git for a commit: pointed at no
/// repository, it records none (rather than the Ebbflow checkout that
/// holds `target/`), and `SOURCE_DATE_EPOCH` makes its build id the same
/// on every build.
fn make(tree: &Path, cc: &Path, args: &[&str]) -> Result<(), ProgramError> {
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let (jobs, cc) = (format!("-j{jobs}"), format!("CC={}", cc.display()));
    let mut make_args = vec!["-C", "src", &jobs, &cc];
    make_args.extend(MAKE_SETTINGS);
    make_args.extend(args);
    let no_git = tree.join(".no-git").to_string_lossy().into_owned();
    let env = [("GIT_DIR", no_git.as_str()), ("SOURCE_DATE_EPOCH", "0")];
    step(
        &format!("make {}", args.join(" ")),
        run_with_env("make", &make_args, tree, &env),
    )
    .map(|_| ())
}

fn step<T>(step: &str, result: Result<T, crate::command::RunFailure>) -> Result<T, ProgramError> {
    result.map_err(|failure| ProgramError::Step {
        step: format!("Redis's {step}"),
        failure,
    })
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> ProgramError {
    move |error| ProgramError::Io { what, error }
}
