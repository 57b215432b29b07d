//! What `ebb_posix_objects::calls` needs, in a Linux process: the
//! objects' descriptors ([`crate::descriptors`], on Linux's numbers),
//! parking the program's main function (a stackful event of core 0) on
//! the event loop, and the program's memory, which is this process's.

use core::cell::RefCell;
use core::future::Future;

use ebb_posix::errno::EBADF;
use ebb_posix_objects::calls::{check_range, Host, Named};
use ebb_posix_objects::Object;

use crate::descriptors::{Descriptors, Released};
use crate::linux;

std::thread_local! {
    /// The objects' descriptors: the program thread's (core 0's).
    static DESCRIPTORS: RefCell<Descriptors> = RefCell::new(Descriptors::default());
}

/// Works on the table. Never called from inside itself: nothing here
/// calls back into the program.
pub fn with<T>(work: impl FnOnce(&mut Descriptors) -> T) -> T {
    DESCRIPTORS.with(|table| work(&mut table.borrow_mut()))
}

/// Releases what a close or dup let go of, outside the table (a
/// socket's release calls into the network stack, which may call back
/// into other objects).
pub fn release(released: Released) {
    if let Some(object) = released {
        ebb_posix_objects::object::release(&object);
    }
}

/// Whether Linux has `fd` open.
fn linux_has(fd: usize) -> bool {
    linux::fcntl(fd, linux::F_GETFD, 0) >= 0
}

/// The user-space stack's platform, as the calls see it.
pub struct UserStackHost;

impl Host for UserStackHost {
    fn named(&self, fd: usize, not_one: isize) -> Result<Named, isize> {
        match with(|table| table.get(fd)) {
            Some(description) => Ok(Named {
                object: description.object.clone(),
                nonblocking: description.nonblocking(),
            }),
            None if linux_has(fd) => Err(not_one),
            None => Err(EBADF),
        }
    }

    fn install(&self, object: Object, flags: u32) -> Result<usize, isize> {
        match with(|table| table.install(object.clone(), flags)) {
            Ok(fd) => Ok(fd),
            Err(errno) => {
                ebb_posix_objects::object::release(&object);
                Err(errno)
            }
        }
    }

    fn has_free(&self) -> bool {
        with(Descriptors::has_free)
    }

    fn close(&self, fd: usize) {
        if let Ok(released) = with(|table| table.close(fd)) {
            release(released);
        }
    }

    fn other_readiness(&self, fd: usize, wanted: u32) -> Option<u32> {
        linux::readiness_now(fd, wanted)
    }

    fn wait<F: Future>(&self, future: F) -> Option<F::Output> {
        // Only the program's main function runs as a stackful event; a
        // call from anywhere else cannot park and says so.
        ebb_event::block_on(future).ok()
    }

    fn bytes<'a>(&self, addr: usize, len: usize) -> Result<&'a [u8], isize> {
        if len == 0 {
            return Ok(&[]);
        }
        check_range(addr, len)?;
        // The program and its C library share one address space, so the
        // pointer is trusted as libc trusts it (an unmapped one faults the
        // process, where Linux would answer EFAULT); another of its threads
        // writing these bytes meanwhile is the program's data race, as with
        // Linux's read(2).
        // SAFETY: the program passed these bytes to this call to be read;
        // the caller is in the call while the slice lives; null, wrapping
        // and over-isize::MAX ranges were refused.
        Ok(unsafe { core::slice::from_raw_parts(addr as *const u8, len) })
    }

    fn bytes_mut<'a>(&self, addr: usize, len: usize) -> Result<&'a mut [u8], isize> {
        if len == 0 {
            return Ok(&mut []);
        }
        check_range(addr, len)?;
        // Trusted as in `bytes` above: one address space, as libc's.
        // SAFETY: the program passed these bytes to this call to be
        // filled; the caller is in the call while the slice lives; null,
        // wrapping and over-isize::MAX ranges were refused.
        Ok(unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, len) })
    }
}
