//! Debian packages, fetched with the ordinary client and never installed:
//! `apt-cache depends` to resolve names, `apt-get download` to fetch `.deb`
//! files, `dpkg-deb -x` to unpack them into a directory of our own.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `Depends:` of `package` (real package names; virtual ones, shown by
/// apt as `<name>`, are left out), in apt's order.
pub fn depends_of(package: &str) -> Result<Vec<String>, String> {
    let query = || {
        run_captured(Command::new("apt-cache").args([
            "depends",
            "--no-recommends",
            "--no-suggests",
            "--no-conflicts",
            "--no-breaks",
            "--no-replaces",
            "--no-enhances",
            package,
        ]))
    };
    // A fresh machine may have no package lists yet.
    let out = query().or_else(|_| {
        update_lists()?;
        query()
    })?;
    Ok(parse_depends(&out))
}

/// The direct `Depends:` lines of `apt-cache depends` output.
pub fn parse_depends(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("Depends:") else {
            continue;
        };
        // Only the first level: the alternatives apt lists for a virtual
        // package sit on further-indented lines without a `Depends:` label.
        let name = rest.trim();
        if !name.is_empty() && !name.starts_with('<') && !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
    }
    names
}

/// The concrete kernel package a meta-package such as
/// `linux-image-cloud-amd64` points at (`linux-image-6.1.0-NN-cloud-amd64`).
pub fn concrete_kernel_package(meta: &str) -> Result<String, String> {
    depends_of(meta)?
        .into_iter()
        .find(|name| name.starts_with("linux-image-") && name != meta)
        .ok_or_else(|| format!("apt-cache depends {meta} names no linux-image-* package"))
}

/// Downloads `packages` into `dir` with `apt-get download` (updating the
/// package lists once if that fails) and returns each package's `.deb`.
pub fn download(packages: &[String], dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let fetch = || {
        run_captured(
            Command::new("apt-get")
                .arg("download")
                .arg("-q")
                .args(packages)
                .current_dir(dir),
        )
    };
    if fetch().is_err() {
        update_lists()?;
        fetch().map_err(|e| format!("apt-get download {}: {e}", packages.join(" ")))?;
    }
    packages.iter().map(|p| deb_file(dir, p)).collect()
}

/// The newest-named `.deb` of `package` in `dir` (`NAME_VERSION_ARCH.deb`).
fn deb_file(dir: &Path, package: &str) -> Result<PathBuf, String> {
    let prefix = format!("{package}_");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
        })
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        format!(
            "apt-get download left no {package}_*.deb in {}",
            dir.display()
        )
    })
}

/// Unpacks the files of `deb` under `dest` (no maintainer scripts run).
pub fn extract(deb: &Path, dest: &Path) -> Result<(), String> {
    run_captured(Command::new("dpkg-deb").arg("-x").arg(deb).arg(dest)).map(|_| ())
}

/// `Package Version` of `deb`, for the build manifest.
pub fn describe(deb: &Path) -> Result<String, String> {
    let out = run_captured(
        Command::new("dpkg-deb")
            .args(["--show", "--showformat=${Package} ${Version}"])
            .arg(deb),
    )?;
    Ok(out.trim().to_owned())
}

fn update_lists() -> Result<(), String> {
    run_captured(Command::new("apt-get").args(["update", "-q"]))
        .map(|_| ())
        .map_err(|e| format!("apt-get update: {e}"))
}

/// Runs `command`, returning its stdout, or its stderr in the error.
pub fn run_captured(command: &mut Command) -> Result<String, String> {
    let shown = format!("{command:?}");
    let out = command
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depends_lines_are_parsed_without_virtual_packages() {
        let text = "memcached\n  PreDepends: init-system-helpers\n  Depends: adduser\n  \
                    Depends: lsb-base\n    sysvinit-utils\n  Depends: perl\n  Depends: <perl:any>\n    \
                    perl\n  Depends: libc6\n  Depends: libevent-2.1-7\n  Suggests: libyaml-perl\n";
        assert_eq!(
            parse_depends(text),
            ["adduser", "lsb-base", "perl", "libc6", "libevent-2.1-7"]
        );
        assert!(parse_depends("busybox-static\n  Conflicts: busybox\n").is_empty());
    }
}
