//! Redis, unchanged (issue 19): Debian's `redis` source package built by
//! Redis's own Makefile, its compiler the musl wrapper (`musl_cc.rs`), so
//! that `redis-server` is linked with Ebbflow's musl and the hosted POSIX
//! personality. Nothing of the source package is changed: the build
//! prints 0 changed lines of ours, and the lines Debian's own patches
//! change against upstream.
//!
//! Make's settings (`src/Makefile`): `MALLOC=libc` (musl's allocator,
//! which the personality's memory calls serve, rather than the bundled
//! jemalloc, which would need its own port), `USE_SYSTEMD=no` and
//! `BUILD_TLS=no` (no libsystemd or OpenSSL built for musl). The bundled
//! dependencies (Lua, hiredis, linenoise, hdr_histogram) build with the
//! same compiler. Flags from the caller's environment (`CFLAGS`,
//! `OPTIMIZATION`, ...) are kept out: Redis records them in the objects
//! for good.
//!
//! The objects are cached per Redis version, musl build, gcc, compiler
//! command and settings. The link is made on every call, since the
//! personality changes with the workspace: by running the link command
//! Redis's Makefile printed when the objects were built (recorded in the
//! cache), never `make` in the shared cache, whose every run rewrites
//! files there (its C11 probe, `.make-settings`).

use std::fs;
use std::path::{Path, PathBuf};

use crate::c_program::ProgramError;
use crate::c_program::{build_userstack_personality, Personality};
use crate::cache_dir::place_stamped;
use crate::command::{run, run_with_env};
use crate::debian_source::{self, SourceTree};
use crate::musl::MuslBuild;
use crate::musl_cc::write_wrapper;
use crate::posix_programs::{musl_and_personality, Dirs, PrepareError};
use crate::stable_hash::fnv1a64;

/// The stamp of a finished object build.
const STAMP: &str = ".ebb-built";

/// The link command recorded in the object build: one argument a line.
const LINK_FILE: &str = ".ebb-link";

/// The output name the recorded link command is printed with.
const LINK_PLACEHOLDER: &str = "ebb-link-output";

/// Make's settings for a Redis on Ebbflow's musl (see the module's text).
const MAKE_SETTINGS: &[&str] = &["MALLOC=libc", "USE_SYSTEMD=no", "BUILD_TLS=no"];

/// Make's settings for stock Redis, the comparison (`prepare_stock`):
/// ours, so that the two differ in their C library and OS alone. Its
/// allocator is the C library's (glibc's) malloc: Debian's source
/// package drops Redis's bundled jemalloc (Debian links the system's),
/// and with the same `MALLOC=libc` a test that differs is the OS layer's.
const STOCK_SETTINGS: &[&str] = MAKE_SETTINGS;

/// The stamp of a finished stock build.
const STOCK_STAMP: &str = ".ebb-stock-built";

/// Variables of the caller's environment Redis's Makefiles would take in.
const KEPT_OUT: &[&str] = &[
    "CFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "OPTIMIZATION",
    "PROG_SUFFIX",
    "MALLOC",
    "REDIS_CFLAGS",
    "REDIS_LDFLAGS",
    "V",
    "SANITIZER",
    "USE_SYSTEM_JEMALLOC",
    "OPENSSL_PREFIX",
    "PKG_CONFIG",
    "MAKEFLAGS",
    "MFLAGS",
    "MAKELEVEL",
];

/// Redis, built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisBuild {
    /// The version (Debian's).
    pub version: String,
    /// `redis-server`, linked with musl and the hosted personality.
    pub server: PathBuf,
    /// What a native image links (`apps/c-program`'s `EBB_C_PROGRAM`):
    /// the objects and archives of Redis's own link command, then musl.
    pub native_inputs: Vec<PathBuf>,
    /// The built source tree, with the recorded link command
    /// ([`link_userstack`] links from it).
    pub objects: PathBuf,
}

/// Stock Redis, for comparisons: the same source package built by its
/// own Makefile with Debian's gcc and glibc ([`STOCK_SETTINGS`]); cached
/// per version and gcc. Returns the source
/// tree it was built in (its `src/redis-server`, and `tests/` with
/// Redis's own test suite).
///
/// # Errors
///
/// The source package cannot be had, or Redis does not build.
pub fn prepare_stock(dirs: &Dirs) -> Result<PathBuf, PrepareError> {
    let tree = debian_source::fetch("redis", &dirs.source_cache).map_err(PrepareError::Source)?;
    let built = (|| {
        let out_dir = std::path::absolute(dirs.target_dir.join("redis"))
            .map_err(io("making the output directory absolute".to_owned()))?;
        fs::create_dir_all(&out_dir).map_err(io(format!("creating {}", out_dir.display())))?;
        let compiler = run("gcc", &["-dumpfullversion"], Path::new("/")).unwrap_or_default();
        let inputs = format!(
            "{} stock {} {}",
            tree.version,
            compiler.trim(),
            STOCK_SETTINGS.join(" ")
        );
        let key = fnv1a64(inputs.as_bytes());
        let dir = out_dir.join(format!("redis-stock-{}-{key:016x}", tree.version));
        if dir.join(STOCK_STAMP).exists() {
            return Ok(dir);
        }
        let work = work_copy(
            &tree,
            &out_dir.join(format!(".tmp-redis-stock-{}", std::process::id())),
        )?;
        let built = make(&work, "gcc", STOCK_SETTINGS, &["redis-server"]).and_then(|_| {
            fs::write(work.join(STOCK_STAMP), &tree.version).map_err(io("stamping".to_owned()))?;
            place_stamped(&work, &dir, STOCK_STAMP)
                .map_err(|(what, error)| ProgramError::Io { what, error })
        });
        let _ = fs::remove_dir_all(&work);
        built.map(|()| dir)
    })();
    built.map_err(PrepareError::Program)
}

/// Builds Redis's server (each step cached but the link). Prints the
/// source and the changed-line counts when `say` is set.
///
/// # Errors
///
/// The source package cannot be had, or musl, the personality or Redis
/// does not build.
pub fn prepare(dirs: &Dirs, say: bool) -> Result<RedisBuild, PrepareError> {
    let (musl, personality) = musl_and_personality(dirs)?;
    let tree = debian_source::fetch("redis", &dirs.source_cache).map_err(PrepareError::Source)?;
    if say {
        println!("source redis {}: {}", tree.version, tree.dir.display());
        // Built as it comes: no line of the source package is patched.
        println!("changed lines against upstream: 0");
        if let Some(debian) = debian_patch_lines(&tree) {
            println!("(Debian's own patches in the source package change {debian} lines of upstream Redis)");
        }
    }
    let built = (|| {
        let out_dir = out_dir(dirs)?;
        let cc = write_wrapper(
            &musl,
            &Personality::hosted(personality),
            &out_dir.join("ebb-musl-cc"),
        )?;
        let objects = objects(&tree, &musl, &cc, &out_dir)?;
        let server = link_server(&objects, None, &out_dir.join("redis-server"))?;
        let recorded = fs::read_to_string(objects.join(LINK_FILE))
            .map_err(io("reading the recorded link command".to_owned()))?;
        let mut native_inputs = linked_files(&recorded, &objects.join("src"));
        native_inputs.push(musl.libc_a.clone());
        Ok(RedisBuild {
            version: tree.version.clone(),
            server,
            native_inputs,
            objects,
        })
    })();
    built.map_err(PrepareError::Program)
}

/// Links `build`'s objects with the user-space stack's personality
/// (`ebb-posix-userstack`): `redis-server-userstack`, whose sockets,
/// epoll sets, eventfds and pipes are Ebbflow's, over a TAP device.
///
/// # Errors
///
/// musl or the personality does not build (the musl Rust target is not
/// installed), or the link fails.
pub fn link_userstack(dirs: &Dirs, build: &RedisBuild) -> Result<PathBuf, PrepareError> {
    let (musl, _) = musl_and_personality(dirs)?;
    let personality = build_userstack_personality(&dirs.workspace, &dirs.target_dir)
        .map_err(PrepareError::Program)?;
    let linked = (|| {
        let out_dir = out_dir(dirs)?;
        let cc = write_wrapper(&musl, &personality, &out_dir.join("ebb-musl-cc-userstack"))?;
        link_server(
            &build.objects,
            Some(&cc),
            &out_dir.join("redis-server-userstack"),
        )
    })();
    linked.map_err(PrepareError::Program)
}

/// `target/redis`, absolute (Redis's Makefile runs in another
/// directory), made if missing; the compiler command's path in it may
/// hold no spaces, since make takes `CC=` as words.
fn out_dir(dirs: &Dirs) -> Result<PathBuf, ProgramError> {
    let out_dir = std::path::absolute(dirs.target_dir.join("redis"))
        .map_err(io("making the output directory absolute".to_owned()))?;
    fs::create_dir_all(&out_dir).map_err(io(format!("creating {}", out_dir.display())))?;
    if out_dir.to_string_lossy().contains(char::is_whitespace) {
        return Err(ProgramError::Step {
            step: "choosing the compiler command's path".to_owned(),
            failure: crate::command::RunFailure::NotStarted(format!(
                "{}: make takes CC= as words, so the target directory may not hold spaces",
                out_dir.display()
            )),
        });
    }
    Ok(out_dir)
}

/// The lines Debian's patches (`debian/patches/series`) add or remove,
/// if the source package has them.
fn debian_patch_lines(tree: &SourceTree) -> Option<usize> {
    let patches = tree.dir.join("debian/patches");
    let series = fs::read_to_string(patches.join("series")).ok()?;
    let mut changed = 0;
    for name in series.lines().map(str::trim) {
        if name.is_empty() || name.starts_with('#') {
            continue;
        }
        changed += changed_lines(&fs::read_to_string(patches.join(name)).ok()?);
    }
    Some(changed)
}

/// The lines a unified diff adds or removes: inside each hunk, as many
/// old and new lines as its `@@ -a,b +c,d @@` header says, so that the
/// text around the hunks (a commit message, a `-- ` signature) counts
/// for nothing.
fn changed_lines(patch: &str) -> usize {
    let (mut old_left, mut new_left, mut changed) = (0usize, 0usize, 0usize);
    for line in patch.lines() {
        if old_left == 0 && new_left == 0 {
            if let Some((old, new)) = hunk_sizes(line) {
                (old_left, new_left) = (old, new);
            }
            continue;
        }
        match line.as_bytes().first() {
            Some(b'-') => {
                old_left = old_left.saturating_sub(1);
                changed += 1;
            }
            Some(b'+') => {
                new_left = new_left.saturating_sub(1);
                changed += 1;
            }
            Some(b'\\') => {} // "\ No newline at end of file"
            _ => {
                old_left = old_left.saturating_sub(1);
                new_left = new_left.saturating_sub(1);
            }
        }
    }
    changed
}

/// The old and new line counts of a hunk header `@@ -a[,b] +c[,d] @@`
/// (a missing count is 1).
fn hunk_sizes(line: &str) -> Option<(usize, usize)> {
    let ranges = line.strip_prefix("@@ -")?.split(" @@").next()?;
    let (old, new) = ranges.split_once(" +")?;
    let count = |range: &str| match range.split_once(',') {
        Some((_, count)) => count.parse().ok(),
        None => range.parse::<usize>().ok().map(|_| 1),
    };
    Some((count(old)?, count(new)?))
}

/// The tree of compiled objects (cached): a copy of the source package
/// in which Redis's Makefile built the server once, with its link command
/// recorded.
fn objects(
    tree: &SourceTree,
    musl: &MuslBuild,
    cc: &Path,
    out_dir: &Path,
) -> Result<PathBuf, ProgramError> {
    let compiler = run("gcc", &["-dumpfullversion"], Path::new("/")).unwrap_or_default();
    let wrapper = fs::read(cc).map_err(io(format!("reading {}", cc.display())))?;
    let musl_name = musl.dir.file_name().unwrap_or_default().to_string_lossy();
    let inputs = format!(
        "{} {musl_name} {} {} {}",
        tree.version,
        compiler.trim(),
        fnv1a64(&wrapper),
        MAKE_SETTINGS.join(" ")
    );
    let key = fnv1a64(inputs.as_bytes());
    let dir = out_dir.join(format!("redis-{}-{key:016x}", tree.version));
    if dir.join(STAMP).exists() {
        return Ok(dir);
    }
    let work = work_copy(
        tree,
        &out_dir.join(format!(".tmp-redis-{}", std::process::id())),
    )?;
    let cc = cc.to_string_lossy();
    let built = make(&work, &cc, MAKE_SETTINGS, &["redis-server"]).and_then(|_| {
        // The link command, printed (`-n`) in full (`V=1`) for an output
        // that does not exist, so that nothing else is out of date.
        let target = format!("REDIS_SERVER_NAME={LINK_PLACEHOLDER}");
        let printed = make(
            &work,
            &cc,
            MAKE_SETTINGS,
            &["-n", "V=1", &target, LINK_PLACEHOLDER],
        )?;
        let link = link_arguments(&printed).ok_or_else(|| ProgramError::Step {
            step: "recording Redis's link command".to_owned(),
            failure: crate::command::RunFailure::Failed {
                status: "no link command".to_owned(),
                output: crate::command::tail(&printed, 30),
            },
        })?;
        fs::write(work.join(LINK_FILE), link.join("\n"))
            .map_err(io("recording the link command".to_owned()))?;
        fs::write(work.join(STAMP), &tree.version).map_err(io("stamping".to_owned()))?;
        place_stamped(&work, &dir, STAMP).map_err(|(what, error)| ProgramError::Io { what, error })
    });
    let _ = fs::remove_dir_all(&work);
    built.map(|()| dir)
}

/// A fresh copy of the source tree at `work`, to build in: the source
/// cache stays as apt unpacked it.
fn work_copy(tree: &SourceTree, work: &Path) -> Result<PathBuf, ProgramError> {
    let _ = fs::remove_dir_all(work);
    let source = tree.dir.to_string_lossy().into_owned();
    let work_arg = work.to_string_lossy().into_owned();
    step(
        "copying the source",
        run("cp", &["-a", &source, &work_arg], Path::new("/")),
    )?;
    Ok(work.to_path_buf())
}

/// The arguments of the printed command that links [`LINK_PLACEHOLDER`]
/// (Redis's link line has no quoted words: the compiler's path has no
/// spaces, which [`prepare`] checks, and the objects' names none).
fn link_arguments(printed: &str) -> Option<Vec<String>> {
    printed
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|words| {
            words
                .windows(2)
                .any(|pair| pair == ["-o", LINK_PLACEHOLDER])
        })
        .map(|words| words.into_iter().map(str::to_owned).collect())
}

/// The objects and archives a recorded link command names, as paths
/// from `dir` (where it runs): what a native image links in its place
/// (its libraries, `-lm` and the like, are musl's `libc.a`).
fn linked_files(recorded: &str, dir: &Path) -> Vec<PathBuf> {
    recorded
        .lines()
        .skip(1)
        .filter(|arg| {
            !arg.starts_with('-')
                && Path::new(arg)
                    .extension()
                    .is_some_and(|ext| ext == "o" || ext == "a")
        })
        .map(|arg| dir.join(arg))
        .collect()
}

/// Links `redis-server` from the objects in `objects` by the recorded
/// command, with the compiler it recorded (the hosted personality's
/// wrapper, which carries the current personality) or `compiler`, to a
/// name of its own (two builds at once never write one file), then
/// renames it to `server`.
fn link_server(
    objects: &Path,
    compiler: Option<&Path>,
    server: &Path,
) -> Result<PathBuf, ProgramError> {
    let recorded = fs::read_to_string(objects.join(LINK_FILE))
        .map_err(io("reading the recorded link command".to_owned()))?;
    let linked = server.with_extension(format!("link-{}", std::process::id()));
    let linked_arg = linked.to_string_lossy().into_owned();
    let compiler_arg = compiler.map(|path| path.to_string_lossy().into_owned());
    let mut args: Vec<&str> = recorded.lines().collect();
    let Some((program, rest)) = args.split_first_mut() else {
        return Err(ProgramError::Io {
            what: "reading the recorded link command".to_owned(),
            error: std::io::Error::other("it is empty"),
        });
    };
    if let Some(compiler) = &compiler_arg {
        *program = compiler;
    }
    for arg in rest.iter_mut() {
        if *arg == LINK_PLACEHOLDER {
            *arg = &linked_arg;
        }
    }
    let linking = step("link", run(program, rest, &objects.join("src")).map(|_| ()));
    let moved = linking.and_then(|()| {
        fs::rename(&linked, server).map_err(io(format!(
            "moving {} to {}",
            linked.display(),
            server.display()
        )))
    });
    if moved.is_err() {
        let _ = fs::remove_file(&linked);
    }
    moved.map(|()| server.to_owned())
}

/// `make -C src` in `tree` with the compiler `cc` and `settings`, then
/// `args`; what it printed. Redis's `mkreleasehdr.sh` asks git for a
/// commit: pointed at no repository, it records none (rather than the
/// Ebbflow checkout that holds `target/`), and `SOURCE_DATE_EPOCH` makes
/// its build id the same on every build.
fn make(tree: &Path, cc: &str, settings: &[&str], args: &[&str]) -> Result<String, ProgramError> {
    let jobs = std::thread::available_parallelism().map_or(1, usize::from);
    let (jobs, cc) = (format!("-j{jobs}"), format!("CC={cc}"));
    let mut make_args = vec!["-C", "src", &jobs, &cc];
    make_args.extend(settings);
    make_args.extend(args);
    let no_git = tree.join(".no-git").to_string_lossy().into_owned();
    let env = [("GIT_DIR", no_git.as_str()), ("SOURCE_DATE_EPOCH", "0")];
    step(
        &format!("make {}", args.join(" ")),
        run_with_env("make", &make_args, tree, &env, KEPT_OUT),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lines_inside_hunks_count() {
        let patch = "From: someone\n\
                     Subject: [PATCH] fix\n\
                     - a bullet in the message\n\
                     ---\n\
                     --- a/src/x.c\n\
                     +++ b/src/x.c\n\
                     @@ -1,3 +1,3 @@\n\
                     \x20kept\n\
                     --- a Lua comment removed\n\
                     +-- a Lua comment added\n\
                     \x20kept\n\
                     @@ -10 +10,2 @@\n\
                     -one\n\
                     +two\n\
                     +three\n\
                     -- \n\
                     2.39.2\n";
        assert_eq!(changed_lines(patch), 5);
        assert_eq!(hunk_sizes("@@ -10 +10,2 @@ fn x()"), Some((1, 2)));
        assert_eq!(hunk_sizes("@@ nonsense"), None);
    }

    #[test]
    fn a_native_image_links_the_objects_and_archives_of_the_link_command() {
        let recorded = "/t/ebb-musl-cc\n-g\n-o\nebb-link-output\nserver.o\nzmalloc.o\n\
                        ../deps/lua/src/liblua.a\n-lm\n-pthread";
        assert_eq!(
            linked_files(recorded, Path::new("/r/src")),
            [
                Path::new("/r/src/server.o"),
                Path::new("/r/src/zmalloc.o"),
                Path::new("/r/src/../deps/lua/src/liblua.a")
            ]
        );
    }

    #[test]
    fn the_link_command_is_found_among_what_make_printed() {
        let printed = "make: Entering directory '/x/src'\n\
                       /t/ebb-musl-cc  -g -ggdb -rdynamic -o ebb-link-output adlist.o ae.o \
                       ../deps/lua/src/liblua.a -lm -ldl\n\
                       make: Leaving directory '/x/src'\n";
        let link = link_arguments(printed).unwrap();
        assert_eq!(link[0], "/t/ebb-musl-cc");
        assert!(link.windows(2).any(|pair| pair == ["-o", LINK_PLACEHOLDER]));
        assert_eq!(link.last().map(String::as_str), Some("-ldl"));
        assert_eq!(link_arguments("cc -c a.c -o a.o\n"), None);
    }
}
