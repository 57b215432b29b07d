//! The descriptors that name objects (`ebb_posix_objects`): sockets,
//! epoll sets, eventfds and pipes, kept in this core's object table and
//! named by the file table's `Target::Object`. The calls on them are
//! `ebb_posix_objects::calls`, shared with the user-space stack's
//! personality; this is what they need natively ([`NativeHost`]):
//! installing an object, finding one, releasing those whose last
//! descriptor closed, parking the calling C thread on the event loop,
//! and the program's memory.

use alloc::vec::Vec;
use core::future::Future;

use ebb_posix::errno::{EBADF, EMFILE, ENETUNREACH};
use ebb_posix_files::table::{Target, O_NONBLOCK};
use ebb_posix_objects::calls::{Host, Named};
use ebb_posix_objects::readiness::{EPOLLIN, EPOLLOUT};
use ebb_posix_objects::{object, Object};

use super::{files, threads, user};

/// The native platform, as `ebb_posix_objects::calls` sees it.
pub struct NativeHost;

impl Host for NativeHost {
    fn named(&self, fd: usize, not_one: isize) -> Result<Named, isize> {
        let (target, flags) =
            files::with(|table| Ok((table.target(fd)?, table.status_flags(fd)?)))?;
        let Target::Object { id, .. } = target else {
            return Err(not_one);
        };
        let object = object::with_here(|objects| objects.get(id))
            .flatten()
            .ok_or(EBADF)?;
        Ok(Named {
            object,
            nonblocking: flags & O_NONBLOCK != 0,
        })
    }

    fn install(&self, object: Object, flags: u32) -> Result<usize, isize> {
        let kind = object.kind();
        let id = object::with_here(|objects| objects.insert(object)).ok_or(ENETUNREACH)??;
        match files::with(|table| table.open_object(id, kind, flags)) {
            Ok(fd) => Ok(fd),
            Err(errno) => {
                if let Some(Some(object)) = object::with_here(|objects| objects.remove(id)) {
                    object::release(&object);
                }
                Err(if errno == EBADF { EMFILE } else { errno })
            }
        }
    }

    fn has_free(&self) -> bool {
        files::with(|table| Ok(table.has_free())).unwrap_or(false)
    }

    fn close(&self, fd: usize) {
        let _ = files::close(fd);
    }

    /// Files and the standard streams are always ready, as on Linux for
    /// regular files.
    fn other_readiness(&self, fd: usize, wanted: u32) -> Option<u32> {
        files::with(|table| table.target(fd))
            .ok()
            .map(|_| (EPOLLIN | EPOLLOUT) & wanted)
    }

    fn wait<F: Future>(&self, future: F) -> Option<F::Output> {
        threads::wait(future)
    }

    fn bytes<'a>(&self, addr: usize, len: usize) -> Result<&'a [u8], isize> {
        user::bytes(addr, len)
    }

    fn bytes_mut<'a>(&self, addr: usize, len: usize) -> Result<&'a mut [u8], isize> {
        user::bytes_mut(addr, len)
    }
}

/// Releases the objects whose last descriptor just closed (after
/// close, dup2, dup3).
pub fn release_closed() {
    let released: Vec<u32> = files::with(|table| Ok(table.take_released())).unwrap_or_default();
    for id in released {
        // Taken out of the table first: a socket's release calls into the
        // network stack, which may call back into the table's objects.
        if let Some(Some(object)) = object::with_here(|objects| objects.remove(id)) {
            object::release(&object);
        }
    }
}
