//! Creating and configuring sockets: set-up only, through `rustix`'s safe
//! wrappers (the data path goes through io_uring, see `tcp.rs`/`udp.rs`).

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use ebb_net::NetError;
use rustix::io::Errno;
use rustix::net::{self, sockopt, AddressFamily, Shutdown, SocketFlags, SocketType};

/// A `NetError` for `errno` (positive), as io_uring completions report it.
pub(crate) fn errno_error(operation: &'static str, errno: i32) -> NetError {
    match errno {
        libc::EADDRINUSE => NetError::AddrInUse,
        libc::EADDRNOTAVAIL => NetError::AddrNotAvailable,
        libc::ECONNREFUSED => NetError::ConnectionRefused,
        libc::ECONNRESET | libc::EPIPE => NetError::ConnectionReset,
        _ => NetError::Os { operation, errno },
    }
}

/// Turns a failed set-up call into the `NetError` for its errno.
fn failed(operation: &'static str) -> impl FnOnce(Errno) -> NetError {
    move |errno| errno_error(operation, errno.raw_os_error())
}

fn family(addr: &SocketAddr) -> AddressFamily {
    if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    }
}

/// A blocking socket: io_uring polls blocking sockets itself and answers
/// non-blocking ones with EAGAIN instead.
pub(crate) fn socket(addr: &SocketAddr, kind: SocketType) -> Result<OwnedFd, NetError> {
    net::socket_with(family(addr), kind, SocketFlags::CLOEXEC, None).map_err(failed("socket"))
}

/// `TCP_NODELAY`: requests and replies are whole messages already
/// (batched per loop turn), so Nagle's delay would only add latency.
pub(crate) fn set_no_delay(fd: impl AsFd) -> Result<(), NetError> {
    sockopt::set_tcp_nodelay(fd, true).map_err(failed("setsockopt"))
}

/// The kernel's send buffer size (`SO_SNDBUF`).
pub(crate) fn send_buffer_size(fd: impl AsFd) -> Result<usize, NetError> {
    sockopt::socket_send_buffer_size(fd).map_err(failed("getsockopt"))
}

/// `SO_REUSEADDR` and `SO_REUSEPORT`: every core listens on its own socket
/// bound to the same address, and the kernel spreads connections over them.
pub(crate) fn set_reuse_addr_and_port(fd: impl AsFd) -> Result<(), NetError> {
    sockopt::set_socket_reuseaddr(&fd, true).map_err(failed("setsockopt"))?;
    sockopt::set_socket_reuseport(&fd, true).map_err(failed("setsockopt"))
}

pub(crate) fn bind(fd: impl AsFd, addr: SocketAddr) -> Result<(), NetError> {
    net::bind(fd, &addr).map_err(failed("bind"))
}

pub(crate) fn listen(fd: impl AsFd, backlog: i32) -> Result<(), NetError> {
    net::listen(fd, backlog).map_err(failed("listen"))
}

const NOT_IP: NetError = NetError::Unsupported("a socket family other than IPv4/IPv6");

pub(crate) fn local_addr(fd: impl AsFd) -> Result<SocketAddr, NetError> {
    let any = net::getsockname(fd).map_err(failed("getsockname"))?;
    SocketAddr::try_from(any).map_err(|_| NOT_IP)
}

pub(crate) fn peer_addr(fd: impl AsFd) -> Result<SocketAddr, NetError> {
    let any = net::getpeername(fd).map_err(failed("getpeername"))?;
    any.and_then(|any| SocketAddr::try_from(any).ok())
        .ok_or(NOT_IP)
}

/// Sends FIN after what is queued in the kernel. Errors (already shut,
/// reset) are fine to ignore: the connection is ending either way.
pub(crate) fn shutdown_write(fd: impl AsFd) {
    let _ = net::shutdown(fd, Shutdown::Write);
}

/// Makes the next close send RST instead of FIN (`SO_LINGER` with a zero
/// timeout). An error leaves a FIN, which is still an end.
pub(crate) fn set_linger_zero(fd: impl AsFd) {
    let _ = sockopt::set_socket_linger(fd, Some(Duration::ZERO));
}
