//! The QEMU TCG plugin `insn_count` (`plugins/insn_count.c`, Ebbflow's
//! own): it counts the guest instructions the vCPU executes, in total and
//! by address range, and answers the counts on a Unix socket (issue 20:
//! instructions per request, the figure TCG cannot inflate).
//!
//! Debian's QEMU 7.2 loads plugins but ships no plugin header
//! (QEMU-NOTES), so the header comes from QEMU's Debian source package:
//! `apt-get source --download-only qemu` (apt checks the files against
//! the signed archive index, as for every source package here), then
//! `include/qemu/qemu-plugin.h` alone out of the upstream tarball. The
//! whole tree is not unpacked (a quarter of a gigabyte for one header);
//! instead the build checks that none of Debian's patches touches the
//! header, so the file is what `dpkg-source -x` would give. The header is
//! cached under `debian-src/qemu-plugin-header-VERSION/`, the plugin
//! under `qemu-plugin/insn_count-KEY.so` (the key covers the C source,
//! the header and gcc's version).

use std::fs;
use std::path::{Path, PathBuf};

use crate::cache_dir::place_stamped;
use crate::command::run;
use crate::print_uris;
use crate::stable_hash::fnv1a64;

/// The plugin's C source.
pub const SOURCE: &str = include_str!("../plugins/insn_count.c");
/// The header's path inside QEMU's source tree.
const HEADER_IN_TREE: &str = "include/qemu/qemu-plugin.h";
/// The file whose presence marks a complete header directory.
const STAMP: &str = ".ebb-fetched";

/// Why the plugin could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginError {
    /// apt cannot provide QEMU's source package (no deb-src entry, no
    /// network): tests skip on it.
    Unavailable(String),
    /// Another step failed: the sentence says which.
    Failed(String),
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginError::Unavailable(why) | PluginError::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for PluginError {}

/// A built plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plugin {
    /// The shared object for `-plugin PATH,sock=...`.
    pub path: PathBuf,
    /// The Debian version of the QEMU source the header came from.
    pub qemu_version: String,
}

/// Fetches the header (once) and builds the plugin (once per source,
/// header and compiler) under `target_dir`, with source packages cached
/// in `source_cache`.
///
/// # Errors
///
/// A sentence naming the step that failed: apt (no deb-src entry, no
/// network), tar, a Debian patch that changes the header, or gcc.
pub fn prepare(source_cache: &Path, target_dir: &Path) -> Result<Plugin, PluginError> {
    let (header_dir, qemu_version) = fetch_header(source_cache)?;
    build(&header_dir, target_dir)
        .map(|path| Plugin { path, qemu_version })
        .map_err(PluginError::Failed)
}

/// Builds the plugin against the header in `header_dir`, once per
/// source, header and compiler; its path.
fn build(header_dir: &Path, target_dir: &Path) -> Result<PathBuf, String> {
    let out_dir = std::path::absolute(target_dir.join("qemu-plugin"))
        .map_err(|e| format!("resolving {}: {e}", target_dir.display()))?;
    fs::create_dir_all(&out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    let header = fs::read(header_dir.join("qemu-plugin.h"))
        .map_err(|e| format!("reading the plugin header: {e}"))?;
    let gcc = run("gcc", &["-dumpfullversion"], Path::new("/"))
        .map_err(|failure| format!("gcc is needed to build the QEMU plugin: {failure}"))?;
    let mut inputs = SOURCE.as_bytes().to_vec();
    inputs.extend_from_slice(&header);
    inputs.extend_from_slice(gcc.trim().as_bytes());
    let path = out_dir.join(format!("insn_count-{:016x}.so", fnv1a64(&inputs)));
    if path.is_file() {
        return Ok(path);
    }
    let source = out_dir.join(format!(".insn_count-{}.c", std::process::id()));
    let partial = out_dir.join(format!(".insn_count-{}.so", std::process::id()));
    fs::write(&source, SOURCE).map_err(|e| format!("writing {}: {e}", source.display()))?;
    let include = header_dir.to_string_lossy().into_owned();
    let built = run(
        "gcc",
        &[
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-shared",
            "-fPIC",
            "-I",
            &include,
            "-o",
            &partial.to_string_lossy(),
            &source.to_string_lossy(),
            "-lpthread",
        ],
        &out_dir,
    )
    .map_err(|failure| format!("compiling the QEMU plugin: {failure}"))
    .and_then(|_| {
        fs::rename(&partial, &path).map_err(|e| format!("placing {}: {e}", path.display()))
    });
    let _ = fs::remove_file(&source);
    let _ = fs::remove_file(&partial);
    built.map(|()| path)
}

/// The directory holding `qemu-plugin.h` of QEMU's current Debian source
/// package, and that package's version; downloaded once.
fn fetch_header(source_cache: &Path) -> Result<(PathBuf, String), PluginError> {
    let failed = PluginError::Failed;
    fs::create_dir_all(source_cache)
        .map_err(|e| failed(format!("creating {}: {e}", source_cache.display())))?;
    let cache = std::path::absolute(source_cache)
        .map_err(|e| failed(format!("resolving {}: {e}", source_cache.display())))?;
    let listing =
        run("apt-get", &["source", "--print-uris", "qemu"], &cache).map_err(|failure| {
            PluginError::Unavailable(format!(
            "apt-get source --print-uris qemu (is there a deb-src entry? ./ebb adds one): {failure}"
        ))
        })?;
    let printed = print_uris::parse(&listing)
        .map_err(|e| failed(format!("apt-get source --print-uris qemu: {e}")))?;
    let dir = cache.join(format!("qemu-plugin-header-{}", printed.version));
    if dir.join(STAMP).exists() {
        return Ok((dir, printed.version));
    }
    let work = cache.join(format!(".tmp-qemu-plugin-header-{}", std::process::id()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(|e| failed(format!("creating {}: {e}", work.display())))?;
    let downloaded =
        run("apt-get", &["source", "--download-only", "qemu"], &work).map_err(|failure| {
            PluginError::Unavailable(format!("downloading QEMU's source package: {failure}"))
        });
    if let Err(error) = downloaded {
        let _ = fs::remove_dir_all(&work);
        return Err(error);
    }
    let fetched = (|| {
        if !work.join(&printed.dsc).exists() {
            return Err(format!(
                "apt-get source fetched another version than the {} it listed (its package lists changed meanwhile): run again",
                printed.dsc
            ));
        }
        let upstream = named(&printed.files, ".orig.tar.")?;
        let debian = named(&printed.files, ".debian.tar.")?;
        let patches = run(
            "tar",
            &["-xOf", &debian, "--wildcards", "debian/patches/*"],
            &work,
        )
        .map_err(|failure| format!("reading Debian's QEMU patches: {failure}"))?;
        if patches.contains(HEADER_IN_TREE) {
            return Err(format!(
                "a Debian patch of QEMU {} changes {HEADER_IN_TREE}: the header must then come from `dpkg-source -x` (crates/ebb-cbuild/src/qemu_plugin.rs)",
                printed.version
            ));
        }
        let pattern = format!("*/{HEADER_IN_TREE}");
        let header = run("tar", &["-xOf", &upstream, "--wildcards", &pattern], &work)
            .map_err(|failure| format!("extracting {HEADER_IN_TREE}: {failure}"))?;
        if !header.contains("qemu_plugin_install") {
            return Err(format!(
                "{upstream} holds no plugin API in {HEADER_IN_TREE}"
            ));
        }
        let placed = work.join("header");
        fs::create_dir_all(&placed).map_err(|e| format!("creating {}: {e}", placed.display()))?;
        fs::write(placed.join("qemu-plugin.h"), header)
            .and_then(|()| fs::write(placed.join(STAMP), &printed.version))
            .map_err(|e| format!("writing the header: {e}"))?;
        place_stamped(&placed, &dir, STAMP).map_err(|(what, error)| format!("{what}: {error}"))
    })();
    let _ = fs::remove_dir_all(&work);
    fetched
        .map(|()| (dir, printed.version))
        .map_err(PluginError::Failed)
}

/// The one file of `files` whose name contains `part`.
fn named(files: &[print_uris::SourceFile], part: &str) -> Result<String, String> {
    files
        .iter()
        .find(|file| file.name.contains(part))
        .map(|file| file.name.clone())
        .ok_or_else(|| format!("QEMU's source package lists no *{part}* file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plugin_source_declares_its_api_version_and_entry() {
        assert!(
            SOURCE.contains("QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;")
        );
        assert!(SOURCE.contains("qemu_plugin_install"));
    }

    #[test]
    fn source_files_are_found_by_kind() {
        let file = |name: &str| print_uris::SourceFile {
            uri: format!("http://deb.debian.org/{name}"),
            name: name.to_owned(),
            size: 1,
        };
        let files = [
            file("qemu_7.2+dfsg-7+deb12u18.dsc"),
            file("qemu_7.2+dfsg.orig.tar.xz"),
            file("qemu_7.2+dfsg-7+deb12u18.debian.tar.xz"),
        ];
        assert_eq!(
            named(&files, ".orig.tar.").as_deref(),
            Ok("qemu_7.2+dfsg.orig.tar.xz")
        );
        assert!(named(&files[..1], ".debian.tar.")
            .unwrap_err()
            .contains("lists no *.debian.tar.* file"));
    }
}
