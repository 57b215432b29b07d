//! An in-memory file system: a tree of directories and regular files,
//! their bytes in memory. What Linux's semantics ask that programs rely
//! on is kept (rename(2), unlink(2), rmdir(2), open(2)'s errors): an
//! unlinked file stays readable through its open descriptors until the
//! last is closed; renaming over a file replaces it at once; a directory
//! goes only when empty and cannot move under itself; writing past the
//! end fills the gap with zeros.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use ebb_posix::errno::{EBUSY, EEXIST, EFBIG, EINVAL, EISDIR, ENOENT, ENOTDIR, ENOTEMPTY};

/// An inode number; the root directory is [`ROOT`].
pub type Ino = usize;

/// The root directory.
pub const ROOT: Ino = 1;

/// The largest file: what `off_t` and memory allow here (1 GiB keeps a
/// runaway program from exhausting the image).
pub const MAX_FILE: u64 = 1 << 30;

/// What an inode is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

#[derive(Debug)]
enum Body {
    File(Vec<u8>),
    Dir(BTreeMap<Vec<u8>, Ino>),
}

#[derive(Debug)]
struct Inode {
    body: Body,
    mode: u32,
    /// Names that refer to it (a directory: 1 while it has a parent).
    links: u32,
    /// Open descriptions that refer to it.
    opened: u32,
    /// A directory's parent.
    parent: Ino,
}

/// What stat(2) tells of an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Its number.
    pub ino: Ino,
    /// Its kind.
    pub kind: Kind,
    /// Its permission bits.
    pub mode: u32,
    /// Its size in bytes (a directory: 4096, as ext4 shows one).
    pub size: u64,
    /// Its link count.
    pub links: u32,
}

/// The tree. Inode numbers are never reused: a working directory or an
/// open description that still names a removed inode must not come to
/// name a new one.
#[derive(Debug)]
pub struct MemFs {
    inodes: BTreeMap<Ino, Inode>,
    next: Ino,
}

impl Default for MemFs {
    fn default() -> Self {
        MemFs::new()
    }
}

impl MemFs {
    /// An empty root directory.
    #[must_use]
    pub fn new() -> MemFs {
        let root = Inode {
            body: Body::Dir(BTreeMap::new()),
            mode: 0o755,
            links: 1,
            opened: 0,
            parent: ROOT,
        };
        MemFs {
            inodes: BTreeMap::from([(ROOT, root)]),
            next: ROOT + 1,
        }
    }

    fn inode(&self, ino: Ino) -> Result<&Inode, isize> {
        self.inodes.get(&ino).ok_or(ENOENT)
    }

    fn inode_mut(&mut self, ino: Ino) -> Result<&mut Inode, isize> {
        self.inodes.get_mut(&ino).ok_or(ENOENT)
    }

    fn entries(&self, dir: Ino) -> Result<&BTreeMap<Vec<u8>, Ino>, isize> {
        match &self.inode(dir)?.body {
            Body::Dir(entries) => Ok(entries),
            Body::File(_) => Err(ENOTDIR),
        }
    }

    fn entries_mut(&mut self, dir: Ino) -> Result<&mut BTreeMap<Vec<u8>, Ino>, isize> {
        match &mut self.inode_mut(dir)?.body {
            Body::Dir(entries) => Ok(entries),
            Body::File(_) => Err(ENOTDIR),
        }
    }

    /// The inode `parts` names from the root: `ENOENT` when a name is
    /// missing, `ENOTDIR` when a component before the last is a file.
    pub fn lookup(&self, parts: &[&[u8]]) -> Result<Ino, isize> {
        let mut at = ROOT;
        for part in parts {
            at = *self.entries(at)?.get(*part).ok_or(ENOENT)?;
        }
        Ok(at)
    }

    /// The inode `name` names in directory `dir`.
    pub fn lookup_in(&self, dir: Ino, name: &[u8]) -> Result<Ino, isize> {
        self.entries(dir)?.get(name).copied().ok_or(ENOENT)
    }

    /// The directory holding the last of `parts`, and that name (`EBUSY`
    /// for the root itself, which has no name to change).
    pub fn parent<'p>(&self, parts: &[&'p [u8]]) -> Result<(Ino, &'p [u8]), isize> {
        let (last, dirs) = parts.split_last().ok_or(EBUSY)?;
        let dir = self.lookup(dirs)?;
        self.entries(dir)?;
        Ok((dir, last))
    }

    /// The kind of `ino`.
    pub fn kind(&self, ino: Ino) -> Result<Kind, isize> {
        Ok(match self.inode(ino)?.body {
            Body::File(_) => Kind::File,
            Body::Dir(_) => Kind::Dir,
        })
    }

    /// stat(2) of `ino`.
    pub fn stat(&self, ino: Ino) -> Result<Stat, isize> {
        let inode = self.inode(ino)?;
        let (kind, size) = match &inode.body {
            Body::File(data) => (Kind::File, data.len() as u64),
            Body::Dir(_) => (Kind::Dir, 4096),
        };
        Ok(Stat {
            ino,
            kind,
            mode: inode.mode,
            size,
            links: inode.links,
        })
    }

    fn add(&mut self, dir: Ino, name: &[u8], body: Body, mode: u32) -> Result<Ino, isize> {
        if self.entries(dir)?.contains_key(name) {
            return Err(EEXIST);
        }
        let inode = Inode {
            body,
            mode: mode & 0o7777,
            links: 1,
            opened: 0,
            parent: dir,
        };
        let ino = self.next;
        self.next += 1;
        self.inodes.insert(ino, inode);
        self.entries_mut(dir)?.insert(name.to_vec(), ino);
        Ok(ino)
    }

    /// Creates the empty file `name` in `dir` (`EEXIST` if taken).
    pub fn create(&mut self, dir: Ino, name: &[u8], mode: u32) -> Result<Ino, isize> {
        self.add(dir, name, Body::File(Vec::new()), mode)
    }

    /// mkdir(2) of `name` in `dir`.
    pub fn mkdir(&mut self, dir: Ino, name: &[u8], mode: u32) -> Result<Ino, isize> {
        self.add(dir, name, Body::Dir(BTreeMap::new()), mode)
    }

    /// Frees `ino` if no name and no open description refers to it.
    fn release_if_unused(&mut self, ino: Ino) {
        if let Ok(inode) = self.inode(ino) {
            if inode.links == 0 && inode.opened == 0 {
                self.inodes.remove(&ino);
            }
        }
    }

    /// unlink(2) of `name` in `dir`: `EISDIR` for a directory (Linux's
    /// answer), `ENOENT` if missing.
    pub fn unlink(&mut self, dir: Ino, name: &[u8]) -> Result<(), isize> {
        let ino = *self.entries(dir)?.get(name).ok_or(ENOENT)?;
        if self.kind(ino)? == Kind::Dir {
            return Err(EISDIR);
        }
        self.entries_mut(dir)?.remove(name);
        self.inode_mut(ino)?.links -= 1;
        self.release_if_unused(ino);
        Ok(())
    }

    /// rmdir(2) of `name` in `dir`: `ENOTDIR` for a file, `ENOTEMPTY`
    /// unless empty.
    pub fn rmdir(&mut self, dir: Ino, name: &[u8]) -> Result<(), isize> {
        if name == b"." {
            return Err(EINVAL);
        }
        let ino = *self.entries(dir)?.get(name).ok_or(ENOENT)?;
        if !self.entries(ino)?.is_empty() {
            return Err(ENOTEMPTY);
        }
        self.entries_mut(dir)?.remove(name);
        self.inode_mut(ino)?.links = 0;
        self.release_if_unused(ino);
        Ok(())
    }

    /// Whether `ancestor` is `ino` or above it.
    fn is_at_or_above(&self, ancestor: Ino, mut ino: Ino) -> bool {
        loop {
            if ino == ancestor {
                return true;
            }
            let Ok(inode) = self.inode(ino) else {
                return false;
            };
            if ino == ROOT || inode.parent == ino {
                return false;
            }
            ino = inode.parent;
        }
    }

    /// rename(2) of `from` in `from_dir` to `to` in `to_dir`. A file
    /// replaces a file; a directory replaces an empty directory; a file
    /// over a directory is `EISDIR`, a directory over a file `ENOTDIR`;
    /// a directory into itself or below is `EINVAL`.
    pub fn rename(
        &mut self,
        from_dir: Ino,
        from: &[u8],
        to_dir: Ino,
        to: &[u8],
    ) -> Result<(), isize> {
        let ino = *self.entries(from_dir)?.get(from).ok_or(ENOENT)?;
        self.entries(to_dir)?;
        let moving_dir = self.kind(ino)? == Kind::Dir;
        if moving_dir && self.is_at_or_above(ino, to_dir) {
            return Err(EINVAL);
        }
        if let Some(&existing) = self.entries(to_dir)?.get(to) {
            if existing == ino {
                return Ok(());
            }
            match (moving_dir, self.kind(existing)?) {
                (false, Kind::Dir) => return Err(EISDIR),
                (true, Kind::File) => return Err(ENOTDIR),
                (true, Kind::Dir) if !self.entries(existing)?.is_empty() => return Err(ENOTEMPTY),
                _ => {}
            }
            self.entries_mut(to_dir)?.remove(to);
            self.inode_mut(existing)?.links = 0;
            self.release_if_unused(existing);
        }
        self.entries_mut(from_dir)?.remove(from);
        self.entries_mut(to_dir)?.insert(to.to_vec(), ino);
        if moving_dir {
            self.inode_mut(ino)?.parent = to_dir;
        }
        Ok(())
    }

    /// Counts an open description of `ino`.
    pub fn opened(&mut self, ino: Ino) -> Result<(), isize> {
        self.inode_mut(ino)?.opened += 1;
        Ok(())
    }

    /// The last close of a description of `ino`: an unlinked inode goes.
    pub fn closed(&mut self, ino: Ino) {
        if let Ok(inode) = self.inode_mut(ino) {
            inode.opened = inode.opened.saturating_sub(1);
        }
        self.release_if_unused(ino);
    }

    fn data(&self, ino: Ino) -> Result<&Vec<u8>, isize> {
        match &self.inode(ino)?.body {
            Body::File(data) => Ok(data),
            Body::Dir(_) => Err(EISDIR),
        }
    }

    fn data_mut(&mut self, ino: Ino) -> Result<&mut Vec<u8>, isize> {
        match &mut self.inode_mut(ino)?.body {
            Body::File(data) => Ok(data),
            Body::Dir(_) => Err(EISDIR),
        }
    }

    /// Reads into `buf` from `offset`: the bytes read (0 at or past the
    /// end).
    pub fn read_at(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize, isize> {
        let data = self.data(ino)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        let count = buf.len().min(data.len() - start);
        buf[..count].copy_from_slice(&data[start..start + count]);
        Ok(count)
    }

    /// Writes `bytes` at `offset`, zero-filling any gap: the bytes
    /// written (`EFBIG` past [`MAX_FILE`]).
    pub fn write_at(&mut self, ino: Ino, offset: u64, bytes: &[u8]) -> Result<usize, isize> {
        if bytes.is_empty() {
            // Nothing written, nothing grown (write(2) of 0 bytes).
            self.data(ino)?;
            return Ok(0);
        }
        let end = offset
            .checked_add(bytes.len() as u64)
            .filter(|&end| end <= MAX_FILE)
            .ok_or(EFBIG)?;
        let (start, end) = (
            usize::try_from(offset).map_err(|_| EFBIG)?,
            usize::try_from(end).map_err(|_| EFBIG)?,
        );
        let data = self.data_mut(ino)?;
        if data.len() < end {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(bytes);
        Ok(bytes.len())
    }

    /// The size of file `ino`.
    pub fn size(&self, ino: Ino) -> Result<u64, isize> {
        Ok(self.data(ino)?.len() as u64)
    }

    /// truncate(2) to `len`: shorter drops, longer reads as zeros.
    pub fn truncate(&mut self, ino: Ino, len: u64) -> Result<(), isize> {
        if len > MAX_FILE {
            return Err(EFBIG);
        }
        let len = usize::try_from(len).map_err(|_| EFBIG)?;
        self.data_mut(ino)?.resize(len, 0);
        Ok(())
    }

    /// Directory `dir`'s names after `after` (all of them for `None`), in
    /// byte order, each with its inode and kind: where a listing resumes,
    /// whatever was added or removed since (`table.rs`, getdents64).
    pub fn names_after(
        &self,
        dir: Ino,
        after: Option<&[u8]>,
    ) -> Result<Vec<(Vec<u8>, Ino, Kind)>, isize> {
        use core::ops::Bound;
        let entries = self.entries(dir)?;
        let start = match after {
            Some(name) => Bound::Excluded(name),
            None => Bound::Unbounded,
        };
        let mut names = Vec::new();
        for (name, &ino) in entries.range::<[u8], _>((start, Bound::Unbounded)) {
            names.push((name.clone(), ino, self.kind(ino)?));
        }
        Ok(names)
    }

    /// Directory `dir`'s parent (the root's is itself).
    pub fn parent_of(&self, dir: Ino) -> Result<Ino, isize> {
        self.entries(dir)?;
        Ok(self.inode(dir)?.parent)
    }

    /// Directory `dir`'s entries as getdents64(2) lists them: `.`, `..`,
    /// then the names in byte order, each with its inode and kind.
    pub fn list(&self, dir: Ino) -> Result<Vec<(Vec<u8>, Ino, Kind)>, isize> {
        let entries = self.entries(dir)?;
        let parent = self.inode(dir)?.parent;
        let mut listed = vec![
            (b".".to_vec(), dir, Kind::Dir),
            (b"..".to_vec(), parent, Kind::Dir),
        ];
        for (name, &ino) in entries {
            listed.push((name.clone(), ino, self.kind(ino)?));
        }
        Ok(listed)
    }

    /// The names from the root down to directory `dir` (for getcwd).
    pub fn path_of(&self, mut dir: Ino) -> Result<Vec<Vec<u8>>, isize> {
        let mut names = Vec::new();
        while dir != ROOT {
            let parent = self.inode(dir)?.parent;
            let name = self
                .entries(parent)?
                .iter()
                .find(|(_, &ino)| ino == dir)
                .map(|(name, _)| name.clone())
                .ok_or(ENOENT)?;
            names.push(name);
            dir = parent;
        }
        names.reverse();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fs_with(files: &[&[u8]]) -> MemFs {
        let mut fs = MemFs::new();
        for name in files {
            fs.create(ROOT, name, 0o644).unwrap();
        }
        fs
    }

    #[test]
    fn files_grow_with_zeros_and_truncate() {
        let mut fs = fs_with(&[b"f"]);
        let f = fs.lookup(&[b"f"]).unwrap();
        assert_eq!(fs.write_at(f, 1000, b""), Ok(0));
        assert_eq!(fs.size(f), Ok(0), "an empty write grows nothing");
        assert_eq!(fs.write_at(f, 4, b"ab").unwrap(), 2);
        let mut buf = [9u8; 8];
        assert_eq!(fs.read_at(f, 0, &mut buf).unwrap(), 6);
        assert_eq!(&buf[..6], b"\0\0\0\0ab");
        assert_eq!(fs.read_at(f, 100, &mut buf).unwrap(), 0);
        fs.truncate(f, 2).unwrap();
        assert_eq!(fs.size(f).unwrap(), 2);
        assert_eq!(fs.write_at(f, MAX_FILE, b"x"), Err(EFBIG));
        assert_eq!(fs.truncate(f, MAX_FILE + 1), Err(EFBIG));
    }

    #[test]
    fn lookups_say_which_error() {
        let mut fs = fs_with(&[b"f"]);
        fs.mkdir(ROOT, b"d", 0o755).unwrap();
        assert_eq!(fs.lookup(&[b"missing"]), Err(ENOENT));
        assert_eq!(fs.lookup(&[b"f", b"x"]), Err(ENOTDIR));
        assert_eq!(fs.create(ROOT, b"d", 0o644), Err(EEXIST));
        assert_eq!(fs.mkdir(ROOT, b"f", 0o755), Err(EEXIST));
        assert_eq!(fs.parent(&[]), Err(EBUSY));
        assert_eq!(fs.unlink(ROOT, b"d"), Err(EISDIR));
        assert_eq!(fs.rmdir(ROOT, b"f"), Err(ENOTDIR));
        let d = fs.lookup(&[b"d"]).unwrap();
        fs.create(d, b"g", 0o600).unwrap();
        assert_eq!(fs.rmdir(ROOT, b"d"), Err(ENOTEMPTY));
        assert_eq!(fs.read_at(d, 0, &mut [0; 1]), Err(EISDIR));
    }

    #[test]
    fn an_unlinked_open_file_lives_until_closed() {
        let mut fs = fs_with(&[b"f"]);
        let f = fs.lookup(&[b"f"]).unwrap();
        fs.opened(f).unwrap();
        fs.write_at(f, 0, b"kept").unwrap();
        fs.unlink(ROOT, b"f").unwrap();
        assert_eq!(fs.lookup(&[b"f"]), Err(ENOENT));
        let mut buf = [0u8; 4];
        assert_eq!(fs.read_at(f, 0, &mut buf).unwrap(), 4);
        fs.closed(f);
        assert_eq!(fs.stat(f), Err(ENOENT));
        // Its number is not given to the next file.
        let g = fs.create(ROOT, b"g", 0o644).unwrap();
        assert_ne!(g, f);
    }

    #[test]
    fn rename_replaces_and_refuses_as_linux_does() {
        let mut fs = fs_with(&[b"a", b"b"]);
        let a = fs.lookup(&[b"a"]).unwrap();
        fs.rename(ROOT, b"a", ROOT, b"b").unwrap();
        assert_eq!(fs.lookup(&[b"b"]).unwrap(), a);
        assert_eq!(fs.lookup(&[b"a"]), Err(ENOENT));
        fs.mkdir(ROOT, b"d", 0o755).unwrap();
        fs.mkdir(ROOT, b"e", 0o755).unwrap();
        let d = fs.lookup(&[b"d"]).unwrap();
        assert_eq!(fs.rename(ROOT, b"b", ROOT, b"d"), Err(EISDIR));
        assert_eq!(fs.rename(ROOT, b"d", ROOT, b"b"), Err(ENOTDIR));
        assert_eq!(fs.rename(ROOT, b"d", d, b"inside"), Err(EINVAL));
        fs.create(d, b"x", 0o644).unwrap();
        assert_eq!(fs.rename(ROOT, b"e", ROOT, b"d"), Err(ENOTEMPTY));
        fs.rename(ROOT, b"d", ROOT, b"e").unwrap();
        assert!(fs.lookup(&[b"e", b"x"]).is_ok());
        assert_eq!(
            fs.path_of(fs.lookup(&[b"e"]).unwrap()).unwrap(),
            [b"e".to_vec()]
        );
    }

    #[test]
    fn a_listing_has_dot_dotdot_and_the_names_in_order() {
        let mut fs = fs_with(&[b"b", b"a"]);
        fs.mkdir(ROOT, b"c", 0o755).unwrap();
        let names: Vec<Vec<u8>> = fs.list(ROOT).unwrap().into_iter().map(|e| e.0).collect();
        assert_eq!(names, [&b"."[..], b"..", b"a", b"b", b"c"]);
    }
}
