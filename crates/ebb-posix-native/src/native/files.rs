//! The files group natively: the program's descriptors and the in-memory
//! file system (`ebb_posix_files`), one table for the program. A
//! descriptor of a standard stream does its I/O on the console
//! (`console.rs`); every other one on the tree. Paths and buffers are
//! read out of the program's memory here (`user.rs`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use ebb_boot_abi::{PACKED_FILES_MAX, PACKED_FILES_NAME};

use ebb_posix::errno::{EBADF, EFAULT, EINVAL, ENAMETOOLONG};
use ebb_posix_files::archive::{self, Loaded};
use ebb_posix_files::layout::stat_bytes;
use ebb_posix_files::path::PATH_MAX;
use ebb_posix_files::table::{Files, Target};
use spin::Mutex;

use ebb_posix_objects::calls::{blocking, io, Host, Named};

use super::console;
use super::objects::{self, NativeHost};
use super::user::{self, MAX_RW_COUNT};

/// The program's files: the standard streams and an empty `/tmp`.
static FILES: Mutex<Option<Files>> = Mutex::new(None);

/// Sets the table up (once, before the program starts).
pub fn init() {
    let mut files = FILES.lock();
    if files.is_none() {
        *files = Some(Files::new());
    }
}

/// Loads the files the launcher packed (`./ebb run ... --native --files
/// DIR`) into the tree under `/`: what it loaded, `None` when there are
/// none, or a sentence saying why they could not be loaded.
pub fn load_packed() -> Result<Option<Loaded>, String> {
    let limit = u32::try_from(PACKED_FILES_MAX).unwrap_or(u32::MAX);
    let pack = ebb_native::drivers::fw_cfg::read_file(PACKED_FILES_NAME, limit)
        .map_err(|error| format!("the packed files: {error}"))?;
    let Some(pack) = pack else {
        return Ok(None);
    };
    let mut files = FILES.lock();
    let files = files
        .as_mut()
        .ok_or("the file table is not set up before the packed files")?;
    archive::load(files.fs_mut(), &pack)
        .map(Some)
        .map_err(|error| format!("{error}"))
}

pub(super) fn with<T>(work: impl FnOnce(&mut Files) -> Result<T, isize>) -> Result<T, isize> {
    match FILES.lock().as_mut() {
        Some(files) => work(files),
        None => Err(EFAULT),
    }
}

fn answer(result: Result<usize, isize>) -> isize {
    match result {
        Ok(value) => isize::try_from(value).unwrap_or(isize::MAX),
        Err(errno) => -errno,
    }
}

/// A descriptor argument as `*at` calls take it: an `int`, so
/// `AT_FDCWD` (-100) arrives sign-extended or not.
fn dirfd(raw: usize) -> i64 {
    i64::from(i32::from_ne_bytes(
        raw.to_ne_bytes()[..4].try_into().unwrap_or([0; 4]),
    ))
}

/// A 64-bit signed argument (offsets, lengths).
fn signed(raw: usize) -> i64 {
    i64::from_ne_bytes(raw.to_ne_bytes())
}

/// A NUL-terminated path in the program's memory (`ENAMETOOLONG` past
/// PATH_MAX, as Linux).
fn path(addr: usize) -> Result<Vec<u8>, isize> {
    if addr == 0 {
        return Err(EFAULT);
    }
    let mut bytes = Vec::new();
    for at in addr.. {
        let byte: u8 = user::get(at)?;
        if byte == 0 {
            return Ok(bytes);
        }
        if bytes.len() + 1 >= PATH_MAX {
            return Err(ENAMETOOLONG);
        }
        bytes.push(byte);
    }
    Err(EFAULT)
}

fn flags(raw: usize) -> u32 {
    u32::try_from(raw & 0xffff_ffff).unwrap_or(0)
}

/// openat(2) (open(2) is `openat(AT_FDCWD, ...)`).
pub fn open(dir: usize, addr: usize, open_flags: usize, mode: usize) -> isize {
    answer(
        path(addr)
            .and_then(|p| with(|files| files.open(dirfd(dir), &p, flags(open_flags), flags(mode)))),
    )
}

/// umask(2): the old mask.
pub fn umask(mask: usize) -> isize {
    // The permission bits (0o777) fit in u32 whatever `mask` holds.
    let mask = u32::try_from(mask & 0o777).unwrap_or(0);
    answer(with(|files| Ok(files.umask(mask) as usize)))
}

/// close(2): an object whose last descriptor this was is released.
pub fn close(fd: usize) -> isize {
    let closed = with(|files| files.close(fd).map(|()| 0));
    objects::release_closed();
    answer(closed)
}

fn target(fd: usize) -> Result<Target, isize> {
    with(|files| files.target(fd))
}

/// read(2).
pub fn read(fd: usize, addr: usize, len: usize) -> isize {
    read_one(fd, addr, len, true)
}

/// write(2).
pub fn write(fd: usize, addr: usize, len: usize) -> isize {
    write_one(fd, addr, len, true)
}

/// An object's descriptor, non-blocking as well when `may_block` is not.
fn named_object(fd: usize, may_block: bool) -> Result<Named, isize> {
    let mut named = NativeHost.named(fd, EBADF)?;
    named.nonblocking |= !may_block;
    Ok(named)
}

/// One read; on an object that would block, it waits only if
/// `may_block` (readv(2)'s later buffers take what is there).
fn read_one(fd: usize, addr: usize, len: usize, may_block: bool) -> isize {
    answer(target(fd).and_then(|target| match target {
        Target::Stream(stream) => console::read(stream),
        Target::Node(_) => {
            let buf = user::bytes_mut(addr, len.min(MAX_RW_COUNT))?;
            with(|files| files.read(fd, buf))
        }
        Target::Object { .. } => {
            let buf = user::bytes_mut(addr, len.min(MAX_RW_COUNT))?;
            blocking::read(&NativeHost, &named_object(fd, may_block)?, buf)
        }
    }))
}

/// One write; on an object that would block, it waits only if
/// `may_block`.
fn write_one(fd: usize, addr: usize, len: usize, may_block: bool) -> isize {
    answer(target(fd).and_then(|target| {
        let bytes = user::bytes(addr, len.min(MAX_RW_COUNT))?;
        match target {
            Target::Stream(stream) => console::write(stream, bytes),
            Target::Node(_) => with(|files| files.write(fd, bytes)),
            Target::Object { .. } => {
                blocking::write(&NativeHost, &named_object(fd, may_block)?, bytes)
            }
        }
    }))
}

/// readv(2) and writev(2) on `fd`: `one` on each buffer in turn
/// (`ebb_posix_objects::calls::io::vectored`).
fn vectored(
    fd: usize,
    iov: usize,
    count: usize,
    one: fn(usize, usize, usize, bool) -> isize,
    waits_for_all: bool,
) -> isize {
    io::vectored(
        &NativeHost,
        iov,
        count,
        |base, len, may_block| one(fd, base, len, may_block),
        waits_for_all,
    )
}

/// readv(2).
pub fn readv(fd: usize, iov: usize, count: usize) -> isize {
    vectored(fd, iov, count, read_one, false)
}

/// writev(2).
pub fn writev(fd: usize, iov: usize, count: usize) -> isize {
    vectored(fd, iov, count, write_one, true)
}

/// pread64(2).
pub fn pread(fd: usize, addr: usize, len: usize, offset: usize) -> isize {
    answer(
        user::bytes_mut(addr, len.min(MAX_RW_COUNT))
            .and_then(|buf| with(|files| files.pread(fd, buf, signed(offset)))),
    )
}

/// pwrite64(2).
pub fn pwrite(fd: usize, addr: usize, len: usize, offset: usize) -> isize {
    answer(
        user::bytes(addr, len.min(MAX_RW_COUNT))
            .and_then(|bytes| with(|files| files.pwrite(fd, bytes, signed(offset)))),
    )
}

/// lseek(2).
pub fn lseek(fd: usize, offset: usize, whence: usize) -> isize {
    let result = with(|files| files.lseek(fd, signed(offset), flags(whence)));
    answer(result.map(|position| usize::try_from(position).unwrap_or(usize::MAX)))
}

/// ioctl(2): no descriptor is a terminal.
pub fn ioctl(fd: usize) -> isize {
    answer(target(fd).and(Err(ebb_posix::errno::ENOTTY)))
}

/// fstat(2).
pub fn fstat(fd: usize, out: usize) -> isize {
    answer(
        with(|files| files.fstat(fd))
            .and_then(|fields| user::put(out, stat_bytes(&fields)).map(|()| 0)),
    )
}

/// stat(2), lstat(2), newfstatat(2) (`AT_EMPTY_PATH`, 0x1000, with an
/// empty path: the descriptor itself).
pub fn stat_at(dir: usize, addr: usize, out: usize, at_flags: usize) -> isize {
    let result = path(addr).and_then(|p| {
        if p.is_empty() && flags(at_flags) & 0x1000 != 0 {
            // AT_EMPTY_PATH: the descriptor itself, or the working
            // directory for AT_FDCWD.
            match usize::try_from(dirfd(dir)) {
                Ok(fd) => with(|files| files.fstat(fd)),
                Err(_) => with(|files| files.stat(dirfd(dir), b".")),
            }
        } else {
            with(|files| files.stat(dirfd(dir), &p))
        }
    });
    answer(result.and_then(|fields| user::put(out, stat_bytes(&fields)).map(|()| 0)))
}

/// access(2), faccessat(2).
pub fn access(dir: usize, addr: usize) -> isize {
    answer(path(addr).and_then(|p| with(|files| files.access(dirfd(dir), &p).map(|()| 0))))
}

/// ftruncate(2).
pub fn ftruncate(fd: usize, len: usize) -> isize {
    answer(with(|files| files.ftruncate(fd, signed(len)).map(|()| 0)))
}

/// fsync(2), fdatasync(2).
pub fn fsync(fd: usize) -> isize {
    answer(with(|files| files.fsync(fd).map(|()| 0)))
}

/// fchown(2), fchmod(2).
pub fn fchange(fd: usize) -> isize {
    answer(with(|files| files.fchange(fd).map(|()| 0)))
}

/// mkdirat(2).
pub fn mkdir(dir: usize, addr: usize, mode: usize) -> isize {
    answer(
        path(addr).and_then(|p| with(|files| files.mkdir(dirfd(dir), &p, flags(mode)).map(|()| 0))),
    )
}

/// unlinkat(2) (unlink(2), rmdir(2)).
pub fn unlink(dir: usize, addr: usize, at_flags: usize) -> isize {
    answer(
        path(addr)
            .and_then(|p| with(|files| files.unlink(dirfd(dir), &p, flags(at_flags)).map(|()| 0))),
    )
}

/// renameat(2).
pub fn rename(from_dir: usize, from: usize, to_dir: usize, to: usize) -> isize {
    answer(path(from).and_then(|from| {
        let to = path(to)?;
        with(|files| {
            files
                .rename(dirfd(from_dir), &from, dirfd(to_dir), &to)
                .map(|()| 0)
        })
    }))
}

/// getdents64(2).
pub fn getdents(fd: usize, addr: usize, len: usize) -> isize {
    answer(user::bytes_mut(addr, len).and_then(|buf| with(|files| files.getdents(fd, buf))))
}

/// getcwd(2).
pub fn getcwd(addr: usize, len: usize) -> isize {
    answer(user::bytes_mut(addr, len).and_then(|buf| with(|files| files.getcwd(buf))))
}

/// chdir(2).
pub fn chdir(addr: usize) -> isize {
    answer(path(addr).and_then(|p| with(|files| files.chdir(&p).map(|()| 0))))
}

/// dup(2).
pub fn dup(fd: usize) -> isize {
    answer(with(|files| files.dup(fd, 0, false)))
}

/// dup2(2): an object whose last descriptor was `new` is released.
pub fn dup2(old: usize, new: usize) -> isize {
    let placed = with(|files| files.dup2(old, new));
    objects::release_closed();
    answer(placed)
}

/// dup3(2), as dup2.
pub fn dup3(old: usize, new: usize, dup_flags: usize) -> isize {
    let placed = with(|files| files.dup3(old, new, flags(dup_flags)));
    objects::release_closed();
    answer(placed)
}

/// fcntl(2): the table's commands; record locks (`F_GETLK` 5,
/// `F_SETLK` 6, `F_SETLKW` 7) always succeed, since the program is the
/// only process (`F_GETLK` says `F_UNLCK`, 2, in `l_type`).
pub fn fcntl(fd: usize, command: usize, arg: usize) -> isize {
    let command = flags(command);
    if let Some(result) = with(|files| Ok(files.fcntl(fd, command, arg)))
        .ok()
        .flatten()
    {
        return answer(result);
    }
    answer(target(fd).and_then(|_| match command {
        5 => user::put(arg, 2i16).map(|()| 0),
        6 | 7 => Ok(0),
        _ => Err(EINVAL),
    }))
}
