//! `./ebb run APP --native --files DIR`: DIR packed for the guest, whose
//! C program finds DIR's files and directories under `/` (issue 18). The
//! pack is a cpio "newc" archive (`ebb_testbed`'s writer, the format the
//! guest's `ebb-posix-files` reads) passed as a QEMU fw_cfg file
//! (`ebb_boot_abi::PACKED_FILES_NAME`), which the guest reads after boot.
//! Only directories and regular files are packed, with their permission
//! bits; anything else is refused by name, so the guest never sees a
//! half-copied tree.

use std::fs;
use std::path::{Path, PathBuf};

use ebb_boot_abi::{PACKED_FILES_MAX, PACKED_FILES_NAME};
use ebb_testbed::linux_guest::cpio::CpioWriter;

use crate::native::Settings;

/// A pack on disk for one run, deleted when dropped.
#[derive(Debug)]
pub struct PackedFiles {
    path: PathBuf,
}

impl Drop for PackedFiles {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// `dir`'s tree as a newc archive, entries in name order, paths relative
/// to `dir`.
///
/// # Errors
///
/// A sentence naming what cannot be packed: `dir` not a directory, a
/// symbolic link or special file, a name that is not UTF-8, a read
/// error, or more than [`PACKED_FILES_MAX`] bytes.
pub fn pack(dir: &Path) -> Result<Vec<u8>, String> {
    if !dir.is_dir() {
        return Err(format!("--files {}: not a directory", dir.display()));
    }
    let mut writer = CpioWriter::new();
    let mut total = 0u64;
    add_children(&mut writer, dir, "", &mut total)?;
    let packed = writer.finish();
    // Headers, names and padding count too.
    if packed.len() as u64 > PACKED_FILES_MAX {
        return Err(too_large(dir));
    }
    Ok(packed)
}

fn too_large(dir: &Path) -> String {
    format!(
        "--files {}: more than {} MiB to pack (the guest holds the pack and its files in memory)",
        dir.display(),
        PACKED_FILES_MAX >> 20
    )
}

fn add_children(
    writer: &mut CpioWriter,
    dir: &Path,
    prefix: &str,
    total: &mut u64,
) -> Result<(), String> {
    let listing =
        fs::read_dir(dir).map_err(|e| format!("--files: reading {}: {e}", dir.display()))?;
    let mut entries = listing
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--files: reading {}: {e}", dir.display()))?;
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let name = entry
            .file_name()
            .into_string()
            .map_err(|_| format!("--files: {} has a name that is not UTF-8", path.display()))?;
        let inner = format!("{prefix}{name}");
        let metadata =
            fs::symlink_metadata(&path).map_err(|e| format!("--files: {}: {e}", path.display()))?;
        let permissions = std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o7777;
        if metadata.is_dir() {
            writer.directory(&inner, permissions);
            add_children(writer, &path, &format!("{inner}/"), total)?;
        } else if metadata.is_file() {
            let bytes = fs::read(&path).map_err(|e| format!("--files: {}: {e}", path.display()))?;
            *total += bytes.len() as u64;
            if *total > PACKED_FILES_MAX {
                return Err(too_large(dir));
            }
            writer.file(&inner, permissions, &bytes);
        } else {
            return Err(format!(
                "--files: {} is neither a directory nor a regular file (symbolic links and devices are not packed)",
                path.display()
            ));
        }
    }
    Ok(())
}

/// Packs `dir` into a file under `scratch` and adds the fw_cfg argument
/// that hands it to the guest to `settings`; the pack lives as long as
/// the returned value.
///
/// # Errors
///
/// [`pack`]'s, or writing the pack.
pub fn attach(dir: &Path, scratch: &Path, settings: &mut Settings) -> Result<PackedFiles, String> {
    let bytes = pack(dir)?;
    fs::create_dir_all(scratch).map_err(|e| format!("creating {}: {e}", scratch.display()))?;
    let path = scratch.join(format!("packed-files-{}.cpio", std::process::id()));
    let _ = fs::remove_file(&path); // one a killed run left
                                    // Readable by us alone: DIR may hold what others must not read.
    crate::native::write_private(&path, &bytes)?;
    settings.qemu_args.push("-fw_cfg".to_owned());
    settings
        .qemu_args
        .push(fw_cfg_file_arg(PACKED_FILES_NAME, &path));
    Ok(PackedFiles { path })
}

/// `name=NAME,file=PATH` for QEMU's `-fw_cfg`, a comma in the path
/// doubled (QEMU's option syntax: `,,` is a literal comma).
pub fn fw_cfg_file_arg(name: &str, path: &Path) -> String {
    let path = path.display().to_string().replace(',', ",,");
    format!("name={name},file={path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ebb-packed-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_tree_is_packed_in_name_order_and_attached_as_fw_cfg() {
        let dir = scratch("tree");
        fs::create_dir_all(dir.join("data/deep")).unwrap();
        fs::write(dir.join("data/kv.db"), b"SQLite format 3\0").unwrap();
        fs::write(dir.join("a.txt"), b"first").unwrap();
        let packed = pack(&dir).unwrap();
        let text = String::from_utf8_lossy(&packed);
        let order: Vec<usize> = ["a.txt", "data\0", "data/deep", "data/kv.db", "TRAILER!!!"]
            .iter()
            .map(|name| {
                text.find(name)
                    .unwrap_or_else(|| panic!("{name} in the pack"))
            })
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        let mut settings = Settings::default();
        let attached = attach(&dir, &dir.join("scratch"), &mut settings).unwrap();
        assert_eq!(settings.qemu_args[0], "-fw_cfg");
        assert!(settings.qemu_args[1].starts_with("name=opt/org.ebbflow/files,file="));
        let path = attached.path.clone();
        assert_eq!(fs::read(&path).unwrap(), packed);
        drop(attached);
        assert!(!path.exists(), "the pack is deleted after the run");
        assert_eq!(
            fw_cfg_file_arg("opt/x", Path::new("/tmp/a,b")),
            "name=opt/x,file=/tmp/a,,b"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn links_and_missing_dirs_are_refused_by_name() {
        let dir = scratch("links");
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link")).unwrap();
        let error = pack(&dir).unwrap_err();
        assert!(
            error.contains("link is neither a directory nor a regular file"),
            "{error}"
        );
        let error = pack(&dir.join("missing")).unwrap_err();
        assert!(error.ends_with("missing: not a directory"), "{error}");
        let _ = fs::remove_dir_all(&dir);
    }
}
