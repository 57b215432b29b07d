//! What the archive tests and the fuzz target share: a newc writer (the
//! launcher's format, written independently of `ebb-testbed`'s so that a
//! bug in one is not mirrored in the other) and the check every input
//! must pass.

#![allow(dead_code)] // each user takes its own part

use ebb_posix_files::archive::{self, ArchiveError};
use ebb_posix_files::memfs::{Kind, MemFs, ROOT};

/// One newc entry: header, name with its NUL, padding, data, padding.
pub fn entry(out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8]) {
    let fields = [
        1,
        mode,
        0,
        0,
        1,
        0,
        u32::try_from(data.len()).unwrap(),
        0,
        0,
        0,
        0,
        u32::try_from(name.len() + 1).unwrap(),
        0,
    ];
    out.extend_from_slice(b"070701");
    for field in fields {
        out.extend_from_slice(format!("{field:08X}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// `entries` (name, mode, data) and the trailer.
pub fn archive(entries: &[(&str, u32, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, mode, data) in entries {
        entry(&mut out, name, *mode, data);
    }
    entry(&mut out, "TRAILER!!!", 0, &[]);
    out
}

/// Every file of `fs` under `dir` as (path, bytes), and every directory
/// as (path/, empty), sorted.
pub fn tree(fs: &MemFs) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    walk(fs, ROOT, "", &mut out);
    out.sort();
    out
}

fn walk(
    fs: &MemFs,
    dir: ebb_posix_files::memfs::Ino,
    prefix: &str,
    out: &mut Vec<(String, Vec<u8>)>,
) {
    for (name, ino, kind) in fs.list(dir).unwrap() {
        if name == b"." || name == b".." {
            continue;
        }
        let path = format!("{prefix}{}", String::from_utf8_lossy(&name));
        match kind {
            Kind::Dir => {
                out.push((format!("{path}/"), Vec::new()));
                walk(fs, ino, &format!("{path}/"), out);
            }
            _ => {
                let mut bytes = vec![0; usize::try_from(fs.size(ino).unwrap()).unwrap()];
                let read = fs.read_at(ino, 0, &mut bytes).unwrap();
                bytes.truncate(read);
                out.push((path, bytes));
            }
        }
    }
}

/// Loads any bytes: never panics; what loads is what `entries` read.
pub fn run(data: &[u8]) -> Result<(), ArchiveError> {
    let mut fs = MemFs::new();
    let loaded = archive::load(&mut fs, data);
    if loaded.is_ok() {
        let entries = archive::entries(data).expect("a loaded archive reads");
        let files = tree(&fs)
            .iter()
            .filter(|(path, _)| !path.ends_with('/'))
            .count();
        assert!(files <= entries.len());
    }
    loaded.map(|_| ())
}
