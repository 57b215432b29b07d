//! The packed-directory loader (`archive.rs`): what the launcher packs
//! comes back byte for byte, and bad archives are refused with the error
//! naming what is wrong, never a panic.

mod archive_support;

use archive_support::{archive, entry, run, tree};
use ebb_posix::errno::EEXIST;
use ebb_posix_files::archive::{load, ArchiveError, Loaded};
use ebb_posix_files::memfs::MemFs;
use proptest::prelude::*;

const DIR: u32 = 0o040_755;
const FILE: u32 = 0o100_644;

#[test]
fn a_packed_tree_loads_with_its_bytes_and_missing_parents() {
    let packed = archive(&[
        (".", DIR, b""),
        ("data", DIR, b""),
        ("data/kv.db", FILE, b"SQLite format 3\0"),
        ("./deep/er/note.txt", FILE, b"made its parents"),
        ("empty", FILE, b""),
    ]);
    let mut fs = MemFs::new();
    let loaded = load(&mut fs, &packed).unwrap();
    assert_eq!(
        loaded,
        Loaded {
            dirs: 3,
            files: 3,
            bytes: 32
        }
    );
    let tree = tree(&fs);
    let names: Vec<&str> = tree.iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(
        names,
        [
            "data/",
            "data/kv.db",
            "deep/",
            "deep/er/",
            "deep/er/note.txt",
            "empty"
        ]
    );
    assert_eq!(tree[1].1, b"SQLite format 3\0");
}

#[test]
fn bad_archives_are_refused_by_name() {
    let mut fs = MemFs::new();
    let climbing = archive(&[("../etc/passwd", FILE, b"x")]);
    assert_eq!(
        load(&mut fs, &climbing),
        Err(ArchiveError::BadName {
            name: "../etc/passwd".into()
        })
    );
    let link = archive(&[("link", 0o120_777, b"target")]);
    assert_eq!(
        load(&mut fs, &link),
        Err(ArchiveError::Unsupported {
            name: "link".into(),
            mode: 0o120_777
        })
    );
    let twice = archive(&[("a", FILE, b"1"), ("a", FILE, b"2")]);
    assert_eq!(
        load(&mut MemFs::new(), &twice),
        Err(ArchiveError::Refused {
            name: "a".into(),
            errno: EEXIST
        })
    );
    let mut no_trailer = Vec::new();
    entry(&mut no_trailer, "a", FILE, b"1");
    assert_eq!(
        load(&mut MemFs::new(), &no_trailer),
        Err(ArchiveError::Truncated { offset: 116 })
    );
    assert_eq!(
        load(&mut MemFs::new(), b"not an archive at all, long enough to hold a header: 0123456789012345678901234567890123456789012345678901234567"),
        Err(ArchiveError::BadHeader { offset: 0 })
    );
    let long = "a/".repeat(2100) + "b";
    assert!(matches!(
        load(&mut MemFs::new(), &archive(&[(&long, FILE, b"x")])),
        Err(ArchiveError::BadName { .. })
    ));
    let root_as_file = archive(&[(".", FILE, b"x")]);
    assert!(matches!(
        load(&mut MemFs::new(), &root_as_file),
        Err(ArchiveError::Unsupported { .. })
    ));
    let mut plus = archive(&[("a", FILE, b"1")]);
    plus[6] = b'+';
    assert_eq!(
        load(&mut MemFs::new(), &plus),
        Err(ArchiveError::BadHeader { offset: 0 })
    );
    let twice_message = ArchiveError::Refused {
        name: "a".into(),
        errno: EEXIST,
    }
    .to_string();
    assert!(twice_message.contains("given twice"), "{twice_message}");
    let message = ArchiveError::BadName {
        name: "../x".into(),
    }
    .to_string();
    assert!(
        message.contains("'../x'") && message.contains(".."),
        "{message}"
    );
}

proptest! {
    #[test]
    fn what_is_packed_comes_back(files in proptest::collection::btree_map(
        "[a-c]{1,2}(/[a-c]{1,2}){0,2}",
        proptest::collection::vec(any::<u8>(), 0..300),
        0..12,
    )) {
        // A name that is also another's directory cannot be a file too.
        let files: Vec<(String, Vec<u8>)> = files
            .iter()
            .filter(|(name, _)| !files.keys().any(|other| other.starts_with(&format!("{name}/"))))
            .map(|(name, data)| (name.clone(), data.clone()))
            .collect();
        let entries: Vec<(&str, u32, &[u8])> = files
            .iter()
            .map(|(name, data)| (name.as_str(), FILE, data.as_slice()))
            .collect();
        let mut fs = MemFs::new();
        load(&mut fs, &archive(&entries)).unwrap();
        let loaded: Vec<(String, Vec<u8>)> = tree(&fs)
            .into_iter()
            .filter(|(path, _)| !path.ends_with('/'))
            .collect();
        prop_assert_eq!(loaded, files);
    }

    #[test]
    fn any_bytes_and_any_cut_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), cut in 0usize..200) {
        let _ = run(&bytes);
        let packed = archive(&[("a/b", FILE, &bytes)]);
        let cut = cut.min(packed.len());
        let _ = run(&packed[..cut]);
        prop_assert!(run(&packed).is_ok());
    }
}
