//! readv(2) and writev(2): one read or write on each buffer in turn.

use alloc::vec::Vec;

use ebb_posix::errno::{EFAULT, EINVAL};

use super::{answer, get, Host, MAX_RW_COUNT};

/// Linux's `UIO_MAXIOV`.
const MAX_IOVECS: usize = 1024;
/// `sizeof(struct iovec)` on x86_64: a pointer and a length.
const IOVEC_BYTES: usize = 16;

/// The `count` `struct iovec`s at `iov`: (base, length) pairs.
fn iovecs(host: &impl Host, iov: usize, count: usize) -> Result<Vec<(usize, usize)>, isize> {
    if count > MAX_IOVECS {
        return Err(EINVAL);
    }
    (0..count)
        .map(|index| {
            let at = index
                .checked_mul(IOVEC_BYTES)
                .and_then(|offset| iov.checked_add(offset))
                .ok_or(EFAULT)?;
            let raw = get::<IOVEC_BYTES>(host, at)?;
            let (base, len) = raw.split_at(8);
            let word = |bytes: &[u8]| usize::from_ne_bytes(bytes.try_into().unwrap_or([0; 8]));
            Ok((word(base), word(len)))
        })
        .collect()
}

/// What was moved, once something was (a later buffer's failure does not
/// undo the earlier ones), else the error.
fn so_far(total: usize, error: isize) -> Result<usize, isize> {
    if total > 0 {
        Ok(total)
    } else {
        Err(error)
    }
}

/// readv(2) and writev(2): `one(base, len, may_block)` (a read or write,
/// answering as the call would) on each buffer in turn, stopping at a
/// short transfer, at most `MAX_RW_COUNT` bytes in all. A read waits only
/// for its first buffer: once something came, it returns what is there
/// (as Linux's socket and pipe readv do). A blocking write waits for
/// every buffer (`waits_for_all`), as Linux's `tcp_sendmsg` and
/// `pipe_write` move the whole iovec.
pub fn vectored(
    host: &impl Host,
    iov: usize,
    count: usize,
    mut one: impl FnMut(usize, usize, bool) -> isize,
    waits_for_all: bool,
) -> isize {
    answer(iovecs(host, iov, count).and_then(|entries| {
        let mut total = 0usize;
        for (base, len) in entries {
            let room = len.min(MAX_RW_COUNT - total);
            let done = one(base, room, waits_for_all || total == 0);
            let Ok(done) = usize::try_from(done) else {
                return so_far(total, -done);
            };
            total += done;
            if done < len || total == MAX_RW_COUNT {
                break;
            }
        }
        Ok(total)
    }))
}
