//! The copy: one piece of at most [`ebb_offload::CHUNK`] at a time, read
//! with `pread` (views of the receive buffers), digested, and written
//! back with `pwrite` as the same chain; then the piece is dropped, so a
//! native node holds one piece's receive buffers at a time whatever the
//! file's size (see `CHUNK`).

use ebb_fs::{ErrorKind, FileSystem, Handle, OpenFlags};
use ebb_iobuf::IoChain;
use ebb_offload::CHUNK;

/// FNV-1a 64's offset basis: the digest of nothing.
pub const DIGEST_START: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a 64 (Fowler, Noll, Vo) of `bytes`, continuing from `hash`: cheap,
/// and enough to tell a changed or misplaced byte (not a cryptographic
/// hash: nobody forges these files).
#[must_use]
pub fn digest(mut hash: u64, bytes: &[u8]) -> u64 {
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// What a copy did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copied {
    /// Bytes read (and written).
    pub bytes: u64,
    /// Their digest.
    pub digest: u64,
}

/// Copies `from` to `to` (created or truncated) in `fs`: the hosted
/// node's shared directory on a node (`ebb_offload::RemoteFileSystem`),
/// or any other FileSystem backend (the tests use the in-memory one).
/// Both files are closed whether the copy worked or not (the hosted node
/// keeps a node's handles until closed, up to its limit).
///
/// # Errors
///
/// The first file operation that failed; a write that took fewer bytes
/// than given is `ErrorKind::Io(ENOSPC)` in the backend's error.
pub async fn copy_file<F>(fs: &F, from: &str, to: &str) -> Result<Copied, F::Error>
where
    F: FileSystem,
    F::Error: From<ErrorKind>,
{
    let source = fs.open(from, OpenFlags::READ, 0).await?;
    let target = match fs
        .open(
            to,
            OpenFlags::WRITE | OpenFlags::CREATE | OpenFlags::TRUNCATE,
            0o644,
        )
        .await
    {
        Ok(target) => target,
        Err(error) => {
            // The open's error is the one to report; a failed close of
            // the source after it adds nothing the caller can act on.
            let _ = fs.close(source).await;
            return Err(error);
        }
    };
    let copied = copy_pieces(fs, source, target).await;
    let source_closed = fs.close(source).await;
    let target_closed = fs.close(target).await;
    let copied = copied?;
    source_closed?;
    target_closed?;
    Ok(copied)
}

/// The copy between two open files, a piece at a time.
async fn copy_pieces<F>(fs: &F, source: Handle, target: Handle) -> Result<Copied, F::Error>
where
    F: FileSystem,
    F::Error: From<ErrorKind>,
{
    let mut copied = Copied {
        bytes: 0,
        digest: DIGEST_START,
    };
    loop {
        let piece: IoChain = fs.pread(source, CHUNK, copied.bytes).await?;
        if piece.is_empty() {
            break;
        }
        for segment in piece.segments() {
            copied.digest = digest(copied.digest, segment);
        }
        let len = u64::try_from(piece.len()).unwrap_or(u64::MAX);
        let written = fs.pwrite(target, piece, copied.bytes).await?;
        if written != len {
            // ENOSPC, errno 28: the only reason a regular file takes less.
            return Err(ErrorKind::Io(28).into());
        }
        copied.bytes += len;
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb_fs::conformance::ready_now as now;
    use ebb_iobuf::{IoBuf, IoChain};
    use ebb_posix_files::MemFileSystem;

    /// The copy the node runs against the hosted node's files runs as it
    /// is against files in memory: it is written against the interface.
    #[test]
    fn the_copy_runs_on_the_in_memory_file_system_too() {
        let fs = MemFileSystem::new();
        let data: alloc::vec::Vec<u8> = (0..3 * CHUNK + 17)
            .map(|i| u8::try_from(i % 253).unwrap())
            .collect();
        let create = OpenFlags::WRITE | OpenFlags::CREATE;
        let file = now(fs.open("in", create, 0o644)).unwrap();
        let chain = IoChain::from(IoBuf::from_vec(data.clone()));
        now(fs.pwrite(file, chain, 0)).unwrap();
        now(fs.close(file)).unwrap();
        let copied = now(copy_file(&fs, "in", "out")).unwrap();
        assert_eq!(
            copied,
            Copied {
                bytes: data.len() as u64,
                digest: digest(DIGEST_START, &data),
            }
        );
        let out = now(fs.open("out", OpenFlags::READ, 0)).unwrap();
        assert!(now(fs.read(out, data.len() + 1)).unwrap().to_vec() == data);
        now(fs.close(out)).unwrap();
        assert_eq!(
            now(copy_file(&fs, "missing", "out")),
            Err(ErrorKind::NotFound)
        );
        assert_eq!(fs.open_handles(), 0, "every file closed, error or not");
    }

    #[test]
    fn the_digest_is_fnv_1a_64_and_continues_across_pieces() {
        // FNV-1a 64 of "a" (the reference value from Fowler/Noll/Vo).
        assert_eq!(digest(DIGEST_START, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            digest(digest(DIGEST_START, b"foo"), b"bar"),
            digest(DIGEST_START, b"foobar")
        );
    }
}
