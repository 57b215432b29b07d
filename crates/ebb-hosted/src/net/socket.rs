//! Creating and configuring sockets (plain system calls: set-up only).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use ebb_net::NetError;

use super::sockaddr::RawAddr;

/// A `NetError` for the current `errno`.
pub(crate) fn os_error(operation: &'static str) -> NetError {
    errno_error(
        operation,
        io::Error::last_os_error().raw_os_error().unwrap_or(0),
    )
}

/// A `NetError` for `errno` (positive).
pub(crate) fn errno_error(operation: &'static str, errno: i32) -> NetError {
    match errno {
        libc::EADDRINUSE => NetError::AddrInUse,
        libc::EADDRNOTAVAIL => NetError::AddrNotAvailable,
        libc::ECONNREFUSED => NetError::ConnectionRefused,
        libc::ECONNRESET | libc::EPIPE => NetError::ConnectionReset,
        _ => NetError::Os { operation, errno },
    }
}

fn check(result: libc::c_int, operation: &'static str) -> Result<libc::c_int, NetError> {
    if result < 0 {
        Err(os_error(operation))
    } else {
        Ok(result)
    }
}

fn family(addr: &SocketAddr) -> libc::c_int {
    if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    }
}

/// A blocking socket: io_uring polls blocking sockets itself and answers
/// non-blocking ones with EAGAIN instead.
pub(crate) fn socket(addr: &SocketAddr, kind: libc::c_int) -> Result<OwnedFd, NetError> {
    // SAFETY: no pointers; a non-negative result is a new fd we own.
    let result = unsafe { libc::socket(family(addr), kind | libc::SOCK_CLOEXEC, 0) };
    let fd = check(result, "socket")?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> Result<(), NetError> {
    let size = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: passes a pointer to a live c_int and its size.
    let result =
        unsafe { libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), size) };
    check(result, "setsockopt")?;
    Ok(())
}

pub(crate) fn int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> Result<libc::c_int, NetError> {
    let mut value: libc::c_int = 0;
    let mut size = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: passes a pointer to a live c_int and its size.
    let result = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut size,
        )
    };
    check(result, "getsockopt")?;
    Ok(value)
}

pub(crate) fn bind(fd: &OwnedFd, addr: SocketAddr) -> Result<(), NetError> {
    let raw = RawAddr::from(addr);
    // SAFETY: `raw` holds a valid sockaddr of `raw.len` bytes.
    let result = unsafe { libc::bind(fd.as_raw_fd(), raw.as_ptr(), raw.len) };
    check(result, "bind")?;
    Ok(())
}

pub(crate) fn listen(fd: &OwnedFd, backlog: libc::c_int) -> Result<(), NetError> {
    // SAFETY: no pointers.
    let result = unsafe { libc::listen(fd.as_raw_fd(), backlog) };
    check(result, "listen")?;
    Ok(())
}

pub(crate) fn local_addr(fd: RawFd) -> Result<SocketAddr, NetError> {
    let mut raw = RawAddr::empty();
    // SAFETY: the kernel writes at most `raw.len` bytes into `raw.storage`.
    let result = unsafe { libc::getsockname(fd, raw.as_mut_ptr(), &mut raw.len) };
    check(result, "getsockname")?;
    raw.to_socket_addr().ok_or(NetError::Unsupported(
        "a socket family other than IPv4/IPv6",
    ))
}

pub(crate) fn peer_addr(fd: RawFd) -> Result<SocketAddr, NetError> {
    let mut raw = RawAddr::empty();
    // SAFETY: the kernel writes at most `raw.len` bytes into `raw.storage`.
    let result = unsafe { libc::getpeername(fd, raw.as_mut_ptr(), &mut raw.len) };
    check(result, "getpeername")?;
    raw.to_socket_addr().ok_or(NetError::Unsupported(
        "a socket family other than IPv4/IPv6",
    ))
}

/// Sends FIN after what is queued in the kernel.
pub(crate) fn shutdown_write(fd: RawFd) {
    // SAFETY: no pointers; errors (already shut, reset) are fine to ignore.
    unsafe { libc::shutdown(fd, libc::SHUT_WR) };
}

/// Makes the next close send RST instead of FIN.
pub(crate) fn set_linger_zero(fd: RawFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let size = libc::socklen_t::try_from(std::mem::size_of::<libc::linger>()).unwrap_or(8);
    // SAFETY: passes a pointer to a live linger struct and its size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            size,
        )
    };
}
