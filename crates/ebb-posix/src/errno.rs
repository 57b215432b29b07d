//! Linux errno values (x86_64, `asm-generic/errno-base.h` and
//! `errno.h`) that the personality itself returns. A system call returns
//! `-errno` on failure, as the kernel does; musl's `__syscall_ret` turns
//! that into `-1` and `errno`.

/// Operation not permitted.
pub const EPERM: isize = 1;
/// No such file or directory.
pub const ENOENT: isize = 2;
/// Interrupted system call.
pub const EINTR: isize = 4;
/// Bad file descriptor.
pub const EBADF: isize = 9;
/// Try again.
pub const EAGAIN: isize = 11;
/// Out of memory.
pub const ENOMEM: isize = 12;
/// Permission denied.
pub const EACCES: isize = 13;
/// Bad address.
pub const EFAULT: isize = 14;
/// File exists.
pub const EEXIST: isize = 17;
/// Not a directory.
pub const ENOTDIR: isize = 20;
/// Is a directory.
pub const EISDIR: isize = 21;
/// Invalid argument.
pub const EINVAL: isize = 22;
/// Not a terminal (an `ioctl` a file does not answer).
pub const ENOTTY: isize = 25;
/// Illegal seek.
pub const ESPIPE: isize = 29;
/// Function not implemented: a system call this personality does not
/// serve.
pub const ENOSYS: isize = 38;
/// Directory not empty.
pub const ENOTEMPTY: isize = 39;
/// No such device (mmap of a file that cannot be mapped).
pub const ENODEV: isize = 19;
/// No such process.
pub const ESRCH: isize = 3;
/// File name too long.
pub const ENAMETOOLONG: isize = 36;
/// Result too large (a buffer too small for the answer).
pub const ERANGE: isize = 34;
/// Too many open files.
pub const EMFILE: isize = 24;
/// No space left (a file past the size the file system allows).
pub const EFBIG: isize = 27;
/// Device or resource busy (renaming or removing the root).
pub const EBUSY: isize = 16;
/// Operation not supported (clock_nanosleep on a clock that cannot
/// sleep).
pub const EOPNOTSUPP: isize = 95;
/// Connection timed out: a futex wait whose timeout passed.
pub const ETIMEDOUT: isize = 110;

// The sockets group's answers (`asm-generic/errno.h`).

/// Broken pipe: a write with no reader, or on a socket shut for writing.
pub const EPIPE: isize = 32;
/// Socket operation on a descriptor that is not a socket.
pub const ENOTSOCK: isize = 88;
/// Message too long.
pub const EMSGSIZE: isize = 90;
/// Protocol not available: a socket option this socket does not have.
pub const ENOPROTOOPT: isize = 92;
/// Protocol not supported (a socket type other than a stream).
pub const EPROTONOSUPPORT: isize = 93;
/// Address family not supported (anything but IPv4 natively).
pub const EAFNOSUPPORT: isize = 97;
/// Address already in use.
pub const EADDRINUSE: isize = 98;
/// Cannot assign the requested address (not one of this machine's).
pub const EADDRNOTAVAIL: isize = 99;
/// Network is unreachable.
pub const ENETUNREACH: isize = 101;
/// The connection was reset by the peer.
pub const ECONNRESET: isize = 104;
/// The socket is already connected.
pub const EISCONN: isize = 106;
/// The socket is not connected.
pub const ENOTCONN: isize = 107;
/// The connection was refused.
pub const ECONNREFUSED: isize = 111;
/// A connection attempt is already under way.
pub const EALREADY: isize = 114;
/// The connection is under way (a non-blocking connect).
pub const EINPROGRESS: isize = 115;
