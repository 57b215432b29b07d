//! pipe(2): a byte queue with a read end and a write end (pipe(7)).

use alloc::collections::VecDeque;
use alloc::rc::Rc;
use core::cell::{Cell, RefCell};

use ebb_posix::errno::{EAGAIN, EBADF, EPIPE};

use crate::notify::{Notifier, Pollable};
use crate::readiness::{EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT};

/// A pipe's capacity (pipe(7): 16 pages on Linux).
pub const CAPACITY: usize = 65_536;
/// Writes up to this many bytes are atomic (pipe(7): `PIPE_BUF`).
pub const PIPE_BUF: usize = 4096;

struct Shared {
    data: RefCell<VecDeque<u8>>,
    /// Whether each end is still open.
    reader: Cell<bool>,
    writer: Cell<bool>,
    read_side: Notifier,
    write_side: Notifier,
}

/// One end of a pipe.
pub struct PipeEnd {
    shared: Rc<Shared>,
    writes: bool,
}

/// A new pipe: (read end, write end).
#[must_use]
pub fn pipe() -> (PipeEnd, PipeEnd) {
    let shared = Rc::new(Shared {
        data: RefCell::new(VecDeque::new()),
        reader: Cell::new(true),
        writer: Cell::new(true),
        read_side: Notifier::default(),
        write_side: Notifier::default(),
    });
    (
        PipeEnd {
            shared: Rc::clone(&shared),
            writes: false,
        },
        PipeEnd {
            shared,
            writes: true,
        },
    )
}

impl PipeEnd {
    /// Whether this is the write end.
    #[must_use]
    pub fn is_write_end(&self) -> bool {
        self.writes
    }

    /// read(2): what is queued, up to `buf`'s length; 0 once the write
    /// end is closed and the queue empty; `EAGAIN` while it is open and
    /// the queue empty.
    pub fn read(&self, buf: &mut [u8]) -> Result<usize, isize> {
        if self.writes {
            return Err(EBADF);
        }
        let count = {
            let mut data = self.shared.data.borrow_mut();
            if data.is_empty() {
                return if buf.is_empty() || !self.shared.writer.get() {
                    Ok(0)
                } else {
                    Err(EAGAIN)
                };
            }
            let count = buf.len().min(data.len());
            for (slot, byte) in buf.iter_mut().zip(data.drain(..count)) {
                *slot = byte;
            }
            count
        };
        if count > 0 {
            self.shared.write_side.notify();
        }
        Ok(count)
    }

    /// write(2): as much as fits; a write of at most `PIPE_BUF` bytes goes
    /// in whole or not at all (`EAGAIN`); `EPIPE` once the read end is
    /// closed (SIGPIPE is not delivered).
    pub fn write(&self, bytes: &[u8]) -> Result<usize, isize> {
        if !self.writes {
            return Err(EBADF);
        }
        if !self.shared.reader.get() {
            return Err(EPIPE);
        }
        if bytes.is_empty() {
            return Ok(0);
        }
        let count = {
            let mut data = self.shared.data.borrow_mut();
            let room = CAPACITY - data.len();
            if room == 0 || (bytes.len() <= PIPE_BUF && room < bytes.len()) {
                return Err(EAGAIN);
            }
            let count = bytes.len().min(room);
            data.extend(&bytes[..count]);
            count
        };
        self.shared.read_side.notify();
        Ok(count)
    }

    /// The end's last descriptor closed: the other end sees it.
    pub(crate) fn release(&self) {
        if self.writes {
            self.shared.writer.set(false);
            self.shared.read_side.notify();
        } else {
            self.shared.reader.set(false);
            self.shared.data.borrow_mut().clear();
            self.shared.write_side.notify();
        }
    }
}

impl Pollable for PipeEnd {
    fn readiness(&self) -> u32 {
        let queued = self.shared.data.borrow().len();
        if self.writes {
            if !self.shared.reader.get() {
                // pipe(7)/poll(2): the write end of a pipe without
                // reader is an error.
                EPOLLERR | EPOLLOUT
            } else if CAPACITY - queued >= PIPE_BUF {
                EPOLLOUT
            } else {
                0
            }
        } else {
            let mut ready = 0;
            if queued > 0 {
                ready |= EPOLLIN;
            }
            if !self.shared.writer.get() {
                ready |= EPOLLHUP;
            }
            ready
        }
    }

    fn notifier(&self) -> &Notifier {
        if self.writes {
            &self.shared.write_side
        } else {
            &self.shared.read_side
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn bytes_come_out_in_order_and_eof_follows_the_writers_close() {
        let (reader, writer) = pipe();
        let mut buf = [0u8; 4];
        assert_eq!(reader.read(&mut buf), Err(EAGAIN));
        assert_eq!(writer.write(b"hello"), Ok(5));
        assert_eq!(reader.readiness(), EPOLLIN);
        assert_eq!(reader.read(&mut buf), Ok(4));
        assert_eq!(&buf, b"hell");
        writer.release();
        assert_eq!(reader.readiness(), EPOLLIN | EPOLLHUP);
        assert_eq!(reader.read(&mut buf), Ok(1));
        assert_eq!(reader.read(&mut buf), Ok(0));
    }

    #[test]
    fn a_full_pipe_takes_what_fits_and_small_writes_whole_or_not() {
        let (reader, writer) = pipe();
        let big = vec![7u8; CAPACITY + 10];
        assert_eq!(writer.write(&big), Ok(CAPACITY));
        assert_eq!(writer.readiness(), 0);
        assert_eq!(writer.write(b"x"), Err(EAGAIN));
        let mut buf = vec![0u8; 100];
        assert_eq!(reader.read(&mut buf), Ok(100));
        // 100 bytes of room: a 200-byte write (≤ PIPE_BUF) must wait.
        assert_eq!(writer.write(&[1u8; 200]), Err(EAGAIN));
        assert_eq!(writer.write(&[1u8; 50]), Ok(50));
    }

    #[test]
    fn writing_with_no_reader_is_epipe_and_ends_are_one_way() {
        let (reader, writer) = pipe();
        assert_eq!(reader.write(b"x"), Err(EBADF));
        assert_eq!(writer.read(&mut [0u8; 1]), Err(EBADF));
        reader.release();
        assert_eq!(writer.write(b"x"), Err(EPIPE));
        assert_eq!(writer.readiness(), EPOLLERR | EPOLLOUT);
    }
}
