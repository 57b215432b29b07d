//! Descriptors and the files group's calls over a [`MemFs`]: open file
//! descriptions shared by `dup`s (one offset, one status), per-descriptor
//! close-on-exec, the working directory, and each call's checks and
//! errors as Linux gives them (open(2), read(2), lseek(2), dup(2),
//! fcntl(2), getdents64(2), getcwd(2)).
//!
//! Descriptors 0, 1 and 2 are the standard streams: the platform does
//! their I/O ([`Target::Stream`]); here they are descriptors like the
//! others, so `dup`, `close` and `fcntl` treat them alike.
//!
//! A descriptor may also name an object the platform keeps (a socket, an
//! epoll set, an eventfd, a pipe's end: [`Target::Object`]). The table
//! counts its descriptors like any other's; when the last one closes (by
//! `close`, or by `dup2`/`dup3` over it), the object's id waits in
//! [`Files::take_released`] for the platform to release it.

use alloc::vec::Vec;

use crate::layout::{self, StatFields, S_IFCHR, S_IFDIR, S_IFIFO, S_IFREG, S_IFSOCK};
use crate::memfs::{Ino, Kind, MemFs, ROOT};
use crate::path;
use ebb_posix::errno::{EBADF, EEXIST, EINVAL, EISDIR, EMFILE, ENOENT, ENOTDIR, ERANGE, ESPIPE};

/// open(2)'s flags (`asm-generic/fcntl.h`).
pub const O_ACCMODE: u32 = 0o3;
/// Read only.
pub const O_RDONLY: u32 = 0;
/// Write only.
pub const O_WRONLY: u32 = 0o1;
/// Read and write.
pub const O_RDWR: u32 = 0o2;
/// Create if missing.
pub const O_CREAT: u32 = 0o100;
/// With O_CREAT: fail if it exists.
pub const O_EXCL: u32 = 0o200;
/// Truncate to 0.
pub const O_TRUNC: u32 = 0o1000;
/// Every write at the end.
pub const O_APPEND: u32 = 0o2000;
/// Must be a directory.
pub const O_DIRECTORY: u32 = 0o200_000;
/// Close on exec.
pub const O_CLOEXEC: u32 = 0o2_000_000;
/// The status flags F_SETFL may change (Linux: O_APPEND, O_NONBLOCK,
/// O_ASYNC, O_DIRECT, O_NOATIME).
const SETTABLE: u32 = O_APPEND | O_NONBLOCK | 0o20000 | 0o40000 | 0o1_000_000;

/// The working-directory descriptor of the `*at` calls.
pub const AT_FDCWD: i64 = -100;
/// unlinkat: remove a directory.
pub const AT_REMOVEDIR: u32 = 0x200;

/// `st_dev` of the tree's files and of the console (the standard
/// streams): distinct, so that no `(st_dev, st_ino)` pair of one is the
/// other's.
pub const TREE_DEVICE: u64 = 1;
/// The console's device number.
pub const CONSOLE_DEVICE: u64 = 2;
/// The file mode creation mask a program starts with (umask(2)): Linux's
/// default, 022, so that files come out with the modes they have on
/// Linux.
pub const UMASK: u32 = 0o022;

/// `FD_CLOEXEC`.
pub const FD_CLOEXEC: u32 = 1;
/// Descriptors a program may hold (RLIMIT_NOFILE): room for a server's
/// ten thousand clients (Redis asks for `maxclients` + 32, 10,032 by
/// default).
pub const MAX_FDS: usize = 16_384;
/// `st_dev` of the platform's objects (sockets, pipes, epoll sets).
pub const OBJECT_DEVICE: u64 = 3;
/// `O_NONBLOCK`: a status flag (fcntl(2) `F_SETFL`).
pub const O_NONBLOCK: u32 = 0o4000;

/// What kind of object a [`Target::Object`] is, for fstat(2)'s mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// A socket (`S_IFSOCK`).
    Socket,
    /// A pipe's end (`S_IFIFO`).
    Pipe,
    /// An anonymous inode (epoll, eventfd): no type bits, as Linux shows.
    Anonymous,
}

impl ObjectKind {
    /// `st_mode` of a descriptor naming such an object: what Linux says
    /// for a socket, a pipe, and an anonymous inode (epoll, eventfd).
    #[must_use]
    pub fn mode(self) -> u32 {
        match self {
            ObjectKind::Socket => S_IFSOCK | 0o777,
            ObjectKind::Pipe => S_IFIFO | 0o600,
            ObjectKind::Anonymous => 0o600,
        }
    }
}

/// What a descriptor refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Standard input (0), output (1) or error (2).
    Stream(u8),
    /// A file or directory of the tree.
    Node(Ino),
    /// An object of the platform's, by its id.
    Object {
        /// The platform's id for it.
        id: u32,
        /// Its kind.
        kind: ObjectKind,
    },
}

#[derive(Debug)]
struct Description {
    target: Target,
    /// A file's offset; a directory's count of entries listed, its
    /// getdents64 `d_off`.
    offset: u64,
    flags: u32,
    refs: u32,
    /// Where a directory's listing resumes.
    listed: Listed,
}

/// How far a directory's listing got: by name, not by position, so that
/// names added or removed meanwhile move nothing (readdir(3): every entry
/// neither added nor removed since the start is returned once).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Listed {
    /// Nothing yet.
    Start,
    /// `.`.
    Dot,
    /// `.` and `..`.
    DotDot,
    /// Up to and with this name.
    After(Vec<u8>),
}

#[derive(Clone, Copy, Debug)]
struct Fd {
    description: usize,
    cloexec: bool,
}

/// A program's files: the tree, its descriptors, its working directory.
#[derive(Debug)]
pub struct Files {
    fs: MemFs,
    fds: Vec<Option<Fd>>,
    descriptions: Vec<Option<Description>>,
    cwd: Ino,
    /// The file mode creation mask (umask(2)).
    umask: u32,
    /// Objects whose last descriptor closed, for the platform to release.
    released: Vec<u32>,
}

impl Default for Files {
    fn default() -> Self {
        Files::new()
    }
}

impl Files {
    /// The standard streams on 0, 1, 2; a tree holding an empty `/tmp`;
    /// the root as working directory.
    #[must_use]
    pub fn new() -> Files {
        let mut fs = MemFs::new();
        let _ = fs.mkdir(ROOT, b"tmp", 0o1777);
        let mut files = Files {
            fs,
            fds: Vec::new(),
            descriptions: Vec::new(),
            cwd: ROOT,
            umask: UMASK,
            released: Vec::new(),
        };
        for (stream, access) in [(0u8, O_RDONLY), (1, O_WRONLY), (2, O_WRONLY)] {
            let description = files.describe(Target::Stream(stream), access);
            // Through `place`, which counts the reference: closing a
            // stream then frees its description (it once underflowed).
            files.place(usize::from(stream), description, false);
        }
        files
    }

    /// umask(2): sets the file mode creation mask to `mask`'s permission
    /// bits; the old mask.
    pub fn umask(&mut self, mask: u32) -> u32 {
        core::mem::replace(&mut self.umask, mask & 0o777)
    }

    /// The tree (to fill it at start).
    pub fn fs_mut(&mut self) -> &mut MemFs {
        &mut self.fs
    }

    fn describe(&mut self, target: Target, flags: u32) -> usize {
        let description = Description {
            target,
            offset: 0,
            flags,
            refs: 0,
            listed: Listed::Start,
        };
        match self.descriptions.iter().position(Option::is_none) {
            Some(free) => {
                self.descriptions[free] = Some(description);
                free
            }
            None => {
                self.descriptions.push(Some(description));
                self.descriptions.len() - 1
            }
        }
    }

    /// Installs `description` on the lowest free descriptor ≥ `min`.
    fn install(&mut self, description: usize, min: usize, cloexec: bool) -> Result<usize, isize> {
        let fd = (min..MAX_FDS)
            .find(|&fd| self.fds.get(fd).is_none_or(Option::is_none))
            .ok_or(EMFILE)?;
        self.place(fd, description, cloexec);
        Ok(fd)
    }

    fn place(&mut self, fd: usize, description: usize, cloexec: bool) {
        if self.fds.len() <= fd {
            self.fds.resize(fd + 1, None);
        }
        self.fds[fd] = Some(Fd {
            description,
            cloexec,
        });
        if let Some(Some(described)) = self.descriptions.get_mut(description) {
            described.refs += 1;
        }
    }

    fn fd(&self, fd: usize) -> Result<Fd, isize> {
        self.fds.get(fd).copied().flatten().ok_or(EBADF)
    }

    fn description(&self, fd: usize) -> Result<&Description, isize> {
        let Fd { description, .. } = self.fd(fd)?;
        self.descriptions[description].as_ref().ok_or(EBADF)
    }

    fn description_mut(&mut self, fd: usize) -> Result<&mut Description, isize> {
        let Fd { description, .. } = self.fd(fd)?;
        self.descriptions[description].as_mut().ok_or(EBADF)
    }

    /// What `fd` refers to.
    pub fn target(&self, fd: usize) -> Result<Target, isize> {
        Ok(self.description(fd)?.target)
    }

    /// `fd`'s status flags (fcntl(2) `F_GETFL`): its access mode, and
    /// whether it is non-blocking ([`O_NONBLOCK`]) or appends.
    pub fn status_flags(&self, fd: usize) -> Result<u32, isize> {
        Ok(self.description(fd)?.flags)
    }

    /// A new descriptor, the lowest free one, for the platform's object
    /// `id`; `flags` are its access mode and status flags (`O_NONBLOCK`),
    /// `O_CLOEXEC` its descriptor flag. `EMFILE` when none is free.
    pub fn open_object(&mut self, id: u32, kind: ObjectKind, flags: u32) -> Result<usize, isize> {
        let description =
            self.describe(Target::Object { id, kind }, flags & (O_ACCMODE | SETTABLE));
        self.install(description, 0, flags & O_CLOEXEC != 0)
            .inspect_err(|_| self.descriptions[description] = None)
    }

    /// Whether a descriptor is free: accept(2) asks before it takes a
    /// connection off the queue, so `EMFILE` leaves it there, as Linux's
    /// `get_unused_fd_flags` comes first in `do_accept`.
    #[must_use]
    pub fn has_free(&self) -> bool {
        (0..MAX_FDS).any(|fd| self.fds.get(fd).is_none_or(Option::is_none))
    }

    /// The objects whose last descriptor closed since the last call: the
    /// platform releases each (a socket's connection closes, a pipe's
    /// other end sees the end).
    pub fn take_released(&mut self) -> Vec<u32> {
        core::mem::take(&mut self.released)
    }

    /// The resolved components of `path`, relative to `dirfd` (or the
    /// working directory for [`AT_FDCWD`]).
    fn resolve(&self, dirfd: i64, path: &[u8]) -> Result<Vec<Vec<u8>>, isize> {
        let base_dir = if path.first() == Some(&b'/') {
            ROOT
        } else if dirfd == AT_FDCWD {
            self.cwd
        } else {
            let fd = usize::try_from(dirfd).map_err(|_| EBADF)?;
            match self.target(fd)? {
                Target::Node(ino) if self.fs.kind(ino)? == Kind::Dir => ino,
                _ => return Err(ENOTDIR),
            }
        };
        let base = self.fs.path_of(base_dir)?;
        let base: Vec<&[u8]> = base.iter().map(Vec::as_slice).collect();
        Ok(path::resolve(&base, path)?
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect())
    }

    fn lookup(&self, dirfd: i64, path: &[u8]) -> Result<Ino, isize> {
        let parts = self.resolve(dirfd, path)?;
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let ino = self.fs.lookup(&parts)?;
        if path::wants_directory(path) && self.fs.kind(ino)? != Kind::Dir {
            return Err(ENOTDIR);
        }
        Ok(ino)
    }

    /// openat(2).
    pub fn open(&mut self, dirfd: i64, path: &[u8], flags: u32, mode: u32) -> Result<usize, isize> {
        let parts = self.resolve(dirfd, path)?;
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let access = flags & O_ACCMODE;
        // Checked before anything changes: a bad combination, or no free
        // descriptor, leaves the tree as it was (open(2): O_CREAT with
        // O_DIRECTORY is EINVAL since Linux 6.4).
        if access == O_ACCMODE || flags & (O_CREAT | O_DIRECTORY) == O_CREAT | O_DIRECTORY {
            return Err(EINVAL);
        }
        if !self.has_free() {
            return Err(EMFILE);
        }
        let ino = match self.fs.lookup(&parts) {
            Ok(_) if flags & O_CREAT != 0 && flags & O_EXCL != 0 => return Err(EEXIST),
            Ok(ino) => ino,
            Err(ENOENT) if flags & O_CREAT != 0 => {
                if path::wants_directory(path) {
                    return Err(EISDIR);
                }
                let (dir, name) = self.fs.parent(&parts)?;
                self.fs.create(dir, name, mode & !self.umask)?
            }
            Err(error) => return Err(error),
        };
        match self.fs.kind(ino)? {
            // O_TRUNC asks to write, which a directory refuses.
            Kind::Dir if access != O_RDONLY || flags & (O_CREAT | O_TRUNC) != 0 => {
                return Err(EISDIR)
            }
            Kind::File if flags & O_DIRECTORY != 0 || path::wants_directory(path) => {
                return Err(ENOTDIR)
            }
            Kind::File if flags & O_TRUNC != 0 => self.fs.truncate(ino, 0)?,
            _ => {}
        }
        let description = self.describe(Target::Node(ino), flags & (O_ACCMODE | SETTABLE));
        match self.install(description, 0, flags & O_CLOEXEC != 0) {
            Ok(fd) => {
                self.fs.opened(ino)?;
                Ok(fd)
            }
            Err(error) => {
                self.descriptions[description] = None;
                Err(error)
            }
        }
    }

    /// close(2).
    pub fn close(&mut self, fd: usize) -> Result<(), isize> {
        let Fd { description, .. } = self.fd(fd)?;
        self.fds[fd] = None;
        let Some(described) = self.descriptions[description].as_mut() else {
            return Ok(());
        };
        described.refs -= 1;
        if described.refs == 0 {
            match described.target {
                Target::Node(ino) => self.fs.closed(ino),
                Target::Object { id, .. } => self.released.push(id),
                Target::Stream(_) => {}
            }
            self.descriptions[description] = None;
        }
        Ok(())
    }

    fn readable(&self, fd: usize) -> Result<Ino, isize> {
        let description = self.description(fd)?;
        if description.flags & O_ACCMODE == O_WRONLY {
            return Err(EBADF);
        }
        match description.target {
            Target::Node(ino) => Ok(ino),
            Target::Stream(_) | Target::Object { .. } => Err(ESPIPE),
        }
    }

    fn writable(&self, fd: usize) -> Result<Ino, isize> {
        let description = self.description(fd)?;
        if description.flags & O_ACCMODE == O_RDONLY {
            return Err(EBADF);
        }
        match description.target {
            Target::Node(ino) => Ok(ino),
            Target::Stream(_) | Target::Object { .. } => Err(ESPIPE),
        }
    }

    /// read(2) of a file at its description's offset.
    pub fn read(&mut self, fd: usize, buf: &mut [u8]) -> Result<usize, isize> {
        let ino = self.readable(fd)?;
        let offset = self.description(fd)?.offset;
        let count = self.fs.read_at(ino, offset, buf)?;
        self.description_mut(fd)?.offset = offset + count as u64;
        Ok(count)
    }

    /// pread64(2).
    pub fn pread(&self, fd: usize, buf: &mut [u8], offset: i64) -> Result<usize, isize> {
        let ino = self.readable(fd)?;
        let offset = u64::try_from(offset).map_err(|_| EINVAL)?;
        self.fs.read_at(ino, offset, buf)
    }

    /// write(2) of a file: at its offset, or its end under `O_APPEND`.
    pub fn write(&mut self, fd: usize, bytes: &[u8]) -> Result<usize, isize> {
        let ino = self.writable(fd)?;
        let description = self.description(fd)?;
        let offset = if description.flags & O_APPEND != 0 {
            self.fs.size(ino)?
        } else {
            description.offset
        };
        let count = self.fs.write_at(ino, offset, bytes)?;
        self.description_mut(fd)?.offset = offset + count as u64;
        Ok(count)
    }

    /// pwrite64(2) (Linux appends under `O_APPEND` whatever the offset).
    pub fn pwrite(&mut self, fd: usize, bytes: &[u8], offset: i64) -> Result<usize, isize> {
        let ino = self.writable(fd)?;
        let offset = u64::try_from(offset).map_err(|_| EINVAL)?;
        let offset = if self.description(fd)?.flags & O_APPEND != 0 {
            self.fs.size(ino)?
        } else {
            offset
        };
        self.fs.write_at(ino, offset, bytes)
    }

    /// lseek(2): `SEEK_SET` 0, `SEEK_CUR` 1, `SEEK_END` 2; `EINVAL` for
    /// a negative result or another whence, `ESPIPE` on a stream.
    pub fn lseek(&mut self, fd: usize, offset: i64, whence: u32) -> Result<u64, isize> {
        let description = self.description(fd)?;
        let Target::Node(ino) = description.target else {
            return Err(ESPIPE);
        };
        let base = match whence {
            0 => 0,
            1 => i64::try_from(description.offset).map_err(|_| EINVAL)?,
            2 if self.fs.kind(ino)? == Kind::File => {
                i64::try_from(self.fs.size(ino)?).map_err(|_| EINVAL)?
            }
            2 => 0,
            _ => return Err(EINVAL),
        };
        let position = base.checked_add(offset).ok_or(EINVAL)?;
        let position = u64::try_from(position).map_err(|_| EINVAL)?;
        // A directory's offset is a count of entries listed: seeking to
        // one restarts the listing there (rewinddir, seekdir).
        let listed = match self.fs.kind(ino)? {
            Kind::Dir => Some(self.listed_after(ino, position)?),
            Kind::File => None,
        };
        let description = self.description_mut(fd)?;
        description.offset = position;
        if let Some(listed) = listed {
            description.listed = listed;
        }
        Ok(position)
    }

    fn stat_of(&self, target: Target) -> Result<StatFields, isize> {
        match target {
            // The console, a device of its own: neither its device nor its
            // inode numbers are the tree's.
            Target::Stream(stream) => Ok(StatFields {
                dev: CONSOLE_DEVICE,
                ino: u64::from(stream) + 1,
                mode: S_IFCHR | 0o620,
                nlink: 1,
                size: 0,
            }),
            Target::Object { id, kind } => Ok(StatFields {
                dev: OBJECT_DEVICE,
                ino: u64::from(id) + 1,
                mode: kind.mode(),
                nlink: 1,
                size: 0,
            }),
            Target::Node(ino) => {
                let stat = self.fs.stat(ino)?;
                let kind = if stat.kind == Kind::Dir {
                    S_IFDIR
                } else {
                    S_IFREG
                };
                Ok(StatFields {
                    dev: TREE_DEVICE,
                    ino: ino as u64,
                    mode: kind | stat.mode,
                    nlink: u64::from(stat.links),
                    size: stat.size,
                })
            }
        }
    }

    /// fstat(2).
    pub fn fstat(&self, fd: usize) -> Result<StatFields, isize> {
        self.stat_of(self.target(fd)?)
    }

    /// stat(2), lstat(2) and newfstatat(2) of a path (no symbolic links:
    /// all three agree).
    pub fn stat(&self, dirfd: i64, path: &[u8]) -> Result<StatFields, isize> {
        self.stat_of(Target::Node(self.lookup(dirfd, path)?))
    }

    /// access(2) and faccessat(2): whether it exists (the program runs as
    /// root, so every permission is granted).
    pub fn access(&self, dirfd: i64, path: &[u8]) -> Result<(), isize> {
        self.lookup(dirfd, path).map(|_| ())
    }

    /// ftruncate(2): `EINVAL` unless open for writing or for a negative
    /// length (Linux's answers).
    pub fn ftruncate(&mut self, fd: usize, len: i64) -> Result<(), isize> {
        self.fd(fd)?;
        let ino = self.writable(fd).map_err(|_| EINVAL)?;
        let len = u64::try_from(len).map_err(|_| EINVAL)?;
        self.fs.truncate(ino, len)
    }

    /// fsync(2), fdatasync(2): memory is where the data lives; `EINVAL`
    /// for a stream (as for a terminal on Linux).
    pub fn fsync(&self, fd: usize) -> Result<(), isize> {
        match self.target(fd)? {
            Target::Node(_) => Ok(()),
            Target::Stream(_) | Target::Object { .. } => Err(EINVAL),
        }
    }

    /// fchown(2) and fchmod(2): the program runs as root and the tree
    /// keeps no owners, so a valid descriptor is all they check.
    pub fn fchange(&self, fd: usize) -> Result<(), isize> {
        self.fd(fd).map(|_| ())
    }

    /// mkdirat(2).
    pub fn mkdir(&mut self, dirfd: i64, path: &[u8], mode: u32) -> Result<(), isize> {
        let parts = self.resolve(dirfd, path)?;
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        if parts.is_empty() {
            return Err(EEXIST);
        }
        let (dir, name) = self.fs.parent(&parts)?;
        self.fs.mkdir(dir, name, mode & !self.umask).map(|_| ())
    }

    /// unlinkat(2): a file, or with [`AT_REMOVEDIR`] an empty directory.
    pub fn unlink(&mut self, dirfd: i64, path: &[u8], flags: u32) -> Result<(), isize> {
        let last = path
            .rsplit(|&byte| byte == b'/')
            .find(|part| !part.is_empty());
        if flags & AT_REMOVEDIR != 0 && last == Some(b".") {
            // rmdir(2): EINVAL when the last component is `.`.
            return Err(EINVAL);
        }
        if path::wants_directory(path) {
            // A trailing slash names a directory: a file there is ENOTDIR.
            let ino = self.lookup(dirfd, path)?;
            if flags & AT_REMOVEDIR == 0 && self.fs.kind(ino)? == Kind::Dir {
                return Err(EISDIR);
            }
        }
        let parts = self.resolve(dirfd, path)?;
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let (dir, name) = self.fs.parent(&parts)?;
        if flags & AT_REMOVEDIR != 0 {
            self.fs.rmdir(dir, name)
        } else {
            self.fs.unlink(dir, name)
        }
    }

    /// renameat(2).
    pub fn rename(
        &mut self,
        from_dirfd: i64,
        from: &[u8],
        to_dirfd: i64,
        to: &[u8],
    ) -> Result<(), isize> {
        // A trailing slash on either name asks for a directory: moving a
        // file so is ENOTDIR.
        if path::wants_directory(from) || path::wants_directory(to) {
            let moving = self.lookup(from_dirfd, from.strip_suffix(b"/").unwrap_or(from))?;
            if self.fs.kind(moving)? != Kind::Dir {
                return Err(ENOTDIR);
            }
        }
        let from = self.resolve(from_dirfd, from)?;
        let to = self.resolve(to_dirfd, to)?;
        let from: Vec<&[u8]> = from.iter().map(Vec::as_slice).collect();
        let to: Vec<&[u8]> = to.iter().map(Vec::as_slice).collect();
        let (from_dir, from_name) = self.fs.parent(&from)?;
        let (to_dir, to_name) = self.fs.parent(&to)?;
        self.fs.rename(from_dir, from_name, to_dir, to_name)
    }

    /// getcwd(2): the path and its NUL into `buf`; the length written,
    /// `ERANGE` if it does not fit.
    pub fn getcwd(&self, buf: &mut [u8]) -> Result<usize, isize> {
        let names = self.fs.path_of(self.cwd)?;
        let mut path = Vec::new();
        for name in &names {
            path.push(b'/');
            path.extend_from_slice(name);
        }
        if path.is_empty() {
            path.push(b'/');
        }
        path.push(0);
        let out = buf.get_mut(..path.len()).ok_or(ERANGE)?;
        out.copy_from_slice(&path);
        Ok(path.len())
    }

    /// chdir(2).
    pub fn chdir(&mut self, path: &[u8]) -> Result<(), isize> {
        let ino = self.lookup(AT_FDCWD, path)?;
        if self.fs.kind(ino)? != Kind::Dir {
            return Err(ENOTDIR);
        }
        // The working directory holds its inode as an open descriptor
        // does: removed, it stays itself (and getcwd says ENOENT).
        self.fs.opened(ino)?;
        self.fs.closed(self.cwd);
        self.cwd = ino;
        Ok(())
    }

    /// dup(2) and fcntl's `F_DUPFD`: the lowest free descriptor ≥ `min`.
    pub fn dup(&mut self, fd: usize, min: usize, cloexec: bool) -> Result<usize, isize> {
        let Fd { description, .. } = self.fd(fd)?;
        if min >= MAX_FDS {
            return Err(EINVAL);
        }
        self.install(description, min, cloexec)
    }

    /// dup3(2) (dup2(2) is dup3 without flags, but the same descriptor
    /// twice is itself there and `EINVAL` here).
    pub fn dup3(&mut self, old: usize, new: usize, flags: u32) -> Result<usize, isize> {
        let Fd { description, .. } = self.fd(old)?;
        if flags & !O_CLOEXEC != 0 || old == new {
            return Err(EINVAL);
        }
        if new >= MAX_FDS {
            return Err(EBADF);
        }
        if self.fd(new).is_ok() {
            self.close(new)?;
        }
        self.place(new, description, flags & O_CLOEXEC != 0);
        Ok(new)
    }

    /// dup2(2).
    pub fn dup2(&mut self, old: usize, new: usize) -> Result<usize, isize> {
        if old == new {
            return self.fd(old).map(|_| new);
        }
        self.dup3(old, new, 0)
    }

    /// fcntl(2)'s descriptor and status commands: `F_DUPFD` 0, `F_GETFD` 1,
    /// `F_SETFD` 2, `F_GETFL` 3, `F_SETFL` 4, `F_DUPFD_CLOEXEC` 1030;
    /// `None` for another command (the platform's: locks).
    pub fn fcntl(&mut self, fd: usize, command: u32, arg: usize) -> Option<Result<usize, isize>> {
        let answer = match command {
            0 => self.dup(fd, arg, false),
            1030 => self.dup(fd, arg, true),
            1 => self.fd(fd).map(|entry| usize::from(entry.cloexec)),
            2 => self.fd(fd).map(|entry| {
                self.fds[fd] = Some(Fd {
                    cloexec: arg & FD_CLOEXEC as usize != 0,
                    ..entry
                });
                0
            }),
            3 => self
                .description(fd)
                .map(|description| description.flags as usize),
            4 => self.description_mut(fd).map(|description| {
                let settable = u32::try_from(arg).unwrap_or(0) & SETTABLE;
                description.flags = (description.flags & !SETTABLE) | settable;
                0
            }),
            _ => return None,
        };
        Some(answer)
    }

    /// getdents64(2): as many `linux_dirent64` records as fit `buf`, from
    /// where the last call stopped; 0 at the end; `EINVAL` when not even
    /// one fits, `ENOTDIR` for a file.
    pub fn getdents(&mut self, fd: usize, buf: &mut [u8]) -> Result<usize, isize> {
        let description = self.description(fd)?;
        let Target::Node(dir) = description.target else {
            return Err(ENOTDIR);
        };
        let (mut listed, mut count) = (description.listed.clone(), description.offset);
        let mut used = 0;
        loop {
            let (name, ino, kind, next) = match &listed {
                Listed::Start => (b".".to_vec(), dir, Kind::Dir, Listed::Dot),
                Listed::Dot => (
                    b"..".to_vec(),
                    self.fs.parent_of(dir)?,
                    Kind::Dir,
                    Listed::DotDot,
                ),
                Listed::DotDot | Listed::After(_) => {
                    let after = match &listed {
                        Listed::After(name) => Some(name.as_slice()),
                        _ => None,
                    };
                    let Some((name, ino, kind)) =
                        self.fs.names_after(dir, after)?.into_iter().next()
                    else {
                        break;
                    };
                    let next = Listed::After(name.clone());
                    (name, ino, kind, next)
                }
            };
            let kind = if kind == Kind::Dir {
                layout::DT_DIR
            } else {
                layout::DT_REG
            };
            match layout::put_dirent(buf, used, ino as u64, count + 1, kind, &name) {
                Some(len) => used += len,
                None if used == 0 => return Err(layout::TOO_SMALL),
                None => break,
            }
            listed = next;
            count += 1;
        }
        let description = self.description_mut(fd)?;
        description.listed = listed;
        description.offset = count;
        Ok(used)
    }

    /// Where a listing of `dir` stands after its first `count` entries
    /// (lseek(2) of a directory to a `d_off` getdents64 gave).
    fn listed_after(&self, dir: Ino, count: u64) -> Result<Listed, isize> {
        Ok(match count {
            0 => Listed::Start,
            1 => Listed::Dot,
            2 => Listed::DotDot,
            n => {
                let index = usize::try_from(n - 3).map_err(|_| EINVAL)?;
                let names = self.fs.names_after(dir, None)?;
                let (name, _, _) = names.get(index).ok_or(EINVAL)?;
                Listed::After(name.clone())
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(files: &mut Files, path: &str, flags: u32) -> Result<usize, isize> {
        files.open(AT_FDCWD, path.as_bytes(), flags, 0o644)
    }

    #[test]
    fn the_streams_are_the_first_descriptors_and_new_ones_the_lowest_free() {
        let mut files = Files::new();
        assert_eq!(files.target(1), Ok(Target::Stream(1)));
        let fd = open(&mut files, "/tmp/f", O_CREAT | O_RDWR).unwrap();
        assert_eq!(fd, 3);
        files.close(0).unwrap();
        assert_eq!(open(&mut files, "/tmp/f", O_RDONLY), Ok(0));
        assert_eq!(files.close(7), Err(EBADF));
    }

    #[test]
    fn the_umask_takes_bits_off_new_files_and_directories() {
        let mut files = Files::new();
        assert_eq!(files.umask(0o077), UMASK);
        open(&mut files, "/tmp/private", O_CREAT | O_RDWR).unwrap();
        files.mkdir(AT_FDCWD, b"/tmp/dir", 0o777).unwrap();
        let mode =
            |files: &Files, path: &str| files.stat(AT_FDCWD, path.as_bytes()).unwrap().mode & 0o777;
        assert_eq!(mode(&files, "/tmp/private"), 0o600);
        assert_eq!(mode(&files, "/tmp/dir"), 0o700);
        assert_eq!(files.umask(0o7022), 0o077, "the old mask");
        assert_eq!(files.umask(0), 0o022, "permission bits only");
    }

    #[test]
    fn dups_share_the_offset_and_not_close_on_exec() {
        let mut files = Files::new();
        let fd = open(&mut files, "/tmp/f", O_CREAT | O_RDWR | O_CLOEXEC).unwrap();
        files.write(fd, b"hello").unwrap();
        let copy = files.dup(fd, 0, false).unwrap();
        assert_eq!(files.lseek(copy, 1, 0), Ok(1));
        assert_eq!(files.lseek(fd, 0, 1), Ok(1));
        assert_eq!(files.fcntl(fd, 1, 0), Some(Ok(1)));
        assert_eq!(files.fcntl(copy, 1, 0), Some(Ok(0)));
        assert_eq!(files.dup2(fd, 100), Ok(100));
        assert_eq!(files.dup3(fd, fd, 0), Err(EINVAL));
        files.close(fd).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(files.read(copy, &mut buf), Ok(4));
        assert_eq!(&buf, b"ello");
    }

    #[test]
    fn access_modes_and_kinds_give_linux_errors() {
        let mut files = Files::new();
        let fd = open(&mut files, "/tmp/f", O_CREAT | O_WRONLY).unwrap();
        assert_eq!(files.read(fd, &mut [0; 1]), Err(EBADF));
        assert_eq!(open(&mut files, "/tmp", O_WRONLY), Err(EISDIR));
        assert_eq!(open(&mut files, "/tmp/f/x", O_RDONLY), Err(ENOTDIR));
        assert_eq!(
            open(&mut files, "/tmp/f", O_CREAT | O_EXCL | O_RDWR),
            Err(EEXIST)
        );
        assert_eq!(open(&mut files, "/tmp/missing", O_RDONLY), Err(ENOENT));
        assert_eq!(files.lseek(fd, -1, 0), Err(EINVAL));
        assert_eq!(files.lseek(1, 0, 0), Err(ESPIPE));
        assert_eq!(files.ftruncate(0, 1), Err(EINVAL));
    }

    #[test]
    fn append_writes_at_the_end_and_truncate_zero_fills() {
        let mut files = Files::new();
        let fd = open(&mut files, "/tmp/f", O_CREAT | O_RDWR).unwrap();
        files.write(fd, b"abc").unwrap();
        files.ftruncate(fd, 6).unwrap();
        assert_eq!(files.fcntl(fd, 4, O_APPEND as usize), Some(Ok(0)));
        files.lseek(fd, 0, 0).unwrap();
        files.write(fd, b"Z").unwrap();
        assert_eq!(files.lseek(fd, 0, 1), Ok(7));
        let mut buf = [9u8; 7];
        assert_eq!(files.pread(fd, &mut buf, 0), Ok(7));
        assert_eq!(&buf, b"abc\0\0\0Z");
    }

    #[test]
    fn a_listing_survives_unlinks_between_calls() {
        let mut files = Files::new();
        for i in 0..20 {
            let fd = open(
                &mut files,
                &alloc::format!("/tmp/f{i:02}"),
                O_CREAT | O_WRONLY,
            )
            .unwrap();
            files.close(fd).unwrap();
        }
        let dir = open(&mut files, "/tmp", O_RDONLY | O_DIRECTORY).unwrap();
        let mut removed = 0;
        // Small reads, unlinking what each returned, as rm -r does.
        loop {
            let mut buf = [0u8; 80];
            let used = files.getdents(dir, &mut buf).unwrap();
            if used == 0 {
                break;
            }
            let mut at = 0;
            while at < used {
                let len = usize::from(u16::from_le_bytes([buf[at + 16], buf[at + 17]]));
                let name: Vec<u8> = buf[at + 19..at + len]
                    .iter()
                    .copied()
                    .take_while(|&b| b != 0)
                    .collect();
                if name != b"." && name != b".." {
                    let path = [&b"/tmp/"[..], &name].concat();
                    files.unlink(AT_FDCWD, &path, 0).unwrap();
                    removed += 1;
                }
                at += len;
            }
        }
        assert_eq!(removed, 20);
        files.lseek(dir, 0, 0).unwrap();
        assert_eq!(
            files.getdents(dir, &mut [0u8; 256]),
            Ok(48),
            "only . and .. left"
        );
    }

    #[test]
    fn the_working_directory_stays_itself_when_removed() {
        let mut files = Files::new();
        files.mkdir(AT_FDCWD, b"/tmp/a", 0o755).unwrap();
        files.chdir(b"/tmp/a").unwrap();
        assert_eq!(files.unlink(AT_FDCWD, b".", AT_REMOVEDIR), Err(EINVAL));
        files.unlink(AT_FDCWD, b"/tmp/a", AT_REMOVEDIR).unwrap();
        files.mkdir(AT_FDCWD, b"/tmp/b", 0o755).unwrap();
        assert_eq!(files.getcwd(&mut [0u8; 64]), Err(ENOENT));
        assert_eq!(open(&mut files, "x", O_CREAT | O_WRONLY), Err(ENOENT));
    }

    #[test]
    fn slashes_flags_and_modes_as_linux() {
        let mut files = Files::new();
        let fd = open(&mut files, "/tmp/f", O_CREAT | O_WRONLY).unwrap();
        assert_eq!(files.fstat(fd).unwrap().mode, S_IFREG | 0o644, "umask 022");
        assert_eq!(files.unlink(AT_FDCWD, b"/tmp/f/", 0), Err(ENOTDIR));
        assert_eq!(
            files.rename(AT_FDCWD, b"/tmp/f", AT_FDCWD, b"/tmp/g/"),
            Err(ENOTDIR)
        );
        assert_eq!(
            open(&mut files, "/tmp/n", O_CREAT | O_DIRECTORY),
            Err(EINVAL)
        );
        assert_eq!(
            files.access(AT_FDCWD, b"/tmp/n"),
            Err(ENOENT),
            "nothing created"
        );
        assert_eq!(open(&mut files, "/tmp", O_RDONLY | O_TRUNC), Err(EISDIR));
        assert_eq!(files.ftruncate(77, 0), Err(EBADF));
        let (console, tree) = (files.fstat(1).unwrap(), files.fstat(fd).unwrap());
        assert_ne!(console.dev, tree.dev);
    }

    #[test]
    fn directories_list_rename_and_change() {
        let mut files = Files::new();
        files.chdir(b"/tmp").unwrap();
        files.mkdir(AT_FDCWD, b"d", 0o755).unwrap();
        let fd = open(&mut files, "d/f", O_CREAT | O_RDWR).unwrap();
        files.close(fd).unwrap();
        files.rename(AT_FDCWD, b"d/f", AT_FDCWD, b"d/g").unwrap();
        let dir = open(&mut files, "d", O_RDONLY | O_DIRECTORY).unwrap();
        let mut buf = [0u8; 256];
        let used = files.getdents(dir, &mut buf).unwrap();
        assert_eq!(used, 24 + 24 + 24);
        assert_eq!(files.getdents(dir, &mut buf), Ok(0));
        assert_eq!(files.getdents(dir, &mut [0u8; 8]), Ok(0));
        files.lseek(dir, 0, 0).unwrap();
        assert_eq!(files.getdents(dir, &mut [0u8; 8]), Err(EINVAL));
        let mut cwd = [0u8; 16];
        assert_eq!(files.getcwd(&mut cwd), Ok(5));
        assert_eq!(&cwd[..5], b"/tmp\0");
        assert_eq!(files.getcwd(&mut [0u8; 3]), Err(ERANGE));
        assert_eq!(
            files.unlink(AT_FDCWD, b"d", AT_REMOVEDIR),
            Err(ebb_posix::errno::ENOTEMPTY)
        );
        files.unlink(AT_FDCWD, b"d/g", 0).unwrap();
        files.unlink(AT_FDCWD, b"d", AT_REMOVEDIR).unwrap();
        assert_eq!(files.chdir(b"d"), Err(ENOENT));
    }

    #[test]
    fn an_object_is_released_when_its_last_descriptor_closes() {
        let mut files = Files::new();
        let fd = files
            .open_object(7, ObjectKind::Socket, O_RDWR | O_NONBLOCK | O_CLOEXEC)
            .unwrap();
        assert_eq!(fd, 3);
        assert_eq!(files.status_flags(fd), Ok(O_RDWR | O_NONBLOCK));
        assert_eq!(files.fcntl(fd, 1, 0), Some(Ok(1)));
        assert_eq!(files.fstat(fd).unwrap().mode, S_IFSOCK | 0o777);
        assert_eq!(files.lseek(fd, 0, 0), Err(ESPIPE));
        let copy = files.dup(fd, 0, false).unwrap();
        files.close(fd).unwrap();
        assert!(files.take_released().is_empty());
        // dup2 over the last descriptor releases it, as close does.
        files.dup2(1, copy).unwrap();
        assert_eq!(files.take_released(), alloc::vec![7]);
        assert!(files.take_released().is_empty());
    }

    #[test]
    fn o_nonblock_is_a_status_flag_fcntl_sets() {
        let mut files = Files::new();
        let fd = files.open_object(1, ObjectKind::Pipe, O_RDONLY).unwrap();
        assert_eq!(files.fcntl(fd, 4, O_NONBLOCK as usize), Some(Ok(0)));
        assert_eq!(files.status_flags(fd), Ok(O_NONBLOCK));
        assert_eq!(files.fcntl(fd, 4, 0), Some(Ok(0)));
        assert_eq!(files.status_flags(fd), Ok(O_RDONLY));
    }

    #[test]
    fn has_free_says_whether_one_more_descriptor_fits() {
        let mut files = Files::new();
        assert!(files.has_free());
        // 0, 1 and 2 are the standard streams.
        for fd in 3..MAX_FDS {
            assert_eq!(files.open_object(1, ObjectKind::Pipe, O_RDONLY), Ok(fd));
        }
        assert!(!files.has_free());
        assert_eq!(
            files.open_object(2, ObjectKind::Pipe, O_RDONLY),
            Err(EMFILE)
        );
        files.close(40).unwrap();
        assert!(files.has_free());
    }
}
