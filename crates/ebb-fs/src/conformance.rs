//! What every FileSystem backend must do, as one check each backend's
//! tests run against it: the in-memory file system in `ebb-posix-files`'
//! tests, the remote one (a hosted node sharing a directory) in
//! `ebb-offload-host`'s. A program written against [`FileSystem`] relies
//! on exactly this, whichever backend it is given.
//!
//! The semantics are Linux's (open(2), read(2), pwrite(2), rename(2),
//! unlink(2), path_resolution(7)), since the remote backend is Linux and
//! a C program's calls expect them, with one difference on purpose:
//! `open` takes regular files only, so a directory is `IsDir` even for
//! reading (a listing is `readdir`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use ebb_iobuf::{IoBuf, IoChain};

use crate::{ErrorKind, FileKind, FileSystem, FileSystemError, OpenFlags};

/// The output of `future`, which must finish at its first poll (a
/// backend that never waits, as the in-memory one): for tests that have
/// no event loop.
///
/// # Panics
///
/// If the future is not ready at once.
pub fn ready_now<T>(future: impl core::future::Future<Output = T>) -> T {
    use core::task::{Context, Poll, Waker};
    let mut future = core::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the future waited: it is not a backend that never waits"),
    }
}

/// A step where the backend did something else than the interface says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The step.
    pub step: &'static str,
    /// What happened instead.
    pub what: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.step, self.what)
    }
}

impl core::error::Error for Mismatch {}

/// The size of the large file the check writes and reads back: over two
/// of the remote backend's 512 KiB chunks, and not a multiple of one.
pub const LARGE: usize = 1_300_001;

/// Runs the check in directory `base` (made by the check, which must not
/// exist yet) of `fs`: every operation, its results and its errors.
/// Leaves `base` holding the directories it made.
///
/// # Errors
///
/// The first step whose result is not the interface's.
pub async fn check<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    directories(fs, base).await?;
    reads_and_writes(fs, base).await?;
    large_file(fs, base).await?;
    open_errors(fs, base).await?;
    append_and_truncate(fs, base).await?;
    names(fs, base).await?;
    unlinked_while_open(fs, base).await?;
    names_of_directories(fs, base).await?;
    Ok(())
}

async fn directories<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    ok("mkdir", fs.mkdir(base, 0o755).await)?;
    kind(
        "mkdir of an existing directory",
        fs.mkdir(base, 0o755).await,
        ErrorKind::Exists,
    )?;
    let stat = ok("stat of a directory", fs.stat(base).await)?;
    same("stat of a directory: kind", stat.kind, FileKind::Dir)?;
    ok("mkdir inside", fs.mkdir(&format!("{base}/d"), 0o755).await)?;
    let listing = ok("readdir of one directory", fs.readdir(base).await)?;
    let names: Vec<_> = listing.iter().map(|e| (e.name.as_str(), e.kind)).collect();
    same(
        "readdir of one directory",
        names,
        [("d", FileKind::Dir)].to_vec(),
    )
}

async fn reads_and_writes<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    let path = format!("{base}/f");
    let rw = OpenFlags::READ | OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUSIVE;
    let file = ok("exclusive create", fs.open(&path, rw, 0o640).await)?;
    let wrote = ok("pwrite", fs.pwrite(file, bytes(b"hello, world"), 0).await)?;
    same("pwrite: bytes written", wrote, 12)?;
    let piece = ok("pread", fs.pread(file, 5, 7).await)?;
    same("pread: bytes", piece.to_vec(), b"world".to_vec())?;
    let end = ok("pread at the end", fs.pread(file, 100, 12).await)?;
    same("pread at the end: bytes", end.len(), 0)?;
    // pwrite does not move the position, which starts at 0.
    let first = ok("read", fs.read(file, 5).await)?;
    same("read: bytes", first.to_vec(), b"hello".to_vec())?;
    let rest = ok("read to the end", fs.read(file, 100).await)?;
    same("read to the end: bytes", rest.to_vec(), b", world".to_vec())?;
    let wrote = ok("write at the position", fs.write(file, bytes(b"!")).await)?;
    same("write: bytes written", wrote, 1)?;
    ok(
        "pwrite past the end",
        fs.pwrite(file, bytes(b"z"), 20).await,
    )?;
    let all = ok("pread of a file with a gap", fs.pread(file, 64, 0).await)?;
    same(
        "a gap reads as zeros",
        all.to_vec(),
        b"hello, world!\0\0\0\0\0\0\0z".to_vec(),
    )?;
    let stat = ok("stat of a file", fs.stat(&path).await)?;
    same("stat of a file: kind", stat.kind, FileKind::File)?;
    same("stat of a file: size", stat.size, 21)?;
    // The owner's bits survive any usual umask (a remote backend's
    // process applies its own, as open(2) says).
    same("stat of a file: owner's bits", stat.mode & 0o700, 0o600)?;
    ok("close", fs.close(file).await)?;
    let reader = ok(
        "open to read only",
        fs.open(&path, OpenFlags::READ, 0).await,
    )?;
    kind(
        "write to a handle opened to read",
        fs.write(reader, bytes(b"x")).await,
        ErrorKind::BadHandle,
    )?;
    ok("close the reader", fs.close(reader).await)?;
    let writer = ok(
        "open to write only",
        fs.open(&path, OpenFlags::WRITE, 0).await,
    )?;
    kind(
        "read of a handle opened to write",
        fs.read(writer, 1).await,
        ErrorKind::BadHandle,
    )?;
    ok("close the writer", fs.close(writer).await)?;
    kind(
        "close of a closed handle",
        fs.close(file).await,
        ErrorKind::BadHandle,
    )?;
    kind(
        "read of a closed handle",
        fs.read(file, 1).await,
        ErrorKind::BadHandle,
    )
}

async fn large_file<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    let path = format!("{base}/large");
    let data: Vec<u8> = (0..LARGE)
        .map(|i| u8::try_from(i * 7 % 251).unwrap_or(0))
        .collect();
    // Several buffers, of uneven sizes, as a received chain would be.
    let mut chain = IoChain::new();
    for piece in data.chunks(100_003) {
        chain.push_back(IoBuf::from_vec(piece.to_vec()));
    }
    let flags = OpenFlags::READ | OpenFlags::WRITE | OpenFlags::CREATE;
    let file = ok("create the large file", fs.open(&path, flags, 0o600).await)?;
    let wrote = ok("pwrite of a large chain", fs.pwrite(file, chain, 0).await)?;
    same(
        "pwrite of a large chain: bytes written",
        wrote,
        LARGE as u64,
    )?;
    let back = ok(
        "pread of the large file",
        fs.pread(file, LARGE + 10, 0).await,
    )?;
    same("pread of the large file: length", back.len(), LARGE)?;
    if back.to_vec() != data {
        return Err(mismatch(
            "pread of the large file",
            "other bytes than were written",
        ));
    }
    ok("close the large file", fs.close(file).await)?;
    ok("unlink the large file", fs.unlink(&path).await)
}

async fn open_errors<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    let file = format!("{base}/f");
    let cases = [
        (
            "exclusive create of an existing file",
            file.clone(),
            OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::EXCLUSIVE,
            ErrorKind::Exists,
        ),
        (
            "open of a missing file",
            format!("{base}/missing"),
            OpenFlags::READ,
            ErrorKind::NotFound,
        ),
        (
            "open under a file",
            format!("{file}/x"),
            OpenFlags::READ,
            ErrorKind::NotDir,
        ),
        (
            "open of a file as a directory",
            format!("{file}/"),
            OpenFlags::READ,
            ErrorKind::NotDir,
        ),
        (
            "open of a directory",
            String::from(base),
            OpenFlags::READ,
            ErrorKind::IsDir,
        ),
        (
            "open of `..`",
            format!("{base}/../x"),
            OpenFlags::READ,
            ErrorKind::Escape,
        ),
        (
            "open of an absolute path",
            String::from("/x"),
            OpenFlags::READ,
            ErrorKind::Escape,
        ),
        (
            "open of an empty path",
            String::new(),
            OpenFlags::READ,
            ErrorKind::InvalidPath,
        ),
    ];
    for (step, path, flags, expected) in cases {
        kind(step, fs.open(&path, flags, 0o600).await, expected)?;
    }
    let set_user_id = OpenFlags::WRITE | OpenFlags::CREATE;
    kind(
        "a mode with the set-user-ID bit",
        fs.open(&format!("{base}/suid"), set_user_id, 0o4755).await,
        ErrorKind::InvalidArgument,
    )?;
    kind(
        "open with neither read nor write",
        fs.open(&format!("{base}/neither"), OpenFlags::CREATE, 0o600)
            .await,
        ErrorKind::InvalidArgument,
    )?;
    let long_name: String = core::iter::repeat_n('n', 256).collect();
    kind(
        "a name over 255 bytes",
        fs.open(&format!("{base}/{long_name}"), OpenFlags::READ, 0)
            .await,
        ErrorKind::NameTooLong,
    )?;
    kind(
        "stat of a file as a directory",
        fs.stat(&format!("{file}/")).await,
        ErrorKind::NotDir,
    )?;
    kind(
        "stat of a missing path",
        fs.stat(&format!("{base}/missing")).await,
        ErrorKind::NotFound,
    )
}

async fn append_and_truncate<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    let path = format!("{base}/log");
    let append = OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::APPEND;
    let log = ok("open to append", fs.open(&path, append, 0o600).await)?;
    ok("append", fs.write(log, bytes(b"one\n")).await)?;
    ok("append again", fs.write(log, bytes(b"two\n")).await)?;
    // pwrite(2), BUGS: on Linux, a file opened to append takes a pwrite
    // at its end too, whatever the offset.
    ok(
        "pwrite to a file opened to append",
        fs.pwrite(log, bytes(b"3\n"), 0).await,
    )?;
    ok("close the log", fs.close(log).await)?;
    let reader = ok("open to read", fs.open(&path, OpenFlags::READ, 0).await)?;
    let text = ok("read the log", fs.read(reader, 100).await)?;
    same(
        "appends go to the end",
        text.to_vec(),
        b"one\ntwo\n3\n".to_vec(),
    )?;
    ok("close the reader", fs.close(reader).await)?;
    let cut = ok(
        "open to truncate",
        fs.open(&path, OpenFlags::WRITE | OpenFlags::TRUNCATE, 0)
            .await,
    )?;
    ok("close the truncated file", fs.close(cut).await)?;
    let stat = ok("stat of the truncated file", fs.stat(&path).await)?;
    same("a truncated file is empty", stat.size, 0)
}

async fn names<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    let listing = ok("readdir", fs.readdir(base).await)?;
    let names: Vec<_> = listing.iter().map(|e| (e.name.as_str(), e.kind)).collect();
    same(
        "readdir: names by name, with kinds",
        names,
        [
            ("d", FileKind::Dir),
            ("f", FileKind::File),
            ("log", FileKind::File),
        ]
        .to_vec(),
    )?;
    kind(
        "readdir of a file",
        fs.readdir(&format!("{base}/f")).await,
        ErrorKind::NotDir,
    )?;
    kind(
        "readdir of a missing path",
        fs.readdir(&format!("{base}/none")).await,
        ErrorKind::NotFound,
    )?;
    let (f, g) = (format!("{base}/f"), format!("{base}/d/g"));
    ok("rename into a directory", fs.rename(&f, &g).await)?;
    kind(
        "stat of the old name",
        fs.stat(&f).await,
        ErrorKind::NotFound,
    )?;
    let stat = ok("stat of the new name", fs.stat(&g).await)?;
    same("a renamed file keeps its bytes", stat.size, 21)?;
    ok(
        "rename over a file",
        fs.rename(&format!("{base}/log"), &g).await,
    )?;
    let stat = ok("stat of the replaced name", fs.stat(&g).await)?;
    same("rename replaces the file", stat.size, 0)?;
    ok("mkdir another", fs.mkdir(&format!("{base}/e"), 0o755).await)?;
    kind(
        "rename over a non-empty directory",
        fs.rename(&format!("{base}/e"), &format!("{base}/d")).await,
        ErrorKind::NotEmpty,
    )?;
    kind(
        "rename of a directory under itself",
        fs.rename(&format!("{base}/e"), &format!("{base}/e/below"))
            .await,
        ErrorKind::InvalidArgument,
    )?;
    kind(
        "rename of a missing path",
        fs.rename(&format!("{base}/none"), &format!("{base}/x"))
            .await,
        ErrorKind::NotFound,
    )?;
    kind(
        "unlink of a directory",
        fs.unlink(&format!("{base}/d")).await,
        ErrorKind::IsDir,
    )?;
    kind(
        "unlink of a missing file",
        fs.unlink(&format!("{base}/none")).await,
        ErrorKind::NotFound,
    )?;
    ok("unlink", fs.unlink(&g).await)?;
    kind(
        "stat of an unlinked file",
        fs.stat(&g).await,
        ErrorKind::NotFound,
    )
}

async fn unlinked_while_open<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    let path = format!("{base}/kept");
    let flags = OpenFlags::READ | OpenFlags::WRITE | OpenFlags::CREATE;
    let file = ok(
        "create a file to unlink",
        fs.open(&path, flags, 0o600).await,
    )?;
    ok("write it", fs.pwrite(file, bytes(b"still here"), 0).await)?;
    ok("unlink it while open", fs.unlink(&path).await)?;
    kind(
        "its name is gone",
        fs.stat(&path).await,
        ErrorKind::NotFound,
    )?;
    let back = ok("pread after unlink", fs.pread(file, 100, 0).await)?;
    same(
        "an unlinked file stays readable while open",
        back.to_vec(),
        b"still here".to_vec(),
    )?;
    ok("close the unlinked file", fs.close(file).await)
}

/// A trailing `/` or `/.` asks for a directory; `.` names no name to
/// act on (path_resolution(7), rename(2), unlink(2), open(2)).
async fn names_of_directories<F: FileSystem>(fs: &F, base: &str) -> Result<(), Mismatch> {
    let file = format!("{base}/plain");
    let create = OpenFlags::WRITE | OpenFlags::CREATE;
    let plain = ok("create a plain file", fs.open(&file, create, 0o600).await)?;
    ok("close the plain file", fs.close(plain).await)?;
    let new = format!("{base}/new");
    let cases = [
        (
            "stat of `file/.`",
            fs.stat(&format!("{file}/.")).await.err(),
            ErrorKind::NotDir,
        ),
        (
            "unlink of `file/`",
            fs.unlink(&format!("{file}/")).await.err(),
            ErrorKind::NotDir,
        ),
        (
            "unlink of `file/.`",
            fs.unlink(&format!("{file}/.")).await.err(),
            ErrorKind::InvalidPath,
        ),
        (
            "unlink of `dir/.`",
            fs.unlink(&format!("{base}/d/.")).await.err(),
            ErrorKind::InvalidPath,
        ),
        (
            "mkdir of `new/.`",
            fs.mkdir(&format!("{new}/."), 0o755).await.err(),
            ErrorKind::InvalidPath,
        ),
        (
            "mkdir of `.`",
            fs.mkdir(".", 0o755).await.err(),
            ErrorKind::InvalidPath,
        ),
        (
            "create of `new/`",
            fs.open(&format!("{new}/"), create, 0o600).await.err(),
            ErrorKind::IsDir,
        ),
        (
            "create of `file/`",
            fs.open(&format!("{file}/"), create, 0o600).await.err(),
            ErrorKind::IsDir,
        ),
        (
            "rename of a file to `new/`",
            fs.rename(&file, &format!("{new}/")).await.err(),
            ErrorKind::NotDir,
        ),
        (
            "rename of `file/`",
            fs.rename(&format!("{file}/"), &new).await.err(),
            ErrorKind::NotDir,
        ),
    ];
    for (step, error, expected) in cases {
        match error {
            Some(error) if error.kind() == expected => {}
            Some(error) => {
                let what = format!("failed with {:?} ({error}), not {expected:?}", error.kind());
                return Err(mismatch(step, what));
            }
            None => return Err(mismatch(step, format!("succeeded, not {expected:?}"))),
        }
    }
    kind(
        "nothing was made as `new`",
        fs.stat(&new).await,
        ErrorKind::NotFound,
    )?;
    ok(
        "mkdir of `dir/`",
        fs.mkdir(&format!("{base}/made/"), 0o755).await,
    )?;
    let stat = ok("stat of `dir/.`", fs.stat(&format!("{base}/made/.")).await)?;
    same("`dir/.` is the directory", stat.kind, FileKind::Dir)?;
    ok("unlink the plain file", fs.unlink(&file).await)
}

fn bytes(data: &[u8]) -> IoChain {
    IoChain::from(IoBuf::copy_from_slice(data))
}

fn mismatch(step: &'static str, what: impl Into<String>) -> Mismatch {
    Mismatch {
        step,
        what: what.into(),
    }
}

fn ok<T, E: FileSystemError>(step: &'static str, result: Result<T, E>) -> Result<T, Mismatch> {
    result.map_err(|error| mismatch(step, format!("failed: {error} ({:?})", error.kind())))
}

fn kind<T, E: FileSystemError>(
    step: &'static str,
    result: Result<T, E>,
    expected: ErrorKind,
) -> Result<(), Mismatch> {
    match result {
        Err(error) if error.kind() == expected => Ok(()),
        Err(error) => Err(mismatch(
            step,
            format!("failed with {:?} ({error}), not {expected:?}", error.kind()),
        )),
        Ok(_) => Err(mismatch(step, format!("succeeded, not {expected:?}"))),
    }
}

fn same<T: PartialEq + fmt::Debug>(
    step: &'static str,
    got: T,
    expected: T,
) -> Result<(), Mismatch> {
    if got == expected {
        Ok(())
    } else {
        Err(mismatch(step, format!("{got:?}, not {expected:?}")))
    }
}
