//! The program's descriptors that name Ebbflow's objects (sockets, epoll
//! sets, eventfds, pipes). Linux keeps the numbers: each such descriptor
//! is a placeholder in Linux's table (`/dev/null` opened `O_PATH`), so
//! that a number is never both an object's and a file's, the lowest free
//! number is what Linux says it is (Redis sizes its event loop by the
//! numbers it gets), and dup(2), dup2(2) and close-on-exec work on the
//! placeholder as on any descriptor. This table says which placeholders
//! stand for which objects, and with which status flags.
//!
//! The table is core 0's, as the objects are. A global bitmap of the
//! object numbers ([`is_object`]) lets a call from any thread see that a
//! number is an object's: the program's other threads' such calls are
//! shipped to core 0 (`remote.rs`).

use core::cell::Cell;
use core::sync::atomic::{AtomicU64, Ordering};
use std::rc::Rc;

use ebb_posix::errno::{EBADF, EMFILE};
use ebb_posix_files::table::{O_ACCMODE, O_CLOEXEC, O_NONBLOCK};
use ebb_posix_objects::Object;

use crate::linux;

/// Descriptor numbers objects may take: as many as the native file
/// table holds (Redis's default 10,000 clients fit); the bitmap is sized
/// for them.
pub const MAX_OBJECT_FDS: usize = ebb_posix_files::table::MAX_FDS;

/// One bit per descriptor number below [`MAX_OBJECT_FDS`]: set while it
/// names an object.
static OBJECT_FDS: [AtomicU64; MAX_OBJECT_FDS / 64] =
    [const { AtomicU64::new(0) }; MAX_OBJECT_FDS / 64];

/// Whether `fd` names an object now (any thread may ask).
#[must_use]
pub fn is_object(fd: usize) -> bool {
    fd < MAX_OBJECT_FDS && OBJECT_FDS[fd / 64].load(Ordering::Acquire) & (1 << (fd % 64)) != 0
}

fn mark(fd: usize, on: bool) {
    let bit = 1 << (fd % 64);
    if on {
        OBJECT_FDS[fd / 64].fetch_or(bit, Ordering::Release);
    } else {
        OBJECT_FDS[fd / 64].fetch_and(!bit, Ordering::Release);
    }
}

/// An open object description: shared by the descriptors dup(2) makes.
pub struct Description {
    /// The object.
    pub object: Object,
    /// The access mode and `O_NONBLOCK`.
    flags: Cell<u32>,
}

impl Description {
    /// The status flags, as F_GETFL says them.
    #[must_use]
    pub fn status_flags(&self) -> u32 {
        self.flags.get()
    }

    /// Whether `O_NONBLOCK` is set.
    #[must_use]
    pub fn nonblocking(&self) -> bool {
        self.flags.get() & O_NONBLOCK != 0
    }

    /// F_SETFL: only `O_NONBLOCK` changes (Linux also takes `O_APPEND`,
    /// `O_ASYNC`, `O_DIRECT` and `O_NOATIME`, none of which means
    /// anything for these objects).
    pub fn set_status_flags(&self, flags: u32) {
        let kept = self.flags.get() & !O_NONBLOCK;
        self.flags.set(kept | (flags & O_NONBLOCK));
    }
}

/// The objects' descriptors.
#[derive(Default)]
pub struct Descriptors {
    slots: Vec<Option<Rc<Description>>>,
    /// A placeholder made by [`Descriptors::has_free`] and not used yet.
    spare: Option<usize>,
}

/// What a close or a displacing dup let go of: the object, if that was
/// its last descriptor (the caller releases it, outside the table).
pub type Released = Option<Object>;

impl Descriptors {
    /// The description `fd` names, if it names an object.
    #[must_use]
    pub fn get(&self, fd: usize) -> Option<Rc<Description>> {
        self.slots.get(fd).and_then(Clone::clone)
    }

    /// Gives `object` a number, with `flags` (access mode, `O_NONBLOCK`,
    /// `O_CLOEXEC`): the spare one [`Descriptors::has_free`] took, else the
    /// lowest free.
    ///
    /// # Errors
    ///
    /// Linux's (`EMFILE`), or `EMFILE` past [`MAX_OBJECT_FDS`].
    pub fn install(&mut self, object: Object, flags: u32) -> Result<usize, isize> {
        let cloexec = flags & O_CLOEXEC != 0;
        let fd = match self.spare.take() {
            Some(fd) => {
                // The spare is made close-on-exec (never leaked into an
                // exec'd program while it waits).
                if !cloexec {
                    linux::fcntl(fd, linux::F_SETFD, 0);
                }
                fd
            }
            None => linux::placeholder(cloexec)?,
        };
        let description = Description {
            object,
            flags: Cell::new(flags & (O_ACCMODE | O_NONBLOCK)),
        };
        self.put(fd, Rc::new(description)).map(|()| fd)
    }

    /// Puts `description` at `fd`, a placeholder just made.
    fn put(&mut self, fd: usize, description: Rc<Description>) -> Result<(), isize> {
        if fd >= MAX_OBJECT_FDS {
            linux::close(fd);
            return Err(EMFILE);
        }
        if self.slots.len() <= fd {
            self.slots.resize(fd + 1, None);
        }
        self.slots[fd] = Some(description);
        mark(fd, true);
        Ok(())
    }

    /// Whether a number an object may take is free now; it stays free
    /// for the next [`Descriptors::install`] (it is taken now, as a
    /// spare).
    pub fn has_free(&mut self) -> bool {
        if self.spare.is_none() {
            self.spare = linux::placeholder(true).ok();
        }
        self.spare.is_some_and(|fd| fd < MAX_OBJECT_FDS)
    }

    /// Takes every object out of the table (the process is ending): the
    /// objects whose last descriptor this was, to release.
    pub fn take_all(&mut self) -> Vec<Object> {
        (0..self.slots.len())
            .filter_map(|fd| self.take(fd))
            .collect()
    }

    /// Takes `fd` out of the table (its placeholder stays: the caller
    /// closes or replaces it).
    fn take(&mut self, fd: usize) -> Released {
        let description = self.slots.get_mut(fd)?.take()?;
        mark(fd, false);
        Rc::into_inner(description).map(|last| last.object)
    }

    /// close(2) of an object's descriptor.
    ///
    /// # Errors
    ///
    /// `EBADF` when `fd` names no object.
    pub fn close(&mut self, fd: usize) -> Result<Released, isize> {
        if self.get(fd).is_none() {
            return Err(EBADF);
        }
        let released = self.take(fd);
        linux::close(fd);
        Ok(released)
    }

    /// F_DUPFD and F_DUPFD_CLOEXEC (dup(2) is F_DUPFD from 0): a new
    /// number at least `from` for `fd`'s description.
    ///
    /// # Errors
    ///
    /// `EBADF` when `fd` names no object; Linux's (`EMFILE`, `EINVAL`).
    pub fn duplicate(&mut self, fd: usize, from: usize, cloexec: bool) -> Result<usize, isize> {
        let description = self.get(fd).ok_or(EBADF)?;
        let command = if cloexec {
            linux::F_DUPFD_CLOEXEC
        } else {
            linux::F_DUPFD
        };
        let new = linux::fcntl(fd, command, from);
        let new = usize::try_from(new).map_err(|_| -new)?;
        self.put(new, description).map(|()| new)
    }

    /// dup3(2) (and dup2(2), `flags` 0) where `old` or `new` names an
    /// object: Linux moves the placeholder (or the file) to `new`, and
    /// the table follows. What `new` named before is let go of.
    ///
    /// # Errors
    ///
    /// Linux's (`EBADF`, `EINVAL`, `EBUSY`).
    pub fn dup3(&mut self, old: usize, new: usize, flags: usize) -> Result<Released, isize> {
        if self.get(old).is_some() && new >= MAX_OBJECT_FDS {
            // Refused before Linux closes what `new` holds.
            return Err(EMFILE);
        }
        let moved = linux::dup3(old, new, flags);
        if moved < 0 {
            return Err(-moved);
        }
        let released = self.take(new);
        if let Some(description) = self.get(old) {
            self.put(new, description)?;
        }
        Ok(released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::tests::numbers_to_myself;
    use ebb_posix_files::table::O_RDWR;
    use ebb_posix_objects::eventfd::EventFd;

    fn counter() -> Object {
        Object::EventFd(Rc::new(EventFd::new(0, 0)))
    }

    #[test]
    fn an_object_takes_a_linux_number_and_gives_it_back_on_close() {
        let _turn = numbers_to_myself();
        let mut table = Descriptors::default();
        let fd = table.install(counter(), O_RDWR | O_CLOEXEC).unwrap();
        assert!(is_object(fd));
        assert_eq!(linux::fcntl(fd, linux::F_GETFD, 0), 1, "close-on-exec");
        assert_eq!(table.get(fd).unwrap().status_flags(), O_RDWR);
        let released = table.close(fd).unwrap();
        assert!(released.is_some(), "the last descriptor: the object goes");
        assert!(!is_object(fd));
        assert_eq!(linux::close(fd), -EBADF, "the placeholder is closed too");
        assert_eq!(table.close(fd).err(), Some(EBADF));
    }

    #[test]
    fn a_duplicate_shares_the_description_and_the_object_outlives_one_close() {
        let _turn = numbers_to_myself();
        let mut table = Descriptors::default();
        let fd = table.install(counter(), O_RDWR).unwrap();
        let copy = table.duplicate(fd, 100, true).unwrap();
        assert!(copy >= 100);
        table.get(fd).unwrap().set_status_flags(O_NONBLOCK);
        assert!(table.get(copy).unwrap().nonblocking(), "one description");
        assert!(
            table.close(fd).unwrap().is_none(),
            "still named by the copy"
        );
        assert!(table.close(copy).unwrap().is_some());
    }

    #[test]
    fn dup2_onto_an_object_lets_it_go_and_onto_a_number_moves_the_object() {
        let _turn = numbers_to_myself();
        let mut table = Descriptors::default();
        let first = table.install(counter(), O_RDWR).unwrap();
        let second = table.install(counter(), O_RDWR).unwrap();
        let released = table.dup3(first, second, 0).unwrap();
        assert!(released.is_some(), "the second's object had no other name");
        assert!(table
            .get(first)
            .unwrap()
            .object
            .same(&table.get(second).unwrap().object));
        assert!(table.close(first).unwrap().is_none());
        assert!(table.close(second).unwrap().is_some());
        assert_eq!(table.dup3(first, second, 0).err(), Some(EBADF));
    }

    #[test]
    fn a_free_number_checked_for_is_the_one_installed() {
        let _turn = numbers_to_myself();
        let mut table = Descriptors::default();
        assert!(table.has_free());
        let spare = table.spare.unwrap();
        assert_eq!(
            linux::fcntl(spare, linux::F_GETFD, 0),
            1,
            "close-on-exec while spare"
        );
        assert_eq!(table.install(counter(), O_RDWR).unwrap(), spare);
        assert_eq!(linux::fcntl(spare, linux::F_GETFD, 0), 0, "as installed");
        assert!(table.close(spare).unwrap().is_some());
    }

    #[test]
    fn dup2_of_an_object_past_the_table_is_refused_before_linux_acts() {
        let _turn = numbers_to_myself();
        let mut table = Descriptors::default();
        let fd = table.install(counter(), O_RDWR).unwrap();
        assert_eq!(table.dup3(fd, MAX_OBJECT_FDS, 0).err(), Some(EMFILE));
        assert_eq!(linux::close(MAX_OBJECT_FDS), -EBADF, "nothing made there");
        assert_eq!(table.take_all().len(), 1, "the object, to release");
        linux::close(fd);
    }
}
