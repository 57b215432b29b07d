//! Building the guest image from Debian packages, cached under
//! `target/linux-guest/`: `vmlinuz`, `initrd.gz` and `manifest.txt` (what
//! went in). The image is rebuilt only when one of them is missing, when
//! the manifest lacks a package added since ([`GuestImage::is_complete`]),
//! or on request; see bench/README.md.

use std::fmt::Write as _;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use super::cpio::CpioWriter;
use super::debian::{self, run_captured};
use super::init::{init_script, GROUP, PASSWD, REDIS_BINARY};
use super::libs::{needed_libraries, SharedLibrary, LIBRARY_DIRS};
use super::modules::{self, VIRTIO_NET_MODULES};
use crate::qemu::host_unix_seconds;
use crate::workspace_root;

/// The meta-package that names the current cloud kernel.
pub const KERNEL_META_PACKAGE: &str = "linux-image-cloud-amd64";
/// Stock memcached.
pub const MEMCACHED_PACKAGE: &str = "memcached";
/// Stock Redis: Debian 12 ships the Redis 7.0.15 server binary in this
/// package as `/usr/bin/redis-check-rdb`; package `redis-server` only adds a
/// symlink `/usr/bin/redis-server` to it (and a systemd unit), because
/// Redis picks its mode from the name it was started under.
pub const REDIS_PACKAGE: &str = "redis-tools";
/// Busybox built statically: the guest's shell and tools.
pub const BUSYBOX_PACKAGE: &str = "busybox-static";
/// Libraries the guest carries besides memcached's and Redis's: what Rust
/// programs built on a Debian host need (the netpipe overlay), with their
/// packages.
pub const EXTRA_LIBRARIES: [(&str, &str); 1] = [("libgcc-s1", "libgcc_s.so.1")];
/// Where Debian's memcached package puts the binary.
const MEMCACHED_BINARY: &str = "usr/bin/memcached";
/// Where Debian's `redis-tools` puts the Redis binary; the image carries
/// it as [`REDIS_BINARY`], so that argv\[0\] makes it a server.
const REDIS_TOOLS_BINARY: &str = "usr/bin/redis-check-rdb";
/// Packages an image must list in its manifest to be reused: those added
/// after images were first cached (see [`GuestImage::is_complete`]).
pub const REQUIRED_PACKAGES: [&str; 1] = [REDIS_PACKAGE];
/// Listings of a binary's libraries, each but the last followed by pulling
/// in the library dependencies of its library packages, before giving up
/// on a library the loader cannot find. Redis needs three (two rounds of
/// downloads: libsystemd0's and libjemalloc2's libraries, then
/// libgcrypt20's libgpg-error0); one more is spare.
const LIBRARY_ROUNDS: usize = 4;

/// The files of a built guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestImage {
    /// The kernel (`-kernel`).
    pub kernel: PathBuf,
    /// The gzip-compressed cpio initramfs (`-initrd`).
    pub initrd: PathBuf,
    /// What went into the image: packages with versions, modules, libraries.
    pub manifest: PathBuf,
}

impl GuestImage {
    /// The image's files in the cache directory `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        GuestImage {
            kernel: dir.join("vmlinuz"),
            initrd: dir.join("initrd.gz"),
            manifest: dir.join("manifest.txt"),
        }
    }

    /// Whether all files are there (the manifest is written last) and the
    /// manifest lists every package of [`REQUIRED_PACKAGES`]. An image
    /// cached before Redis was added has memcached only: it would boot, but
    /// `/init` would find no `/usr/bin/redis-server` (an overlay brings a new
    /// `/init`, never Redis and its libraries). Counting it as incomplete
    /// makes [`build_or_reuse`] rebuild it once, with no manual step.
    pub fn is_complete(&self) -> bool {
        [&self.kernel, &self.initrd, &self.manifest]
            .iter()
            .all(|p| p.is_file())
            && std::fs::read_to_string(&self.manifest)
                .is_ok_and(|manifest| lists_required_packages(&manifest))
    }
}

/// Whether `manifest` has a `package NAME VERSION` line for every package
/// of [`REQUIRED_PACKAGES`].
fn lists_required_packages(manifest: &str) -> bool {
    REQUIRED_PACKAGES.iter().all(|package| {
        manifest.lines().any(|line| {
            line.strip_prefix("package ")
                .and_then(|rest| rest.split_whitespace().next())
                == Some(package)
        })
    })
}

/// The outcome of [`build_or_reuse`].
#[derive(Debug, Clone)]
pub struct Built {
    /// The image.
    pub image: GuestImage,
    /// Whether the cached image was reused.
    pub cached: bool,
    /// Seconds spent (checking the cache, or building).
    pub seconds: f64,
}

/// `target/linux-guest` under the workspace root.
pub fn default_cache_dir() -> PathBuf {
    workspace_root().join("target").join("linux-guest")
}

/// The image in `dir`, built first if it is not complete
/// ([`GuestImage::is_complete`]) or `rebuild`.
/// Processes building at the same time take turns (a lock on
/// `dir/.lock`), so a second one finds the first one's image.
pub fn build_or_reuse(dir: &Path, rebuild: bool) -> Result<Built, String> {
    let start = Instant::now();
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let _lock = DirLock::acquire(&dir.join(".lock"))?;
    let image = GuestImage::in_dir(dir);
    let cached = image.is_complete() && !rebuild;
    if !cached {
        build(dir, &image)?;
    }
    Ok(Built {
        image,
        cached,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// An exclusive flock(2) on a file, released when dropped (or when the
/// process dies).
struct DirLock {
    /// Kept open: closing the file releases the lock.
    _file: std::fs::File,
}

impl DirLock {
    fn acquire(path: &Path) -> Result<DirLock, String> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        // SAFETY: flock(2) on a descriptor this function owns and keeps open
        // in the returned guard; it touches no memory.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc != 0 {
            return Err(format!(
                "cannot lock {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(DirLock { _file: file })
    }
}

/// Downloads, unpacks and assembles the image into `image`'s paths; the
/// scratch directory `dir/work` is removed afterwards.
fn build(dir: &Path, image: &GuestImage) -> Result<(), String> {
    let work = dir.join("work");
    let _ = std::fs::remove_dir_all(&work);
    let _ = std::fs::remove_file(&image.manifest);
    let debs = work.join("debs");
    let mut manifest = format!(
        "built at Unix time {} by ebb-testbed (crates/ebb-testbed/README.md)\n",
        host_unix_seconds()
    );

    let kernel_package = debian::concrete_kernel_package(KERNEL_META_PACKAGE)?;
    let memcached_libraries = library_depends(MEMCACHED_PACKAGE)?;
    let redis_libraries = library_depends(REDIS_PACKAGE)?;
    let extra_libraries = EXTRA_LIBRARIES.map(|(package, _)| package.to_owned());
    let mut packages = vec![
        kernel_package.clone(),
        MEMCACHED_PACKAGE.to_owned(),
        REDIS_PACKAGE.to_owned(),
        BUSYBOX_PACKAGE.to_owned(),
    ];
    for package in memcached_libraries
        .iter()
        .chain(&redis_libraries)
        .chain(&extra_libraries)
    {
        if !packages.contains(package) {
            packages.push(package.clone());
        }
    }
    let files = debian::download(&packages, &debs)?;

    let kernel_root = work.join("kernel");
    let user_root = work.join("userland");
    let busybox_root = work.join("busybox");
    for (package, deb) in packages.iter().zip(&files) {
        let dest = match package.as_str() {
            p if p == kernel_package => &kernel_root,
            BUSYBOX_PACKAGE => &busybox_root,
            _ => &user_root,
        };
        debian::extract(deb, dest)?;
        let _ = writeln!(manifest, "package {}", debian::describe(deb)?);
    }

    // Both servers' libraries in one list, each soname once; a library
    // package one server's resolution unpacked counts as unpacked for the
    // other's.
    let mut unpacked = packages.clone();
    let memcached = user_root.join(MEMCACHED_BINARY);
    let mut libraries = resolve_libraries(
        &memcached,
        &user_root,
        &debs,
        &memcached_libraries,
        &mut unpacked,
        &mut manifest,
    )?;
    let redis = user_root.join(REDIS_TOOLS_BINARY);
    for lib in resolve_libraries(
        &redis,
        &user_root,
        &debs,
        &redis_libraries,
        &mut unpacked,
        &mut manifest,
    )? {
        if !libraries.iter().any(|known| known.name == lib.name) {
            libraries.push(lib);
        }
    }
    for (package, soname) in EXTRA_LIBRARIES {
        if !libraries.iter().any(|lib| lib.name == soname) {
            let path = find_library(&user_root, soname)
                .ok_or_else(|| format!("{package} has no {soname}"))?;
            libraries.push(SharedLibrary {
                name: soname.to_owned(),
                path: Some(path),
            });
        }
    }
    let (kernel_file, module_files) = kernel_files(&kernel_root)?;
    let module_names: Vec<String> = module_files.iter().map(|(name, _)| name.clone()).collect();
    let _ = writeln!(manifest, "modules {}", module_names.join(" "));
    for lib in &libraries {
        let _ = writeln!(manifest, "library {}", lib.name);
    }

    let mut cpio = CpioWriter::new();
    for dir in [
        "bin",
        "dev",
        "etc",
        "lib",
        "lib/modules",
        "lib/x86_64-linux-gnu",
        "lib64",
        "proc",
        "sys",
        "tmp",
        "usr",
        "usr/bin",
    ] {
        cpio.directory(dir, 0o755);
    }
    // The kernel opens /dev/console for init's output before /init runs.
    cpio.char_device("dev/console", 0o600, 5, 1);
    cpio.char_device("dev/null", 0o666, 1, 3);
    cpio.file(
        "bin/busybox",
        0o755,
        &read(&busybox_root.join("bin/busybox"))?,
    );
    cpio.symlink("bin/sh", "busybox");
    cpio.file("init", 0o755, init_script(&module_names).as_bytes());
    cpio.file("etc/passwd", 0o644, PASSWD.as_bytes());
    cpio.file("etc/group", 0o644, GROUP.as_bytes());
    cpio.file(MEMCACHED_BINARY, 0o755, &read(&memcached)?);
    cpio.file(REDIS_BINARY, 0o755, &read(&redis)?);
    for lib in &libraries {
        let path = lib.path.as_ref().expect("resolved libraries have paths");
        let target = if lib.is_interpreter() {
            lib.name.trim_start_matches('/').to_owned()
        } else {
            format!("lib/x86_64-linux-gnu/{}", lib.name)
        };
        cpio.file(&target, 0o755, &read(path)?);
    }
    for (name, path) in &module_files {
        cpio.file(&format!("lib/modules/{name}.ko"), 0o644, &read(path)?);
    }

    let cpio_path = work.join("initrd.cpio");
    std::fs::write(&cpio_path, cpio.finish())
        .map_err(|e| format!("cannot write {}: {e}", cpio_path.display()))?;
    // `-n`: no name or time stamp in the header, so equal inputs give equal files.
    run_captured(
        Command::new("gzip")
            .args(["-n", "-9", "-f"])
            .arg(&cpio_path),
    )?;
    // Copied next to the cache and renamed into place, like the initrd: a
    // QEMU another process starts from the cached image meanwhile reads
    // the old kernel or the new one, never half of one.
    let kernel_copy = work.join("vmlinuz");
    copy(&kernel_file, &kernel_copy)?;
    rename(&kernel_copy, &image.kernel)?;
    rename(&work.join("initrd.cpio.gz"), &image.initrd)?;
    std::fs::write(&image.manifest, manifest)
        .map_err(|e| format!("cannot write {}: {e}", image.manifest.display()))?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// `soname` in one of the library directories of the unpacked tree `root`.
fn find_library(root: &Path, soname: &str) -> Option<PathBuf> {
    LIBRARY_DIRS
        .iter()
        .map(|dir| root.join(dir).join(soname))
        .find(|path| path.is_file())
}

/// The `lib*` packages among `package`'s dependencies.
fn library_depends(package: &str) -> Result<Vec<String>, String> {
    Ok(debian::depends_of(package)?
        .into_iter()
        .filter(|name| name.starts_with("lib"))
        .collect())
}

/// The libraries `binary` needs, all found in `root`: while the loader
/// reports one as not found, the library dependencies of `binary`'s library
/// packages (`own`, then the packages those pulled in) are added, those not
/// among `unpacked` downloaded and unpacked too (and added to it and to the
/// manifest).
fn resolve_libraries(
    binary: &Path,
    root: &Path,
    debs: &Path,
    own: &[String],
    unpacked: &mut Vec<String>,
    manifest: &mut String,
) -> Result<Vec<SharedLibrary>, String> {
    let mut packages = own.to_vec();
    for _ in 0..LIBRARY_ROUNDS {
        let libraries = needed_libraries(root, binary)?;
        let missing: Vec<&str> = libraries
            .iter()
            .filter(|lib| lib.path.is_none())
            .map(|lib| lib.name.as_str())
            .collect();
        if missing.is_empty() {
            return Ok(libraries);
        }
        // (dependency, the package that needs it), each dependency once.
        let mut more: Vec<(String, String)> = Vec::new();
        for package in &packages {
            for dep in library_depends(package)? {
                if !packages.contains(&dep) && !more.iter().any(|(known, _)| *known == dep) {
                    more.push((dep, package.clone()));
                }
            }
        }
        if more.is_empty() {
            return Err(format!(
                "{} needs {} and no dependency of {} provides it",
                binary.display(),
                missing.join(", "),
                packages.join(", ")
            ));
        }
        let fetch: Vec<&(String, String)> = more
            .iter()
            .filter(|(dep, _)| !unpacked.contains(dep))
            .collect();
        let names: Vec<String> = fetch.iter().map(|(dep, _)| dep.clone()).collect();
        if !names.is_empty() {
            for ((dep, needed_by), deb) in fetch.iter().zip(debian::download(&names, debs)?) {
                debian::extract(&deb, root)?;
                let _ = writeln!(
                    manifest,
                    "package {} (library of {needed_by})",
                    debian::describe(&deb)?
                );
                unpacked.push(dep.clone());
            }
        }
        packages.extend(more.into_iter().map(|(dep, _)| dep));
    }
    Err(format!(
        "{}: libraries still missing after {LIBRARY_ROUNDS} rounds of dependencies",
        binary.display()
    ))
}

/// The kernel image and the modules virtio-net needs (name, file), in load
/// order, from an unpacked kernel package.
fn kernel_files(root: &Path) -> Result<(PathBuf, Vec<(String, PathBuf)>), String> {
    let kernel = single_entry(&root.join("boot"), "vmlinuz-")?;
    let module_dir = single_entry(&root.join("lib/modules"), "")?;
    let builtin = std::fs::read_to_string(module_dir.join("modules.builtin"))
        .map(|text| modules::builtin_names(&text))
        .unwrap_or_default();
    let index = modules::index_modules(&module_dir.join("kernel"))?;
    let mut depends = |name: &str| {
        let path = index.get(name)?;
        std::fs::read(path)
            .ok()
            .map(|bytes| modules::modinfo_depends(&bytes))
    };
    let order = modules::load_order(&VIRTIO_NET_MODULES, &builtin, &mut depends)?;
    let files = order
        .into_iter()
        .map(|name| {
            let path = index[&name].clone();
            (name, path)
        })
        .collect();
    Ok((kernel, files))
}

/// The one entry of `dir` whose name starts with `prefix`.
fn single_entry(dir: &Path, prefix: &str) -> Result<PathBuf, String> {
    let found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(prefix))
        .map(|entry| entry.path())
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "expected one {prefix}* in {}, found {}",
            dir.display(),
            found.len()
        )),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

fn rename(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::rename(from, to)
        .map_err(|e| format!("cannot move {} to {}: {e}", from.display(), to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_without_redis_is_stale() {
        let before = "built at Unix time 1 by ebb-testbed\npackage memcached 1.6.18-1+deb12u1\n\
                      package libc6 2.36-9+deb12u14\nlibrary libc.so.6\n";
        assert!(!lists_required_packages(before));
        // A library line or another package's name is not the package line.
        assert!(!lists_required_packages(
            "package redis-tools-extra 1\nlibrary redis-tools\n"
        ));
        let after = format!("{before}package redis-tools 5:7.0.15-1~deb12u10\n");
        assert!(lists_required_packages(&after));
    }

    #[test]
    fn is_complete_reads_the_manifest() {
        let dir = std::env::temp_dir().join(format!("ebb-guest-image-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let image = GuestImage::in_dir(&dir);
        for path in [&image.kernel, &image.initrd] {
            std::fs::write(path, b"x").expect("write");
        }
        assert!(!image.is_complete(), "no manifest");
        std::fs::write(&image.manifest, "package memcached 1.6.18\n").expect("write");
        assert!(!image.is_complete(), "cached before Redis");
        std::fs::write(
            &image.manifest,
            "package memcached 1.6.18\npackage redis-tools 5:7.0.15-1~deb12u10\n",
        )
        .expect("write");
        assert!(image.is_complete());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
