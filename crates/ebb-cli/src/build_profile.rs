//! Which cargo profile `./ebb` builds the programs it starts with: the
//! profile it was itself built with. `./ebb` runs `target/release/ebb-cli`
//! (release); a test of the CLI runs `target/test-release/ebb-cli`
//! (`cargo test --profile test-release`), and then the apps it starts are
//! built in that profile too, beside it, instead of a second, LTO
//! build in `release` that the tests do not need.

use std::path::{Path, PathBuf};

/// A cargo profile and the directory under the target directory that
/// cargo writes it to (`dev` writes to `debug`, every other profile to
/// its own name: The Cargo Book, "Profiles", and "Build cache").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// What `cargo build --profile` takes.
    pub name: String,
    /// `target/<dir>`.
    pub dir: String,
}

impl Profile {
    /// The release profile, for a program not run from a target
    /// directory.
    #[must_use]
    pub fn release() -> Profile {
        Profile::from_dir("release")
    }

    fn from_dir(dir: &str) -> Profile {
        let name = if dir == "debug" { "dev" } else { dir };
        Profile {
            name: name.to_owned(),
            dir: dir.to_owned(),
        }
    }
}

/// The target directory cargo builds `root`'s workspace into:
/// `CARGO_TARGET_DIR` (`target_dir_env`) or `root/target`.
#[must_use]
pub fn target_dir(root: &Path, target_dir_env: Option<std::ffi::OsString>) -> PathBuf {
    target_dir_env.map_or_else(|| root.join("target"), PathBuf::from)
}

/// The profile of the program at `exe` if it was built into
/// `target/<profile>/` (or `target/<profile>/deps/`, where a test's own
/// binary lives); release otherwise (installed elsewhere, or built for
/// another target, `target/<triple>/<profile>/`).
#[must_use]
pub fn profile_of(exe: &Path, target: &Path) -> Profile {
    let Some(mut dir) = exe.parent() else {
        return Profile::release();
    };
    if dir.file_name().is_some_and(|name| name == "deps") {
        dir = dir.parent().unwrap_or(dir);
    }
    let in_target = dir.parent().is_some_and(|parent| same_dir(parent, target));
    match dir.file_name().and_then(|name| name.to_str()) {
        Some(name) if in_target => Profile::from_dir(name),
        _ => Profile::release(),
    }
}

/// Whether `a` and `b` name one directory (through symlinks when both
/// exist).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The profile of this very program (see [`profile_of`]).
#[must_use]
pub fn calling_profile(target: &Path) -> Profile {
    std::env::current_exe().map_or_else(|_| Profile::release(), |exe| profile_of(&exe, target))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(exe: &str) -> String {
        profile_of(Path::new(exe), Path::new("/r/target")).name
    }

    #[test]
    fn the_profile_is_the_directory_the_program_was_built_into() {
        // `./ebb`: target/release/ebb-cli.
        assert_eq!(of("/r/target/release/ebb-cli"), "release");
        // A test of the CLI under `cargo test --profile test-release`.
        assert_eq!(of("/r/target/test-release/ebb-cli"), "test-release");
        // A test's own binary.
        assert_eq!(of("/r/target/test-release/deps/cli-1a2b"), "test-release");
        // `cargo build` (the dev profile writes to debug).
        let dev = profile_of(Path::new("/r/target/debug/ebb-cli"), Path::new("/r/target"));
        assert_eq!(
            dev,
            Profile {
                name: "dev".into(),
                dir: "debug".into()
            }
        );
    }

    #[test]
    fn a_program_outside_the_target_directory_builds_release() {
        assert_eq!(of("/usr/local/bin/ebb-cli"), "release");
        assert_eq!(of("/elsewhere/test-release/ebb-cli"), "release");
        // Built for another target: not where hosted programs go.
        assert_eq!(of("/r/target/x86_64-unknown-none/release/x"), "release");
        assert_eq!(of("ebb-cli"), "release");
    }

    #[test]
    fn cargo_target_dir_moves_the_target_directory() {
        assert_eq!(target_dir(Path::new("/r"), None), Path::new("/r/target"));
        assert_eq!(
            target_dir(Path::new("/r"), Some("/t".into())),
            Path::new("/t")
        );
    }
}
