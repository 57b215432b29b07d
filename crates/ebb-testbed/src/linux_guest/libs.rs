//! The shared libraries a binary from a Debian package needs, found by the
//! dynamic loader from the unpacked packages themselves (`ld.so --list`, what
//! `ldd` does), so the result does not depend on what the host has installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::debian::run_captured;

/// Where Debian 12 (x86_64) puts shared libraries, relative to a root.
pub const LIBRARY_DIRS: [&str; 2] = ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"];
/// The dynamic loader inside an unpacked `libc6`.
pub const LOADER: &str = "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";

/// One line of `ld.so --list`: a needed library and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedLibrary {
    /// The soname (`libc.so.6`), or the interpreter's absolute path
    /// (`/lib64/ld-linux-x86-64.so.2`) as the binary names it.
    pub name: String,
    /// The file the loader chose; `None` for "not found".
    pub path: Option<PathBuf>,
}

impl SharedLibrary {
    /// Whether this entry is the program interpreter (named by path).
    pub fn is_interpreter(&self) -> bool {
        self.name.starts_with('/')
    }
}

/// The `NAME => PATH (0xADDR)` and `NAME => not found` lines of
/// `ld.so --list` output; the vDSO line (no `=>`) is skipped.
pub fn parse_ld_list(text: &str) -> Vec<SharedLibrary> {
    text.lines()
        .filter_map(|line| {
            let (name, target) = line.split_once("=>")?;
            let target = target.trim();
            let target = target
                .rsplit_once(" (0x")
                .map_or(target, |(path, _)| path)
                .trim();
            Some(SharedLibrary {
                name: name.trim().to_owned(),
                path: (target != "not found" && !target.is_empty()).then(|| PathBuf::from(target)),
            })
        })
        .collect()
}

/// `libraries` with every one the loader found outside `root` marked "not
/// found". `--library-path` is searched before the host's `ld.so.cache`
/// and system directories, not instead of them: a library the unpacked
/// packages lack would otherwise come from the host (seen with Redis:
/// libstdc++, libcap, libgcrypt and others), be copied into the image from
/// there, and never be named in its manifest.
pub fn only_under(root: &Path, libraries: Vec<SharedLibrary>) -> Vec<SharedLibrary> {
    libraries
        .into_iter()
        .map(|lib| SharedLibrary {
            path: lib.path.filter(|path| path.starts_with(root)),
            ..lib
        })
        .collect()
}

/// The libraries `binary` needs, as the loader of the unpacked tree `root`
/// resolves them from `root`'s library directories only: one it finds
/// elsewhere (on the host) is reported as not found ([`only_under`]).
pub fn needed_libraries(root: &Path, binary: &Path) -> Result<Vec<SharedLibrary>, String> {
    let loader = root.join(LOADER);
    if !loader.is_file() {
        return Err(format!(
            "no dynamic loader at {} (is libc6 unpacked?)",
            loader.display()
        ));
    }
    let dirs: Vec<String> = LIBRARY_DIRS
        .iter()
        .map(|dir| root.join(dir).display().to_string())
        .collect();
    let out = run_captured(
        Command::new(&loader)
            .arg("--library-path")
            .arg(dirs.join(":"))
            .arg("--list")
            .arg(binary),
    )?;
    Ok(only_under(root, parse_ld_list(&out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_listing_is_parsed() {
        let text = "\tlinux-vdso.so.1 (0x00007f87fb48b000)\n\
            \tlibevent-2.1.so.7 => /s/usr/lib/x86_64-linux-gnu/libevent-2.1.so.7 (0x00007f87fb3cf000)\n\
            \tlibsasl2.so.2 => not found\n\
            \t/lib64/ld-linux-x86-64.so.2 => s/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 (0x00007f87fb48d000)\n";
        let libs = parse_ld_list(text);
        assert_eq!(libs.len(), 3);
        assert_eq!(libs[0].name, "libevent-2.1.so.7");
        assert_eq!(
            libs[0].path.as_deref(),
            Some(Path::new("/s/usr/lib/x86_64-linux-gnu/libevent-2.1.so.7"))
        );
        assert_eq!(libs[1].path, None);
        assert!(libs[2].is_interpreter() && !libs[0].is_interpreter());
        assert_eq!(
            libs[2].path.as_deref(),
            Some(Path::new("s/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"))
        );
    }

    #[test]
    fn libraries_found_on_the_host_count_as_missing() {
        let text = "\tlibc.so.6 => /w/root/lib/x86_64-linux-gnu/libc.so.6 (0x1)\n\
            \tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x2)\n\
            \tlibcap.so.2 => /w/root2/lib/x86_64-linux-gnu/libcap.so.2 (0x3)\n\
            \tliblzf.so.1 => not found\n\
            \t/lib64/ld-linux-x86-64.so.2 => /w/root/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 (0x4)\n";
        let libs = only_under(Path::new("/w/root"), parse_ld_list(text));
        let found: Vec<(&str, bool)> = libs
            .iter()
            .map(|lib| (lib.name.as_str(), lib.path.is_some()))
            .collect();
        assert_eq!(
            found,
            [
                ("libc.so.6", true),
                ("libstdc++.so.6", false),
                ("libcap.so.2", false),
                ("liblzf.so.1", false),
                ("/lib64/ld-linux-x86-64.so.2", true),
            ]
        );
    }
}
