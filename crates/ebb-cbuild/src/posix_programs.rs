//! The POSIX personality's test programs (`crates/ebb-posix/programs`):
//! each `NAME.c` there is one program (the headers beside them are
//! shared), built twice: with Ebbflow's musl and a personality's library
//! (`NAME`), and for Linux as the reference (`NAME.linux`).

use std::fs;
use std::path::{Path, PathBuf};

use crate::c_program::{build_for_linux, build_with_musl, ProgramError};
use crate::musl::MuslBuild;

/// One program, built both ways.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltProgram {
    /// Its name: the source file's stem.
    pub name: String,
    /// Built with musl and the personality.
    pub ebbflow: PathBuf,
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
        let sources = [source];
        let ebbflow = build_with_musl(musl, personality, &sources, &out_dir.join(&name))?;
        let linux = build_for_linux(&sources, &out_dir.join(format!("{name}.linux")))?;
        built.push(BuiltProgram {
            name,
            ebbflow,
            linux,
        });
    }
    Ok(built)
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
            ["files", "memory", "process", "threads", "time", "unknown"]
        );
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_it() {
        let error = sources(Path::new("/no/such/programs")).unwrap_err();
        assert!(error.to_string().contains("/no/such/programs"), "{error}");
    }
}
