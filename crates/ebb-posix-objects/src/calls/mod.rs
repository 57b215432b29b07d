//! The system calls on these objects, argument by argument: what a
//! platform's POSIX personality answers for socket(2), epoll_wait(2),
//! poll(2) and the rest once it knows a call is one of them. Shared by
//! the native personality (`ebb-posix-native`) and the one on the
//! user-space stack in a Linux process (`ebb-posix-userstack`), which
//! differ only in what [`Host`] says: where descriptors live, how the
//! calling C thread parks, and how the program's memory is reached.

pub mod blocking;
pub mod events;
pub mod io;
pub mod sockets;

use core::future::Future;

use ebb_posix::errno::EFAULT;

use crate::Object;

/// The most bytes one read or write moves (Linux's `MAX_RW_COUNT`,
/// `INT_MAX` rounded down to a page: larger requests are cut to it).
pub const MAX_RW_COUNT: usize = 0x7fff_f000;

/// What the calls need of the platform they run on.
pub trait Host {
    /// The object `fd` names, `Err(not_one)` when it names something
    /// else (a file, a stream, a Linux descriptor), `Err(EBADF)` when it
    /// names nothing.
    ///
    /// # Errors
    ///
    /// As said.
    fn named(&self, fd: usize, not_one: isize) -> Result<Named, isize>;

    /// Gives `object` a descriptor (the lowest free) with `flags` (the
    /// access mode, `O_NONBLOCK`, `O_CLOEXEC`).
    ///
    /// # Errors
    ///
    /// `EMFILE` when no descriptor is free.
    fn install(&self, object: Object, flags: u32) -> Result<usize, isize>;

    /// Whether a descriptor is free now (accept(2) checks before it
    /// takes a connection off the queue, as Linux's `do_accept` does).
    fn has_free(&self) -> bool;

    /// Closes `fd`, which this call installed and must take back.
    fn close(&self, fd: usize);

    /// The poll(2) events of `wanted` that hold for `fd` when it names no
    /// object; `None` when `fd` is not open (`POLLNVAL`).
    fn other_readiness(&self, fd: usize, wanted: u32) -> Option<u32>;

    /// Runs `future` to its end while the calling C thread is parked and
    /// the event loop runs; `None` when the caller cannot park (then
    /// nothing would ever wake it, and the call must not spin).
    fn wait<F: Future>(&self, future: F) -> Option<F::Output>;

    /// The `len` bytes of the program's memory at `addr`, to be read
    /// during this call.
    ///
    /// # Errors
    ///
    /// `EFAULT` for what the platform can tell is no buffer (null,
    /// wrapping around the address space).
    fn bytes<'a>(&self, addr: usize, len: usize) -> Result<&'a [u8], isize>;

    /// The same, to be written.
    ///
    /// # Errors
    ///
    /// As [`Host::bytes`].
    fn bytes_mut<'a>(&self, addr: usize, len: usize) -> Result<&'a mut [u8], isize>;
}

/// A descriptor's object and whether it is non-blocking.
pub struct Named {
    /// The object.
    pub object: Object,
    /// `O_NONBLOCK` is set on its description.
    pub nonblocking: bool,
}

/// Whether `[addr, addr + len)` is a range a slice may cover: not null,
/// not wrapping, at most `isize::MAX` bytes (`core::slice::from_raw_parts`'
/// requirements besides validity). What a [`Host`] checks before it
/// makes a slice of the program's memory; whether the memory is mapped
/// it cannot tell without page tables.
///
/// # Errors
///
/// `EFAULT` for a range that is not.
pub fn check_range(addr: usize, len: usize) -> Result<(), isize> {
    if addr == 0 || len > isize::MAX.unsigned_abs() || addr.checked_add(len).is_none() {
        return Err(EFAULT);
    }
    Ok(())
}

/// A call's result as the program gets it: the value, or `-errno`.
#[must_use]
pub fn answer(result: Result<usize, isize>) -> isize {
    match result {
        Ok(value) => isize::try_from(value).unwrap_or(isize::MAX),
        Err(errno) => -errno,
    }
}

/// The low 32 bits of an argument (an `int` or `unsigned` in C).
#[must_use]
pub fn low32(raw: usize) -> u32 {
    u32::try_from(raw & 0xffff_ffff).unwrap_or(0)
}

/// `N` bytes of the program's memory at `addr`.
///
/// # Errors
///
/// As [`Host::bytes`].
pub fn get<const N: usize>(host: &impl Host, addr: usize) -> Result<[u8; N], isize> {
    host.bytes(addr, N)?.try_into().map_err(|_| EFAULT)
}

/// Writes `value` to the program's memory at `addr`.
///
/// # Errors
///
/// As [`Host::bytes_mut`].
pub fn put(host: &impl Host, addr: usize, value: &[u8]) -> Result<(), isize> {
    host.bytes_mut(addr, value.len())?.copy_from_slice(value);
    Ok(())
}

/// A C `int` read from the program's memory.
///
/// # Errors
///
/// As [`Host::bytes`].
pub fn get_u32(host: &impl Host, addr: usize) -> Result<u32, isize> {
    get::<4>(host, addr).map(u32::from_ne_bytes)
}

/// `struct timespec` read from the program's memory, as nanoseconds:
/// `EINVAL` unless 0 ≤ ns < 10⁹ and the seconds are not negative
/// (nanosleep(2), ppoll(2)).
///
/// # Errors
///
/// As said, and as [`Host::bytes`].
pub fn get_timespec(host: &impl Host, addr: usize) -> Result<u64, isize> {
    const NANOS_PER_SECOND: u64 = 1_000_000_000;
    let raw = get::<16>(host, addr)?;
    let (sec, nsec) = raw.split_at(8);
    let word = |bytes: &[u8]| i64::from_ne_bytes(bytes.try_into().unwrap_or([0; 8]));
    let seconds = u64::try_from(word(sec)).map_err(|_| ebb_posix::errno::EINVAL)?;
    let nanos = u64::try_from(word(nsec)).map_err(|_| ebb_posix::errno::EINVAL)?;
    if nanos >= NANOS_PER_SECOND {
        return Err(ebb_posix::errno::EINVAL);
    }
    Ok(seconds
        .saturating_mul(NANOS_PER_SECOND)
        .saturating_add(nanos))
}
