//! Building an application's native image: `cargo build` for
//! `x86_64-unknown-none` with the flags every native image needs, into a
//! target directory of its own. `./ebb run APP --native`, `./ebb cluster`,
//! the VM benchmarks and the cluster tests all build this way.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The bare-metal target native images are built for.
pub const TARGET: &str = "x86_64-unknown-none";
/// Where native images are built (its own target directory, so that its
/// flags never invalidate the hosted build, and so that a native build run
/// from inside `cargo test` does not wait on the outer build's lock).
pub const TARGET_DIR: &str = "target/native";

/// The flags every crate of a native image is compiled with: no PIE (the
/// 32-bit PVH entry needs absolute addresses), frame pointers (crash
/// backtraces), abort on panic, and the image's linker script (load at 1 MiB).
pub fn rustflags(root: &Path) -> Vec<String> {
    vec![
        "-Crelocation-model=static".to_owned(),
        "-Cforce-frame-pointers=yes".to_owned(),
        "-Cpanic=abort".to_owned(),
        format!(
            "-Clink-arg=-T{}",
            root.join("crates/ebb-native/link.ld").display()
        ),
        "-Clink-arg=--no-pie".to_owned(),
    ]
}

/// `cargo build` of `app`'s native image. The flags go in
/// `CARGO_ENCODED_RUSTFLAGS` (which takes precedence over any `RUSTFLAGS`
/// and keeps paths with spaces whole); with `--target`, they do not reach
/// build scripts.
pub fn build_command(root: &Path, app: &str) -> Command {
    let mut c = Command::new("cargo");
    c.args([
        "build",
        "--release",
        "-p",
        app,
        "--bin",
        app,
        "--target",
        TARGET,
    ])
    .arg("--target-dir")
    .arg(root.join(TARGET_DIR))
    .current_dir(root)
    .env("EBB_ROOT", root)
    .env("CARGO_ENCODED_RUSTFLAGS", rustflags(root).join("\x1f"))
    .env_remove("RUSTFLAGS");
    c
}

/// Where `build_command` leaves the image.
pub fn image_path(root: &Path, app: &str) -> PathBuf {
    root.join(TARGET_DIR).join(TARGET).join("release").join(app)
}

/// Builds `app`'s native image (cargo's output goes to this process's
/// stderr) and returns its path; for tests and frontend programs. The
/// build is cargo's: a second call finds it fresh at once.
pub fn build(root: &Path, app: &str) -> Result<PathBuf, String> {
    let status = build_command(root, app)
        .status()
        .map_err(|e| format!("cannot run cargo to build {app}'s native image: {e}"))?;
    if !status.success() {
        return Err(format!(
            "building the native image of '{app}' failed ({status})"
        ));
    }
    Ok(image_path(root, app))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_uses_its_own_target_dir_and_static_flags() {
        let c = build_command(Path::new("/r"), "hello");
        let words = crate::qemu::shell_words(&c);
        assert_eq!(
            words,
            "cargo build --release -p hello --bin hello --target x86_64-unknown-none --target-dir /r/target/native"
        );
        let flags = c
            .get_envs()
            .find(|(k, _)| *k == "CARGO_ENCODED_RUSTFLAGS")
            .and_then(|(_, v)| v)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(flags.contains("-Crelocation-model=static\x1f"), "{flags}");
        assert!(
            flags.contains("-Clink-arg=-T/r/crates/ebb-native/link.ld"),
            "{flags}"
        );
        assert_eq!(
            image_path(Path::new("/r"), "hello"),
            Path::new("/r/target/native/x86_64-unknown-none/release/hello")
        );
    }
}
