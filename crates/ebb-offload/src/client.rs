//! The FileSystem Ebb's client representative: any node's (native or
//! hosted) way to the files the hosted node shares.
//!
//! Every operation is one Messenger call (a large read or write, several)
//! to [`FILE_SYSTEM_EBB`] on the serving node (node 0, the frontend, by
//! default), made on the calling core through its Messenger
//! representative. The client keeps no state of its own (the handles live
//! on the server, per node), so it is a small `Copy` value rather than a
//! per-core representative object: each core's calls go out through that
//! core's Messenger representative, which is the per-core part.
//!
//! Zero copy on this side: a read's reply payloads (views of the receive
//! buffers) are appended to one [`IoChain`] as they are; a write sends
//! views of the caller's chain ([`IoChain::split_to`]), never a copy.

use alloc::vec::Vec;
use core::future::Future;
use core::time::Duration;

use ebb_core::NodeId;
use ebb_iobuf::IoChain;
use ebb_messenger::{Message, MessengerRef, FRONTEND_NODE};

use crate::bound::bounded;
use crate::reply::decode_listing;
use crate::{
    DecodeError, DirEntry, FsError, Handle, OpenFlags, Reply, Request, Stat, CHUNK, FILE_SYSTEM_EBB,
};

/// How long one call (at most [`CHUNK`] bytes) may take by default before
/// it fails with [`FsError::TimedOut`]: generous, since a node under
/// QEMU's TCG on a loaded host moves a few MiB in seconds, not
/// milliseconds.
pub const DEFAULT_CALL_BOUND: Duration = Duration::from_secs(60);

/// The client of the FileSystem Ebb.
#[derive(Clone, Copy)]
pub struct RemoteFileSystem {
    messenger: MessengerRef,
    server: NodeId,
    call_bound: Duration,
}

impl RemoteFileSystem {
    /// The files node 0 (the frontend) shares, reached through
    /// `messenger` (this node's).
    #[must_use]
    pub fn new(messenger: MessengerRef) -> Self {
        RemoteFileSystem {
            messenger,
            server: FRONTEND_NODE,
            call_bound: DEFAULT_CALL_BOUND,
        }
    }

    /// The files node `server` shares instead.
    #[must_use]
    pub fn on_node(self, server: NodeId) -> Self {
        RemoteFileSystem { server, ..self }
    }

    /// Each call fails with [`FsError::TimedOut`] after `bound` instead.
    #[must_use]
    pub fn with_call_bound(self, bound: Duration) -> Self {
        RemoteFileSystem {
            call_bound: bound,
            ..self
        }
    }

    /// Opens `path` (relative to the shared directory); `mode` gives a
    /// file it creates its permissions: read, write and execute bits
    /// (0o777) only.
    ///
    /// # Errors
    ///
    /// [`FsError`]: the hosted node's (`NotFound`, `PermissionDenied`,
    /// `Escape`, ...) or the call's (`NotShared`, `Unreachable`, ...);
    /// `BadRequest`, before any call, for a mode with a set-user-ID,
    /// set-group-ID or sticky bit (the hosted node creates files as its
    /// own user, root in a cluster).
    pub async fn open(&self, path: &str, flags: OpenFlags, mode: u32) -> Result<Handle, FsError> {
        let request = Request::Open {
            path: path.into(),
            flags,
            mode,
        };
        match self.call(&request, IoChain::new()).await? {
            (Reply::Opened(handle), _) => Ok(handle),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Reads up to `len` bytes at the handle's position, which moves on;
    /// fewer at the end of the file.
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::open`]; `BadHandle` for a handle this node has not
    /// open.
    pub async fn read(&self, handle: Handle, len: usize) -> Result<IoChain, FsError> {
        self.read_chunks(len, |len, _| Request::Read { handle, len })
            .await
    }

    /// Reads up to `len` bytes from `offset`; fewer at the end of the file.
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::read`].
    pub async fn pread(&self, handle: Handle, len: usize, offset: u64) -> Result<IoChain, FsError> {
        self.read_chunks(len, |len, done| Request::Pread {
            handle,
            len,
            offset: offset.saturating_add(done),
        })
        .await
    }

    /// Writes `data` at the handle's position (the end, opened with
    /// [`OpenFlags::APPEND`]); returns the bytes written (fewer than
    /// `data` only when the hosted node wrote fewer: a full disk). An
    /// empty `data` makes no call.
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::read`].
    pub async fn write(&self, handle: Handle, data: IoChain) -> Result<u64, FsError> {
        self.write_chunks(data, |_| Request::Write { handle }).await
    }

    /// Writes `data` from `offset`; returns the bytes written.
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::read`].
    pub async fn pwrite(&self, handle: Handle, data: IoChain, offset: u64) -> Result<u64, FsError> {
        self.write_chunks(data, |done| Request::Pwrite {
            handle,
            offset: offset.saturating_add(done),
        })
        .await
    }

    /// What `path` is (symlinks inside the shared directory followed).
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::open`].
    pub async fn stat(&self, path: &str) -> Result<Stat, FsError> {
        match self
            .call(&Request::Stat { path: path.into() }, IoChain::new())
            .await?
        {
            (Reply::Stat(stat), _) => Ok(stat),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// The entries of directory `path`, by name (without `.` and `..`).
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::open`]; `TooLarge` for a listing over the
    /// server's bound.
    pub async fn readdir(&self, path: &str) -> Result<Vec<DirEntry>, FsError> {
        match self
            .call(&Request::ReadDir { path: path.into() }, IoChain::new())
            .await?
        {
            (Reply::Listing(count), payload) => {
                decode_listing(&payload.to_vec(), count).map_err(FsError::BadReply)
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Closes `handle`.
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::read`].
    pub async fn close(&self, handle: Handle) -> Result<(), FsError> {
        self.done(Request::Close { handle }).await
    }

    /// Removes the file `path`.
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::open`].
    pub async fn unlink(&self, path: &str) -> Result<(), FsError> {
        self.done(Request::Unlink { path: path.into() }).await
    }

    /// Makes the directory `path`.
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::open`].
    pub async fn mkdir(&self, path: &str, mode: u32) -> Result<(), FsError> {
        self.done(Request::Mkdir {
            path: path.into(),
            mode,
        })
        .await
    }

    /// Renames `from` to `to`.
    ///
    /// # Errors
    ///
    /// As [`RemoteFileSystem::open`].
    pub async fn rename(&self, from: &str, to: &str) -> Result<(), FsError> {
        self.done(Request::Rename {
            from: from.into(),
            to: to.into(),
        })
        .await
    }

    async fn done(&self, request: Request) -> Result<(), FsError> {
        match self.call(&request, IoChain::new()).await? {
            (Reply::Done, _) => Ok(()),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Reads `len` bytes in requests of at most [`CHUNK`], one after the
    /// other (a read's position moves with each), until a short one (the
    /// end of the file); `request(len, done)` makes each.
    async fn read_chunks(
        &self,
        len: usize,
        request: impl Fn(u32, u64) -> Request,
    ) -> Result<IoChain, FsError> {
        let mut data = IoChain::new();
        while data.len() < len {
            let want = (len - data.len()).min(CHUNK);
            let done = u64::try_from(data.len()).unwrap_or(u64::MAX);
            // At most CHUNK (512 KiB): fits in a u32.
            let asked = u32::try_from(want).unwrap_or(u32::MAX);
            let (reply, mut chunk) = self.call(&request(asked, done), IoChain::new()).await?;
            if reply != Reply::Data {
                return Err(unexpected(&reply));
            }
            let got = chunk.len();
            if got > want {
                return Err(FsError::BadReply(DecodeError::Overlong {
                    asked: want,
                    got,
                }));
            }
            data.append(&mut chunk);
            if got < want {
                break;
            }
        }
        Ok(data)
    }

    /// Writes `data` in requests of at most [`CHUNK`], views of its
    /// buffers; `request(done)` makes each. Stops at a short write.
    async fn write_chunks(
        &self,
        mut data: IoChain,
        request: impl Fn(u64) -> Request,
    ) -> Result<u64, FsError> {
        let mut written = 0u64;
        while !data.is_empty() {
            let piece = data
                .split_to(data.len().min(CHUNK))
                .map_err(|_| FsError::TooLarge)?;
            let sent = piece.len();
            match self.call(&request(written), piece).await? {
                (Reply::Written(n), _) => {
                    let n = usize::try_from(n).unwrap_or(usize::MAX);
                    if n > sent {
                        return Err(FsError::BadReply(DecodeError::Overlong {
                            asked: sent,
                            got: n,
                        }));
                    }
                    written = written.saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
                    if n < sent {
                        break;
                    }
                }
                (other, _) => return Err(unexpected(&other)),
            }
        }
        Ok(written)
    }

    /// One call: the request's control, `payload`, the reply decoded
    /// (a failed operation is its error) with its payload.
    async fn call(&self, request: &Request, payload: IoChain) -> Result<(Reply, IoChain), FsError> {
        let control = request.encode()?;
        let rep = self.messenger.get().map_err(|_| FsError::NotOnCore)?;
        let number = request.number();
        let call = rep.call_with(
            self.server,
            None,
            FILE_SYSTEM_EBB,
            number,
            Message {
                control: IoChain::from(ebb_iobuf::IoBuf::from_vec(control)),
                payload,
            },
        );
        let reply = bounded(self.call_bound, call)
            .await
            .ok_or(FsError::TimedOut {
                node: self.server,
                waited_ms: u64::try_from(self.call_bound.as_millis()).unwrap_or(u64::MAX),
            })?
            .map_err(FsError::from_messenger)?;
        let control = reply.control.to_vec();
        match Reply::decode(number, &control).map_err(FsError::BadReply)? {
            Reply::Failed(error) => Err(error),
            decoded => Ok((decoded, reply.payload)),
        }
    }
}

/// The interface every backend implements: each method is the inherent
/// one of the same name (a Messenger call, bounded in time).
impl ebb_fs::FileSystem for RemoteFileSystem {
    type Error = FsError;

    fn open(
        &self,
        path: &str,
        flags: OpenFlags,
        mode: u32,
    ) -> impl Future<Output = Result<Handle, FsError>> {
        RemoteFileSystem::open(self, path, flags, mode)
    }

    fn read(&self, handle: Handle, len: usize) -> impl Future<Output = Result<IoChain, FsError>> {
        RemoteFileSystem::read(self, handle, len)
    }

    fn pread(
        &self,
        handle: Handle,
        len: usize,
        offset: u64,
    ) -> impl Future<Output = Result<IoChain, FsError>> {
        RemoteFileSystem::pread(self, handle, len, offset)
    }

    fn write(&self, handle: Handle, data: IoChain) -> impl Future<Output = Result<u64, FsError>> {
        RemoteFileSystem::write(self, handle, data)
    }

    fn pwrite(
        &self,
        handle: Handle,
        data: IoChain,
        offset: u64,
    ) -> impl Future<Output = Result<u64, FsError>> {
        RemoteFileSystem::pwrite(self, handle, data, offset)
    }

    fn stat(&self, path: &str) -> impl Future<Output = Result<Stat, FsError>> {
        RemoteFileSystem::stat(self, path)
    }

    fn readdir(&self, path: &str) -> impl Future<Output = Result<Vec<DirEntry>, FsError>> {
        RemoteFileSystem::readdir(self, path)
    }

    fn close(&self, handle: Handle) -> impl Future<Output = Result<(), FsError>> {
        RemoteFileSystem::close(self, handle)
    }

    fn unlink(&self, path: &str) -> impl Future<Output = Result<(), FsError>> {
        RemoteFileSystem::unlink(self, path)
    }

    fn mkdir(&self, path: &str, mode: u32) -> impl Future<Output = Result<(), FsError>> {
        RemoteFileSystem::mkdir(self, path, mode)
    }

    fn rename(&self, from: &str, to: &str) -> impl Future<Output = Result<(), FsError>> {
        RemoteFileSystem::rename(self, from, to)
    }
}

/// A reply of another operation's kind (decoding by the request's number
/// makes this impossible; kept as an error, not a panic).
fn unexpected(_reply: &Reply) -> FsError {
    FsError::BadReply(DecodeError::WrongKind)
}
