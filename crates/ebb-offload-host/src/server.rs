//! The server: one shared directory, the nodes' open files, and the
//! answer to each request.

use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ebb_core::{EbbError, NodeId};
use ebb_iobuf::{IoBuf, IoChain};
use ebb_messenger::{Answer, Message, MessengerRef, Request as Incoming};
use ebb_offload::{encode_listing, listed, FsError, Reply, Request, FILE_SYSTEM_EBB, MAX_CHUNK};
use rustix::fs::{Mode, OFlags};

use crate::files::OpenFiles;
use crate::ops;

pub use crate::files::{total_limit, MAX_OPEN_PER_NODE, MAX_OPEN_TOTAL};

/// The largest directory listing a reply carries, in bytes (about 15,000
/// entries of 32-byte names); a larger one is [`FsError::TooLarge`].
pub const MAX_LISTING: usize = 4 << 20;

/// Why a directory cannot be shared.
#[derive(Debug)]
pub struct ServeError {
    /// The directory.
    pub root: PathBuf,
    /// Why.
    pub error: std::io::Error,
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot share {}: {} (it must be a directory this process can open)",
            self.root.display(),
            self.error
        )
    }
}

impl std::error::Error for ServeError {}

/// The FileSystem Ebb's server on the hosted node.
pub struct FileServer {
    /// The shared directory, open (O_PATH): every path is resolved
    /// beneath it, so renaming or replacing the directory's own path
    /// later changes nothing.
    root: OwnedFd,
    root_path: PathBuf,
    files: OpenFiles,
}

impl FileServer {
    /// Shares `root`.
    ///
    /// # Errors
    ///
    /// `root` is missing, not a directory, or cannot be opened.
    pub fn new(root: &Path) -> Result<FileServer, ServeError> {
        let fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| ServeError {
            root: root.to_owned(),
            error: errno.into(),
        })?;
        Ok(FileServer {
            root: fd,
            root_path: root.to_owned(),
            files: OpenFiles::new(crate::files::total_limit()),
        })
    }

    /// The shared directory, as named when it was shared.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root_path
    }

    /// Makes `server` answer the FileSystem Ebb's messages on every core
    /// of the calling core's node (`messenger` is that node's).
    ///
    /// # Errors
    ///
    /// Not on a core of an Ebbflow node.
    pub fn serve(server: &Arc<FileServer>, messenger: MessengerRef) -> Result<(), EbbError> {
        let rep = messenger.get()?;
        let server = Arc::clone(server);
        rep.local().shared().register(
            FILE_SYSTEM_EBB,
            Arc::new(move |request: Incoming| Answer::Now(Ok(server.answer(request)))),
        );
        Ok(())
    }

    /// Node `node` is gone: its files are closed. How many there were.
    pub fn forget_node(&self, node: NodeId) -> usize {
        self.files.forget(node)
    }

    /// How many files `node` has open.
    #[must_use]
    pub fn open_files(&self, node: NodeId) -> usize {
        self.files.count(node)
    }

    /// The reply to one message: its control and payload. A request that
    /// does not decode gets [`FsError::BadRequest`], never silence.
    #[must_use]
    pub fn answer(&self, request: Incoming) -> Message {
        let control = request.body.control.to_vec();
        let (reply, payload) = match Request::decode(request.message, &control) {
            Ok(decoded) => match self.run(request.from, decoded, &request.body.payload) {
                Ok(done) => done,
                Err(error) => (Reply::Failed(error), IoChain::new()),
            },
            Err(_) => (Reply::Failed(FsError::BadRequest), IoChain::new()),
        };
        Message {
            control: IoChain::from(IoBuf::from_vec(reply.encode())),
            payload,
        }
    }

    fn run(
        &self,
        node: NodeId,
        request: Request,
        payload: &IoChain,
    ) -> Result<(Reply, IoChain), FsError> {
        let nothing = IoChain::new;
        Ok(match request {
            Request::Open { path, flags, mode } => {
                let fd = ops::open(&self.root, &path, flags, mode)?;
                (Reply::Opened(self.files.insert(node, fd)?), nothing())
            }
            Request::Read { handle, len } | Request::Pread { handle, len, .. }
                if len > MAX_CHUNK =>
            {
                let _ = handle;
                return Err(FsError::TooLarge);
            }
            Request::Read { handle, len } => {
                let fd = self.files.get(node, handle)?;
                (Reply::Data, ops::read(&*fd, len, None)?)
            }
            Request::Pread {
                handle,
                len,
                offset,
            } => {
                let fd = self.files.get(node, handle)?;
                (Reply::Data, ops::read(&*fd, len, Some(offset))?)
            }
            Request::Write { .. } | Request::Pwrite { .. }
                if payload.len() > MAX_CHUNK as usize =>
            {
                return Err(FsError::TooLarge);
            }
            Request::Write { handle } => {
                let fd = self.files.get(node, handle)?;
                (Reply::Written(ops::write(&*fd, payload, None)?), nothing())
            }
            Request::Pwrite { handle, offset } => {
                let fd = self.files.get(node, handle)?;
                (
                    Reply::Written(ops::write(&*fd, payload, Some(offset))?),
                    nothing(),
                )
            }
            Request::Stat { path } => (Reply::Stat(ops::stat(&self.root, &path)?), nothing()),
            Request::ReadDir { path } => {
                let entries = ops::readdir(&self.root, &path)?;
                let listing = encode_listing(&entries);
                if listing.len() > MAX_LISTING {
                    return Err(FsError::TooLarge);
                }
                let count = u32::try_from(listed(&entries)).map_err(|_| FsError::TooLarge)?;
                (
                    Reply::Listing(count),
                    IoChain::from(IoBuf::from_vec(listing)),
                )
            }
            Request::Close { handle } => {
                self.files.remove(node, handle)?;
                (Reply::Done, nothing())
            }
            Request::Unlink { path } => {
                ops::unlink(&self.root, &path)?;
                (Reply::Done, nothing())
            }
            Request::Mkdir { path, mode } => {
                ops::mkdir(&self.root, &path, mode)?;
                (Reply::Done, nothing())
            }
            Request::Rename { from, to } => {
                ops::rename(&self.root, &from, &to)?;
                (Reply::Done, nothing())
            }
        })
    }
}
