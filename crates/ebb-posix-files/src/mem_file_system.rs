//! The in-memory file system behind the FileSystem Ebb's interface
//! ([`ebb_fs::FileSystem`]): a [`MemFs`] (the tree type the native POSIX
//! personality's descriptor table works on; this one owns its own tree)
//! reached by path and handle as any backend is, so that code written
//! against the interface runs on it as it runs on the hosted node's
//! files (`ebb_offload`'s `RemoteFileSystem`). Its futures finish at their first poll: nothing
//! here waits (and, as any future, one never polled does nothing).
//!
//! Single-core, as a representative is: the state sits in a `RefCell`,
//! borrowed only inside a call and never across an `.await` (there is
//! none inside).

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::RefCell;

use ebb_fs::{
    check_path, components, last_name, names_directory, DirEntry, ErrorKind, FileKind, Handle,
    OpenFlags, Stat,
};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_posix::errno::ENOENT;

use crate::memfs::{Ino, Kind, MemFs, MAX_FILE};

/// The handles one [`MemFileSystem`] keeps open at most, as a remote
/// file system keeps per node (`TooManyOpen` past it).
pub const MAX_HANDLES: usize = 1024;

/// Permission bits a mode may carry through the interface (no set-ID or
/// sticky bit, as on every backend).
const MODE_BITS: u32 = 0o777;

/// An open file: its inode, how it was opened, where its position is.
#[derive(Clone, Copy, Debug)]
struct OpenFile {
    ino: Ino,
    flags: OpenFlags,
    position: u64,
}

#[derive(Debug, Default)]
struct State {
    fs: MemFs,
    open: BTreeMap<u32, OpenFile>,
    next_handle: u32,
}

/// A [`MemFs`] as a FileSystem backend.
#[derive(Debug, Default)]
pub struct MemFileSystem {
    state: RefCell<State>,
}

impl MemFileSystem {
    /// An empty file system.
    #[must_use]
    pub fn new() -> MemFileSystem {
        MemFileSystem::default()
    }

    /// The file system over `fs` (a tree loaded from a packed archive,
    /// say).
    #[must_use]
    pub fn with_tree(fs: MemFs) -> MemFileSystem {
        MemFileSystem {
            state: RefCell::new(State {
                fs,
                ..State::default()
            }),
        }
    }

    /// How many handles are open.
    #[must_use]
    pub fn open_handles(&self) -> usize {
        self.state.borrow().open.len()
    }

    fn with<T>(
        &self,
        call: impl FnOnce(&mut State) -> Result<T, ErrorKind>,
    ) -> Result<T, ErrorKind> {
        call(&mut self.state.borrow_mut())
    }
}

/// What an errno of [`MemFs`] is in the interface's words.
fn errno_kind(errno: isize) -> ErrorKind {
    ErrorKind::from_errno(u16::try_from(errno).unwrap_or(u16::MAX))
}

/// A checked path's components as [`MemFs`] takes them.
fn parts(path: &str) -> Result<Vec<&[u8]>, ErrorKind> {
    check_path(path)?;
    Ok(components(path).map(str::as_bytes).collect())
}

fn check_mode(mode: u32) -> Result<(), ErrorKind> {
    if mode & !MODE_BITS == 0 {
        Ok(())
    } else {
        Err(ErrorKind::InvalidArgument)
    }
}

impl State {
    /// The inode `path` names; a file named as a directory (`f/`,
    /// `f/.`) is `NotDir`.
    fn resolve(&self, path: &str) -> Result<Ino, ErrorKind> {
        let ino = self.fs.lookup(&parts(path)?).map_err(errno_kind)?;
        if names_directory(path) && self.fs.kind(ino).map_err(errno_kind)? != Kind::Dir {
            return Err(ErrorKind::NotDir);
        }
        Ok(ino)
    }

    /// The directory holding `path`'s last name (the interface's rule,
    /// [`last_name`], as the remote backend applies it), that name, and
    /// whether slashes followed it.
    fn parent<'p>(&self, path: &'p str) -> Result<(Ino, &'p [u8], bool), ErrorKind> {
        let last = last_name(path)?;
        let dir = self.resolve(last.parent)?;
        if self.fs.kind(dir).map_err(errno_kind)? != Kind::Dir {
            return Err(ErrorKind::NotDir);
        }
        Ok((dir, last.name.as_bytes(), last.trailing_slash))
    }

    /// What `name` in `dir` is, if anything.
    fn kind_in(&self, dir: Ino, name: &[u8]) -> Result<Option<Kind>, ErrorKind> {
        match self.fs.lookup_in(dir, name) {
            Ok(ino) => self.fs.kind(ino).map(Some).map_err(errno_kind),
            Err(ENOENT) => Ok(None),
            Err(errno) => Err(errno_kind(errno)),
        }
    }

    fn open(&mut self, path: &str, flags: OpenFlags, mode: u32) -> Result<Handle, ErrorKind> {
        if !flags.contains(OpenFlags::READ) && !flags.contains(OpenFlags::WRITE) {
            return Err(ErrorKind::InvalidArgument);
        }
        check_mode(mode)?;
        if self.open.len() >= MAX_HANDLES {
            return Err(ErrorKind::TooManyOpen);
        }
        let ino = if flags.contains(OpenFlags::CREATE) {
            self.create(path, flags, mode)?
        } else {
            self.resolve(path)?
        };
        if self.fs.kind(ino).map_err(errno_kind)? == Kind::Dir {
            // Opened only as regular files, on every backend.
            return Err(ErrorKind::IsDir);
        }
        if flags.contains(OpenFlags::TRUNCATE) {
            self.fs.truncate(ino, 0).map_err(errno_kind)?;
        }
        let handle = self.free_handle();
        self.fs.opened(ino).map_err(errno_kind)?;
        self.open.insert(
            handle,
            OpenFile {
                ino,
                flags,
                position: 0,
            },
        );
        Ok(Handle(handle))
    }

    /// open(2) with O_CREAT: the file `path` names, made if missing.
    fn create(&mut self, path: &str, flags: OpenFlags, mode: u32) -> Result<Ino, ErrorKind> {
        if names_directory(path) && path.ends_with('.') {
            // `d/.`: nothing to create, `.` exists or its directory does
            // not; either way it is a directory, not a file to open.
            self.resolve(path)?;
            return Err(ErrorKind::IsDir);
        }
        let (dir, name, trailing_slash) = self.parent(path)?;
        if trailing_slash {
            // open(2): "EISDIR: pathname refers to a directory" covers
            // O_CREAT with a trailing slash, whatever is there.
            return Err(ErrorKind::IsDir);
        }
        match self.fs.lookup_in(dir, name) {
            Ok(_) if flags.contains(OpenFlags::EXCLUSIVE) => Err(ErrorKind::Exists),
            Ok(ino) => Ok(ino),
            Err(ENOENT) => self.fs.create(dir, name, mode).map_err(errno_kind),
            Err(errno) => Err(errno_kind(errno)),
        }
    }

    /// A handle number not in use (there are fewer than
    /// [`MAX_HANDLES`], so the search ends).
    fn free_handle(&mut self) -> u32 {
        while self.open.contains_key(&self.next_handle) {
            self.next_handle = self.next_handle.wrapping_add(1);
        }
        let handle = self.next_handle;
        self.next_handle = self.next_handle.wrapping_add(1);
        handle
    }

    fn file(&self, handle: Handle, needs: OpenFlags) -> Result<OpenFile, ErrorKind> {
        let file = *self.open.get(&handle.0).ok_or(ErrorKind::BadHandle)?;
        // read(2) of a descriptor not open for reading (write(2): for
        // writing) is EBADF.
        if file.flags.contains(needs) {
            Ok(file)
        } else {
            Err(ErrorKind::BadHandle)
        }
    }

    fn pread(&self, handle: Handle, len: usize, offset: u64) -> Result<IoChain, ErrorKind> {
        let file = self.file(handle, OpenFlags::READ)?;
        let size = self.fs.size(file.ino).map_err(errno_kind)?;
        let left = usize::try_from(size.saturating_sub(offset)).unwrap_or(usize::MAX);
        let mut bytes = alloc::vec![0u8; len.min(left)];
        let got = self
            .fs
            .read_at(file.ino, offset, &mut bytes)
            .map_err(errno_kind)?;
        bytes.truncate(got);
        Ok(IoChain::from(IoBuf::from_vec(bytes)))
    }

    fn read(&mut self, handle: Handle, len: usize) -> Result<IoChain, ErrorKind> {
        let position = self.file(handle, OpenFlags::READ)?.position;
        let data = self.pread(handle, len, position)?;
        self.advance(handle, position, data.len());
        Ok(data)
    }

    /// pwrite(2): at `offset`, except on a file opened to append, where
    /// Linux writes at the end whatever the offset (pwrite(2), BUGS), as
    /// the remote backend's Linux then does.
    fn pwrite(&mut self, handle: Handle, data: &IoChain, offset: u64) -> Result<u64, ErrorKind> {
        let file = self.file(handle, OpenFlags::WRITE)?;
        let at = if file.flags.contains(OpenFlags::APPEND) {
            self.fs.size(file.ino).map_err(errno_kind)?
        } else {
            offset
        };
        self.write_at(file, data, at)
    }

    fn write_at(&mut self, file: OpenFile, data: &IoChain, offset: u64) -> Result<u64, ErrorKind> {
        let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
        if offset.checked_add(len).is_none_or(|end| end > MAX_FILE) {
            return Err(ErrorKind::TooLarge);
        }
        let mut at = offset;
        for segment in data.segments() {
            let wrote = self
                .fs
                .write_at(file.ino, at, segment)
                .map_err(errno_kind)?;
            at += u64::try_from(wrote).unwrap_or(u64::MAX);
        }
        Ok(at - offset)
    }

    fn write(&mut self, handle: Handle, data: &IoChain) -> Result<u64, ErrorKind> {
        let file = self.file(handle, OpenFlags::WRITE)?;
        let at = if file.flags.contains(OpenFlags::APPEND) {
            self.fs.size(file.ino).map_err(errno_kind)?
        } else {
            file.position
        };
        let wrote = self.write_at(file, data, at)?;
        self.advance(handle, at, usize::try_from(wrote).unwrap_or(usize::MAX));
        Ok(wrote)
    }

    fn advance(&mut self, handle: Handle, from: u64, by: usize) {
        if let Some(file) = self.open.get_mut(&handle.0) {
            file.position = from.saturating_add(u64::try_from(by).unwrap_or(u64::MAX));
        }
    }

    fn stat(&self, path: &str) -> Result<Stat, ErrorKind> {
        let stat = self.fs.stat(self.resolve(path)?).map_err(errno_kind)?;
        Ok(Stat {
            kind: file_kind(stat.kind),
            mode: stat.mode,
            size: stat.size,
            // The tree keeps no times.
            modified_secs: 0,
            modified_nanos: 0,
        })
    }

    fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, ErrorKind> {
        let dir = self.resolve(path)?;
        let names = self.fs.names_after(dir, None).map_err(errno_kind)?;
        // Byte order is the order of the names as text too (UTF-8 sorts
        // as its code points). A name that is not UTF-8 (a C program may
        // make one) is left out, as the remote backend leaves it out: the
        // interface's names are text, and no path could name it.
        Ok(names
            .into_iter()
            .filter_map(|(name, _, kind)| {
                Some(DirEntry {
                    name: String::from_utf8(name).ok()?,
                    kind: file_kind(kind),
                })
            })
            .collect())
    }

    fn close(&mut self, handle: Handle) -> Result<(), ErrorKind> {
        let file = self.open.remove(&handle.0).ok_or(ErrorKind::BadHandle)?;
        self.fs.closed(file.ino);
        Ok(())
    }

    fn unlink(&mut self, path: &str) -> Result<(), ErrorKind> {
        let (dir, name, trailing_slash) = self.parent(path)?;
        if trailing_slash && self.kind_in(dir, name)? == Some(Kind::File) {
            // unlink(2) of `f/`: the name must be a directory (which
            // unlink refuses with EISDIR, below).
            return Err(ErrorKind::NotDir);
        }
        self.fs.unlink(dir, name).map_err(errno_kind)
    }

    fn mkdir(&mut self, path: &str, mode: u32) -> Result<(), ErrorKind> {
        check_mode(mode)?;
        let (dir, name, _) = self.parent(path)?;
        self.fs
            .mkdir(dir, name, mode)
            .map(|_| ())
            .map_err(errno_kind)
    }

    fn rename(&mut self, from: &str, to: &str) -> Result<(), ErrorKind> {
        let (from_dir, from_name, from_slash) = self.parent(from)?;
        let (to_dir, to_name, to_slash) = self.parent(to)?;
        // rename(2): a trailing slash on either name asks for a
        // directory; a file so named is ENOTDIR.
        if (from_slash || to_slash) && self.kind_in(from_dir, from_name)? == Some(Kind::File) {
            return Err(ErrorKind::NotDir);
        }
        self.fs
            .rename(from_dir, from_name, to_dir, to_name)
            .map_err(errno_kind)
    }
}

fn file_kind(kind: Kind) -> FileKind {
    match kind {
        Kind::File => FileKind::File,
        Kind::Dir => FileKind::Dir,
    }
}

impl ebb_fs::FileSystem for MemFileSystem {
    type Error = ErrorKind;

    async fn open(&self, path: &str, flags: OpenFlags, mode: u32) -> Result<Handle, ErrorKind> {
        self.with(|state| state.open(path, flags, mode))
    }

    async fn read(&self, handle: Handle, len: usize) -> Result<IoChain, ErrorKind> {
        self.with(|state| state.read(handle, len))
    }

    async fn pread(&self, handle: Handle, len: usize, offset: u64) -> Result<IoChain, ErrorKind> {
        self.with(|state| state.pread(handle, len, offset))
    }

    async fn write(&self, handle: Handle, data: IoChain) -> Result<u64, ErrorKind> {
        self.with(|state| state.write(handle, &data))
    }

    async fn pwrite(&self, handle: Handle, data: IoChain, offset: u64) -> Result<u64, ErrorKind> {
        self.with(|state| state.pwrite(handle, &data, offset))
    }

    async fn stat(&self, path: &str) -> Result<Stat, ErrorKind> {
        self.with(|state| state.stat(path))
    }

    async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, ErrorKind> {
        self.with(|state| state.readdir(path))
    }

    async fn close(&self, handle: Handle) -> Result<(), ErrorKind> {
        self.with(|state| state.close(handle))
    }

    async fn unlink(&self, path: &str) -> Result<(), ErrorKind> {
        self.with(|state| state.unlink(path))
    }

    async fn mkdir(&self, path: &str, mode: u32) -> Result<(), ErrorKind> {
        self.with(|state| state.mkdir(path, mode))
    }

    async fn rename(&self, from: &str, to: &str) -> Result<(), ErrorKind> {
        self.with(|state| state.rename(from, to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_fs::conformance::ready_now as now;
    use ebb_fs::FileSystem;

    #[test]
    fn it_does_what_every_file_system_does() {
        let fs = MemFileSystem::new();
        now(ebb_fs::conformance::check(&fs, "conformance")).unwrap();
        // Nested, and again beside the first: the check makes its own
        // directory each time.
        now(ebb_fs::conformance::check(&fs, "conformance/d/again")).unwrap();
        now(ebb_fs::conformance::check(&fs, "beside")).unwrap();
        assert_eq!(fs.open_handles(), 0, "the check closes what it opens");
    }

    #[test]
    fn a_handle_reads_or_writes_only_as_it_was_opened() {
        let fs = MemFileSystem::new();
        let create = OpenFlags::WRITE | OpenFlags::CREATE;
        let writer = now(fs.open("f", create, 0o600)).unwrap();
        assert_eq!(now(fs.read(writer, 1)).err(), Some(ErrorKind::BadHandle));
        let reader = now(fs.open("f", OpenFlags::READ, 0)).unwrap();
        let data = IoChain::from(IoBuf::copy_from_slice(b"x"));
        assert_eq!(
            now(fs.write(reader, data)).err(),
            Some(ErrorKind::BadHandle)
        );
        assert_eq!(
            now(fs.open("g", OpenFlags::CREATE, 0o600)).err(),
            Some(ErrorKind::InvalidArgument),
            "neither read nor write"
        );
        assert_eq!(
            now(fs.mkdir("d", 0o1755)).err(),
            Some(ErrorKind::InvalidArgument),
            "a sticky bit"
        );
    }

    #[test]
    fn handles_run_out_and_come_back() {
        let fs = MemFileSystem::new();
        let create = OpenFlags::WRITE | OpenFlags::CREATE;
        let handles: Vec<Handle> = (0..MAX_HANDLES)
            .map(|_| now(fs.open("f", create, 0o600)).unwrap())
            .collect();
        assert_eq!(
            now(fs.open("f", create, 0o600)).err(),
            Some(ErrorKind::TooManyOpen)
        );
        now(fs.close(handles[7])).unwrap();
        let again = now(fs.open("f", create, 0o600)).unwrap();
        assert!(
            handles
                .iter()
                .enumerate()
                .all(|(i, handle)| i == 7 || *handle != again),
            "a number not in use"
        );
    }

    #[test]
    fn a_packed_tree_is_served_as_it_was_loaded() {
        let mut tree = MemFs::new();
        let etc = tree.mkdir(crate::memfs::ROOT, b"etc", 0o755).unwrap();
        let hosts = tree.create(etc, b"hosts", 0o644).unwrap();
        tree.write_at(hosts, 0, b"127.0.0.1 localhost\n").unwrap();
        tree.create(etc, b"\xff", 0o644).unwrap();
        let fs = MemFileSystem::with_tree(tree);
        let file = now(fs.open("etc/hosts", OpenFlags::READ, 0)).unwrap();
        assert_eq!(
            now(fs.read(file, 100)).unwrap().to_vec(),
            b"127.0.0.1 localhost\n"
        );
        let names: Vec<String> = now(fs.readdir("etc"))
            .unwrap()
            .into_iter()
            .map(|entry| entry.name)
            .collect();
        assert_eq!(names, ["hosts"], "a name not UTF-8 is left out");
        assert_eq!(now(fs.stat("./etc//hosts")).unwrap().size, 20);
    }
}
