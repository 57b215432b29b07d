//! Paths resolved beneath the shared directory, by the kernel.
//!
//! Every path a node names is first checked by
//! [`ebb_offload::check_path`] (absolute paths and `..` components are
//! [`FsError::Escape`] before any system call), then resolved with
//! openat2(2) relative to the directory's descriptor with
//! `RESOLVE_BENEATH` ("do not permit the path resolution to succeed if
//! any component of the resolution is not a descendant of the directory
//! indicated by dirfd": absolute symlinks, and `..` or relative symlinks
//! leading out, fail with EXDEV) and `RESOLVE_NO_MAGICLINKS` (no
//! `/proc/PID/fd/N`-style links, which point anywhere). Symlinks that
//! stay inside are followed, so a link from one shared file to another
//! works; a chain of them is checked at each step, since the kernel
//! resolves the whole chain under the same flags. Being done by the
//! kernel in one call, there is no window between a check and the use in
//! which a concurrent rename or symlink could move a path outside
//! (unlike checking `realpath` first).
//!
//! Operations on a name itself (unlink, mkdir, rename) resolve the
//! *parent* directory this way and then act on the last component with
//! the `*at` calls relative to it: the last component is a plain name
//! (not `.` or `..`), so nothing is resolved outside. Its trailing
//! slashes are kept, so the kernel gives them their POSIX meaning (the
//! name must be a directory): `unlink("f/")` of a regular file is ENOTDIR
//! (unlinkat(2) and rename(2) check the name itself, never following a
//! symlink there; mkdir(2) accepts `d/`).

use std::os::fd::{AsFd, OwnedFd};

use ebb_offload::{check_path, FsError};
use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};

use crate::errno::resolve_error;

/// The resolution flags of every path.
const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// Opens `path` beneath `root` with `flags` (and O_CLOEXEC, and O_NOCTTY
/// unless O_PATH).
pub(crate) fn open_beneath(
    root: impl AsFd,
    path: &str,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd, FsError> {
    check_path(path)?;
    // openat2(2) is strict where openat is lenient: with O_PATH only
    // O_CLOEXEC, O_DIRECTORY and O_NOFOLLOW may be set, and a mode without
    // O_CREAT is EINVAL.
    let flags = if flags.contains(OFlags::PATH) {
        flags | OFlags::CLOEXEC
    } else {
        flags | OFlags::CLOEXEC | OFlags::NOCTTY
    };
    let mode = if flags.contains(OFlags::CREATE) {
        mode
    } else {
        Mode::empty()
    };
    openat2(root, path, flags, mode, BENEATH).map_err(resolve_error)
}

/// `path`'s parent directory, opened beneath `root` (O_PATH), and its last
/// component, a plain name with the path's trailing slashes (if any).
///
/// # Errors
///
/// Besides resolution's: [`FsError::InvalidPath`] when the path names the
/// directory itself (`.`, `a/.`), which has no name to act on.
pub(crate) fn parent_beneath(root: impl AsFd, path: &str) -> Result<(OwnedFd, &str), FsError> {
    // The interface's rule, which the in-memory backend follows too.
    let last = ebb_fs::last_name(path).map_err(FsError::from)?;
    // The name with the slashes that followed it: `trimmed` is a prefix
    // of `path` ending with the name.
    let trimmed = path.trim_end_matches('/');
    let name_with_slashes = &path[trimmed.len() - last.name.len()..];
    let dir = open_beneath(
        root,
        last.parent,
        OFlags::PATH | OFlags::DIRECTORY,
        Mode::empty(),
    )?;
    Ok((dir, name_with_slashes))
}
