//! The POSIX personality's test programs (`crates/ebb-posix/programs`):
//! each `NAME.c` there is one program (the headers beside them are
//! shared), built twice: with Ebbflow's musl and the hosted personality's
//! library (`NAME`), and for Linux as the reference (`NAME.linux`); its
//! musl objects (`NAME.objects/`) are what a native image links.

use std::fs;
use std::path::{Path, PathBuf};

use crate::c_program::{
    build_for_linux, build_hosted_personality, build_userstack_personality, compile_with_musl,
    link_with_musl, native_inputs, Personality, ProgramError,
};
use crate::debian_source::{self, SourceError};
use crate::musl::{self, MuslBuild, MuslError, MuslFlags};

/// One program, built both ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltProgram {
    /// Its name: the source file's stem.
    pub name: String,
    /// Built with musl and the hosted personality.
    pub ebbflow: PathBuf,
    /// What a native image links for it (`apps/c-program`'s
    /// `EBB_C_PROGRAM`, joined by `:`).
    pub native_inputs: Vec<PathBuf>,
    /// Built for Linux (gcc, glibc).
    pub linux: PathBuf,
}

/// The programs in `programs_dir`, by name, in name order.
pub fn sources(programs_dir: &Path) -> Result<Vec<(String, PathBuf)>, ProgramError> {
    let entries = fs::read_dir(programs_dir).map_err(|error| ProgramError::Io {
        what: format!("reading {}", programs_dir.display()),
        error,
    })?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|extension| extension == "c") {
            let name = path
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            found.push((name, path));
        }
    }
    found.sort();
    Ok(found)
}

/// Builds every program of `programs_dir` into `out_dir`, with `musl` and
/// the personality library `personality`, and for Linux.
pub fn build_all(
    musl: &MuslBuild,
    personality: &Path,
    programs_dir: &Path,
    out_dir: &Path,
) -> Result<Vec<BuiltProgram>, ProgramError> {
    fs::create_dir_all(out_dir).map_err(|error| ProgramError::Io {
        what: format!("creating {}", out_dir.display()),
        error,
    })?;
    let mut built = Vec::new();
    for (name, source) in sources(programs_dir)? {
        let extra_cflags = cflags_of(&source)?;
        let sources = [source];
        let objects_dir = out_dir.join(format!("{name}.objects"));
        let objects = compile_with_musl(musl, &sources, &[], &extra_cflags, &objects_dir)?;
        let ebbflow = link_with_musl(
            musl,
            &Personality::hosted(personality.to_owned()),
            &objects,
            &out_dir.join(&name),
        )?;
        let linux_out = out_dir.join(format!("{name}.linux"));
        let linux = build_for_linux(&sources, &[], &extra_cflags, &linux_out)?;
        built.push(BuiltProgram {
            native_inputs: native_inputs(musl, &objects),
            name,
            ebbflow,
            linux,
        });
    }
    Ok(built)
}

/// The extra compiler flags a program asks for on a line of its own:
/// `/* ebb-cflags: FLAG ... */` (e.g. `redzone.c`'s `-mred-zone`). A
/// flag that is not `-m…` or `-f…` is refused: the line is for code
/// generation, not for paths or definitions.
pub fn cflags_of(source: &Path) -> Result<Vec<String>, ProgramError> {
    let text = fs::read_to_string(source).map_err(|error| ProgramError::Io {
        what: format!("reading {}", source.display()),
        error,
    })?;
    let Some(line) = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("/* ebb-cflags:"))
    else {
        return Ok(Vec::new());
    };
    let flags: Vec<String> = line
        .trim_end_matches("*/")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let is_codegen =
        |flag: &&String| (flag.starts_with("-m") || flag.starts_with("-f")) && !flag.contains('/');
    if let Some(bad) = flags.iter().find(|flag| !is_codegen(flag)) {
        return Err(ProgramError::Io {
            what: format!("{}: ebb-cflags", source.display()),
            error: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{bad} is not a -m or -f code generation flag without a path"),
            ),
        });
    }
    Ok(flags)
}

/// Why the programs could not be prepared.
#[derive(Debug)]
pub enum PrepareError {
    /// musl's source could not be had.
    Source(SourceError),
    /// musl did not build.
    Musl(MuslError),
    /// The personality or a program did not build.
    Program(ProgramError),
}

impl PrepareError {
    /// Whether the machine lacks what apt needs (no `deb-src` entry, no
    /// network): a reason for a test to skip, not a failure.
    #[must_use]
    pub fn is_unavailable_source(&self) -> bool {
        matches!(
            self,
            PrepareError::Source(SourceError::NoDebSrc(_) | SourceError::Download { .. })
        )
    }
}

impl std::fmt::Display for PrepareError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrepareError::Source(error) => error.fmt(f),
            PrepareError::Musl(error) => error.fmt(f),
            PrepareError::Program(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for PrepareError {}

/// Where [`prepare`] works.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// The workspace's root (the programs are in
    /// `crates/ebb-posix/programs`; cargo runs here).
    pub workspace: PathBuf,
    /// Cargo's target directory: the personality goes under it, the
    /// programs to `posix-programs/`.
    pub target_dir: PathBuf,
    /// Where source packages are unpacked.
    pub source_cache: PathBuf,
    /// Where musl builds go.
    pub musl_out: PathBuf,
}

impl Dirs {
    /// The defaults under `target_dir`: `debian-src/`, `musl/`.
    #[must_use]
    pub fn under(workspace: &Path, target_dir: &Path) -> Dirs {
        Dirs {
            workspace: workspace.to_owned(),
            target_dir: target_dir.to_owned(),
            source_cache: target_dir.join("debian-src"),
            musl_out: target_dir.join("musl"),
        }
    }
}

/// What every C program here is built with (each step cached): musl
/// from Debian's source, and the hosted personality's library.
///
/// # Errors
///
/// musl's source cannot be had, or musl or the personality does not
/// build.
pub fn musl_and_personality(dirs: &Dirs) -> Result<(MuslBuild, PathBuf), PrepareError> {
    let tree = debian_source::fetch("musl", &dirs.source_cache).map_err(PrepareError::Source)?;
    let musl =
        musl::build(&tree, &dirs.musl_out, &MuslFlags::default()).map_err(PrepareError::Musl)?;
    let personality = build_hosted_personality(&dirs.workspace, &dirs.target_dir)
        .map_err(PrepareError::Program)?;
    Ok((musl, personality))
}

/// Everything the programs need, built (each step cached): musl from
/// Debian's source, the hosted personality, and every program both ways.
pub fn prepare(dirs: &Dirs) -> Result<(MuslBuild, Vec<BuiltProgram>), PrepareError> {
    let (musl, personality) = musl_and_personality(dirs)?;
    let programs = build_all(
        &musl,
        &personality,
        &dirs.workspace.join("crates/ebb-posix/programs"),
        &dirs.target_dir.join("posix-programs"),
    )
    .map_err(PrepareError::Program)?;
    Ok((musl, programs))
}

/// Every program (built by [`prepare`] first, each step cached) linked
/// with the user-space stack's personality too: `posix-programs/NAME.userstack`,
/// by name.
///
/// # Errors
///
/// As [`prepare`], or the user-space stack's personality does not build
/// (the musl Rust target missing).
pub fn prepare_userstack(dirs: &Dirs) -> Result<Vec<(String, PathBuf)>, PrepareError> {
    let (musl, programs) = prepare(dirs)?;
    let personality = build_userstack_personality(&dirs.workspace, &dirs.target_dir)
        .map_err(PrepareError::Program)?;
    let out_dir = dirs.target_dir.join("posix-programs");
    programs
        .into_iter()
        .map(|program| {
            let objects_dir = out_dir.join(format!("{}.objects", program.name));
            let objects: Vec<PathBuf> = program
                .native_inputs
                .iter()
                .filter(|input| input.starts_with(&objects_dir))
                .cloned()
                .collect();
            let out = out_dir.join(format!("{}.userstack", program.name));
            link_with_musl(&musl, &personality, &objects, &out)
                .map(|linked| (program.name, linked))
                .map_err(PrepareError::Program)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_programs_are_found_in_name_order() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ebb-posix/programs");
        let names: Vec<String> = sources(&dir)
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            names,
            [
                "events",
                "exitcode",
                "files",
                "math",
                "memory",
                "packed",
                "process",
                "redzone",
                "signals",
                "syscall_cost",
                "threads",
                "time",
                "unknown"
            ]
        );
    }

    #[test]
    fn a_program_asks_for_its_own_code_generation_flags() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ebb-posix/programs");
        assert_eq!(cflags_of(&dir.join("redzone.c")).unwrap(), ["-mred-zone"]);
        assert!(cflags_of(&dir.join("time.c")).unwrap().is_empty());
        let bad = std::env::temp_dir().join(format!("ebb-cflags-{}.c", std::process::id()));
        fs::write(&bad, "/* ebb-cflags: -Dx=1 */\n").unwrap();
        let error = cflags_of(&bad).unwrap_err().to_string();
        assert!(error.contains("-Dx=1 is not a -m or -f"), "{error}");
        fs::write(&bad, "/* ebb-cflags: -fplugin=/tmp/p.so */\n").unwrap();
        assert!(cflags_of(&bad).is_err(), "a path in a flag");
        fs::remove_file(&bad).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let error = sources(Path::new("/no/such/programs")).unwrap_err();
        assert!(error.to_string().contains("/no/such/programs"), "{error}");
    }
}
