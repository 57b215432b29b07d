//! The operations, each on the shared directory's descriptor: what a
//! request asks, done with the system calls their manual pages name.

use std::os::fd::{AsFd, OwnedFd};

use ebb_iobuf::{IoBuf, IoChain};
use ebb_offload::{DirEntry, FileKind, FsError, OpenFlags, Stat};
use rustix::fs::{fstat, mkdirat, renameat, unlinkat, AtFlags, Dir, FileType, Mode, OFlags};

use crate::errno::fs_error;
use crate::resolve::{open_beneath, parent_beneath};

/// open(2) flags for the protocol's.
fn oflags(flags: OpenFlags) -> OFlags {
    let mut out = match (
        flags.contains(OpenFlags::READ),
        flags.contains(OpenFlags::WRITE),
    ) {
        (true, true) => OFlags::RDWR,
        (false, true) => OFlags::WRONLY,
        _ => OFlags::RDONLY,
    };
    for (ours, linux) in [
        (OpenFlags::CREATE, OFlags::CREATE),
        (OpenFlags::TRUNCATE, OFlags::TRUNC),
        (OpenFlags::APPEND, OFlags::APPEND),
        (OpenFlags::EXCLUSIVE, OFlags::EXCL),
    ] {
        if flags.contains(ours) {
            out |= linux;
        }
    }
    out
}

/// Opens a regular file. O_NONBLOCK, so that a FIFO's open does not wait
/// for a writer (it is then refused as [`FsError::NotAFile`]: reading it
/// could block the core); regular files ignore the flag (open(2)).
pub(crate) fn open(
    root: impl AsFd,
    path: &str,
    flags: OpenFlags,
    mode: u32,
) -> Result<OwnedFd, FsError> {
    let fd = open_beneath(
        root,
        path,
        oflags(flags) | OFlags::NONBLOCK,
        Mode::from_raw_mode(mode),
    )?;
    let kind = FileType::from_raw_mode(fstat(&fd).map_err(fs_error)?.st_mode);
    match kind {
        FileType::RegularFile => Ok(fd),
        FileType::Directory => Err(FsError::IsDir),
        _ => Err(FsError::NotAFile),
    }
}

/// The smallest buffer a read starts with, and grows by at least.
const READ_STEP: usize = 64 << 10;

/// The buffer a read of `len` bytes starts with when `left` bytes are
/// left in the file (from fstat(2)): no more than is there, so a 16 MiB
/// request on a small file allocates little; at least [`READ_STEP`] (up
/// to `len`), since the file may grow meanwhile (the buffer then grows).
fn first_buffer_len(len: usize, left: u64) -> usize {
    let left = usize::try_from(left).unwrap_or(usize::MAX);
    len.min(left.max(READ_STEP))
}

/// Reads up to `len` bytes, from `offset` (pread(2)) or the position
/// (read(2)), until `len` or the end of the file: a short reply means the
/// end, so a short system call is continued. The buffer is sized by what
/// is left in the file, not by `len`, and a reply holds no more memory
/// than its bytes.
pub(crate) fn read(fd: impl AsFd, len: u32, offset: Option<u64>) -> Result<IoChain, FsError> {
    let len = usize::try_from(len).map_err(|_| FsError::TooLarge)?;
    let position = match offset {
        Some(offset) => offset,
        None => rustix::fs::seek(&fd, rustix::fs::SeekFrom::Current(0)).map_err(fs_error)?,
    };
    let size = u64::try_from(fstat(&fd).map_err(fs_error)?.st_size).unwrap_or(0);
    let mut buf = vec![0u8; first_buffer_len(len, size.saturating_sub(position))];
    let mut done = 0;
    while done < len {
        if done == buf.len() {
            // The file grew since fstat: more room, up to `len`.
            let grown = len.min(buf.len().saturating_mul(2).max(READ_STEP));
            buf.resize(grown, 0);
        }
        let n = match offset {
            Some(offset) => {
                let at = offset.saturating_add(u64::try_from(done).unwrap_or(u64::MAX));
                rustix::io::pread(&fd, &mut buf[done..], at)
            }
            None => rustix::io::read(&fd, &mut buf[done..]),
        };
        match n {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(fs_error(errno)),
        }
    }
    buf.truncate(done);
    buf.shrink_to_fit();
    Ok(IoChain::from(IoBuf::from_vec(buf)))
}

/// Writes `data`'s segments as they are (no gathering copy), from
/// `offset` (pwrite(2)) or the position (write(2)); the bytes written,
/// fewer only when the file system took fewer (a full disk).
pub(crate) fn write(fd: impl AsFd, data: &IoChain, offset: Option<u64>) -> Result<u32, FsError> {
    let mut written = 0usize;
    for segment in data.segments() {
        let mut rest: &[u8] = segment;
        while !rest.is_empty() {
            let n = match offset {
                Some(offset) => {
                    let at = offset.saturating_add(u64::try_from(written).unwrap_or(u64::MAX));
                    rustix::io::pwrite(&fd, rest, at)
                }
                None => rustix::io::write(&fd, rest),
            };
            match n {
                Ok(0) => return u32::try_from(written).map_err(|_| FsError::TooLarge),
                Ok(n) => {
                    written += n;
                    rest = &rest[n..];
                }
                Err(rustix::io::Errno::INTR) => {}
                // Some bytes went: say how many; the next write reports
                // the error.
                Err(_) if written > 0 => {
                    return u32::try_from(written).map_err(|_| FsError::TooLarge)
                }
                Err(errno) => return Err(fs_error(errno)),
            }
        }
    }
    u32::try_from(written).map_err(|_| FsError::TooLarge)
}

fn kind_of(file_type: FileType) -> FileKind {
    match file_type {
        FileType::RegularFile => FileKind::File,
        FileType::Directory => FileKind::Dir,
        FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

/// stat(2) of `path`, symlinks inside followed (an O_PATH descriptor
/// resolved beneath the directory, then fstat).
pub(crate) fn stat(root: impl AsFd, path: &str) -> Result<Stat, FsError> {
    let fd = open_beneath(root, path, OFlags::PATH, Mode::empty())?;
    let st = fstat(&fd).map_err(fs_error)?;
    Ok(Stat {
        kind: kind_of(FileType::from_raw_mode(st.st_mode)),
        mode: st.st_mode & 0o7777,
        size: u64::try_from(st.st_size).unwrap_or(0),
        modified_secs: st.st_mtime,
        modified_nanos: u32::try_from(st.st_mtime_nsec)
            .unwrap_or(0)
            .min(999_999_999),
    })
}

/// The entries of directory `path`, sorted by name, without `.` and `..`
/// (names that are not UTF-8 are left out: the protocol's names are
/// UTF-8).
pub(crate) fn readdir(root: impl AsFd, path: &str) -> Result<Vec<DirEntry>, FsError> {
    let fd = open_beneath(
        root,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY,
        Mode::empty(),
    )?;
    let dir = Dir::new(fd).map_err(fs_error)?;
    let mut entries = Vec::new();
    for entry in dir {
        let entry = entry.map_err(fs_error)?;
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        entries.push(DirEntry {
            name: name.to_owned(),
            kind: kind_of(entry.file_type()),
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// unlink(2) of a file (a directory is [`FsError::IsDir`]: unlinkat
/// without AT_REMOVEDIR refuses it with EISDIR).
pub(crate) fn unlink(root: impl AsFd, path: &str) -> Result<(), FsError> {
    let (dir, name) = parent_beneath(root, path)?;
    unlinkat(&dir, name, AtFlags::empty()).map_err(fs_error)
}

/// mkdir(2).
pub(crate) fn mkdir(root: impl AsFd, path: &str, mode: u32) -> Result<(), FsError> {
    let (dir, name) = parent_beneath(root, path)?;
    mkdirat(&dir, name, Mode::from_raw_mode(mode)).map_err(fs_error)
}

/// rename(2), both names beneath the directory.
pub(crate) fn rename(root: impl AsFd, from: &str, to: &str) -> Result<(), FsError> {
    let (from_dir, from_name) = parent_beneath(&root, from)?;
    let (to_dir, to_name) = parent_beneath(&root, to)?;
    renameat(&from_dir, from_name, &to_dir, to_name).map_err(fs_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_allocates_what_is_left_not_what_is_asked() {
        let sixteen_mib = 16 << 20;
        assert_eq!(first_buffer_len(sixteen_mib, 10), READ_STEP);
        assert_eq!(first_buffer_len(sixteen_mib, 0), READ_STEP);
        assert_eq!(first_buffer_len(sixteen_mib, 1 << 20), 1 << 20);
        assert_eq!(first_buffer_len(100, 1 << 20), 100);
        assert_eq!(first_buffer_len(sixteen_mib, u64::MAX), sixteen_mib);
    }

    fn file_of(len: usize) -> std::fs::File {
        let path = std::env::temp_dir().join(format!(
            "ebb-offload-host-read-{}-{len}",
            std::process::id()
        ));
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }

    #[test]
    fn a_read_gives_the_bytes_from_the_offset_or_position_up_to_the_end() {
        let small = file_of(10);
        let chain = read(&small, 16 << 20, Some(0)).unwrap();
        assert_eq!(chain.to_vec(), [7u8; 10]);
        // Sequential: from the position, which moved on.
        assert_eq!(read(&small, 16 << 20, None).unwrap().len(), 10);
        assert!(read(&small, 16 << 20, None).unwrap().is_empty());
        // More than the smallest buffer: `len` or up to the end.
        let big = file_of(3 * READ_STEP + 5);
        assert_eq!(
            read(&big, 16 << 20, Some(1)).unwrap().len(),
            3 * READ_STEP + 4
        );
        assert_eq!(
            read(&big, u32::try_from(2 * READ_STEP).unwrap(), Some(1))
                .unwrap()
                .len(),
            2 * READ_STEP
        );
    }
}
