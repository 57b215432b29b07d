//! The sockets group: IPv4 TCP sockets on Ebbflow's network interface
//! (`crate::socket`), their arguments read from and answers written to
//! the program's memory. What the socket layer does and what it does not
//! is in that module's documentation.

use alloc::rc::Rc;

use ebb_posix::errno::{EFAULT, EINPROGRESS, EINVAL, EMFILE, ENOTSOCK};
use ebb_posix_files::table::{O_CLOEXEC, O_NONBLOCK, O_RDWR};

use super::blocking::{self, blocking, wait_any};
use super::{answer, get_u32, low32, put, Host, Named, MAX_RW_COUNT};
use crate::socket::{address, Socket};
use crate::Object;

/// recv's and send's flags (`include/linux/socket.h`).
const MSG_PEEK: usize = 0x2;
const MSG_DONTWAIT: usize = 0x40;

/// The socket `fd` names (`ENOTSOCK` for another descriptor), and
/// whether it is non-blocking.
fn socket_of(host: &impl Host, fd: usize) -> Result<(Rc<Socket>, bool), isize> {
    let Named {
        object,
        nonblocking,
    } = host.named(fd, ENOTSOCK)?;
    match object {
        Object::Socket(socket) => Ok((socket, nonblocking)),
        _ => Err(ENOTSOCK),
    }
}

/// The descriptor flags of `SOCK_NONBLOCK`/`SOCK_CLOEXEC` bits.
fn open_flags(sock_flags: u32) -> u32 {
    O_RDWR
        | if sock_flags & address::SOCK_NONBLOCK != 0 {
            O_NONBLOCK
        } else {
            0
        }
        | if sock_flags & address::SOCK_CLOEXEC != 0 {
            O_CLOEXEC
        } else {
            0
        }
}

/// socket(2).
pub fn socket(host: &impl Host, domain: usize, kind: usize, protocol: usize) -> isize {
    answer(
        address::socket_flags(low32(domain), low32(kind), low32(protocol))
            .and_then(|flags| host.install(Object::Socket(Socket::new()), open_flags(flags))),
    )
}

/// The address at `addr` (`len` bytes).
fn address_at(host: &impl Host, addr: usize, len: usize) -> Result<core::net::SocketAddrV4, isize> {
    // Linux refuses more than `sizeof(struct sockaddr_storage)`.
    if len > 128 {
        return Err(EINVAL);
    }
    address::parse(host.bytes(addr, len)?)
}

/// Writes `value`'s bytes to a (buffer, length pointer) pair as Linux
/// does: at most the buffer's length, and the full length in `*len_addr`.
fn put_sized(host: &impl Host, addr: usize, len_addr: usize, value: &[u8]) -> Result<(), isize> {
    if len_addr == 0 {
        return Err(EFAULT);
    }
    let room = usize::try_from(get_u32(host, len_addr)?.cast_signed()).map_err(|_| EINVAL)?;
    let count = room.min(value.len());
    put(host, addr, &value[..count])?;
    let full = u32::try_from(value.len()).unwrap_or(u32::MAX);
    put(host, len_addr, &full.to_ne_bytes())
}

/// bind(2).
pub fn bind(host: &impl Host, fd: usize, addr: usize, len: usize) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, _)| {
        socket.bind(address_at(host, addr, len)?)?;
        Ok(0)
    }))
}

/// listen(2).
pub fn listen(host: &impl Host, fd: usize, backlog: usize) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, _)| {
        socket.listen(low32(backlog).cast_signed())?;
        Ok(0)
    }))
}

/// accept4(2) (accept(2) has no flags).
pub fn accept4(host: &impl Host, fd: usize, addr: usize, len_addr: usize, flags: usize) -> isize {
    let flags = low32(flags);
    if flags & !(address::SOCK_NONBLOCK | address::SOCK_CLOEXEC) != 0 {
        return -EINVAL;
    }
    answer(socket_of(host, fd).and_then(|(socket, nonblocking)| {
        // As Linux's do_accept: a free descriptor first (EMFILE leaves
        // the connection queued), then the connection, then the address;
        // if the address cannot be written the new descriptor is closed
        // (and the connection with it).
        let object = Object::Socket(Rc::clone(&socket));
        let (accepted, peer) = blocking(host, &object, nonblocking, || {
            // Checked after any wait: nothing runs between here and the
            // install, so the free descriptor is still free then.
            if !host.has_free() {
                return Err(EMFILE);
            }
            socket.accept()
        })?;
        let fd = host.install(Object::Socket(accepted), open_flags(flags))?;
        if addr != 0 {
            if let Err(errno) = put_sized(host, addr, len_addr, &address::encode(peer)) {
                host.close(fd);
                return Err(errno);
            }
        }
        Ok(fd)
    }))
}

/// connect(2): a blocking socket waits for the handshake's end.
pub fn connect(host: &impl Host, fd: usize, addr: usize, len: usize) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, nonblocking)| {
        let peer = address_at(host, addr, len)?;
        match socket.connect(peer) {
            Err(EINPROGRESS) if !nonblocking => {
                let object = Object::Socket(Rc::clone(&socket));
                while socket.is_connecting() {
                    wait_any(host, core::slice::from_ref(&object), None)?;
                }
                match socket.take_error() {
                    0 => Ok(0),
                    errno => Err(errno),
                }
            }
            Err(errno) => Err(errno),
            Ok(()) => Ok(0),
        }
    }))
}

/// getsockname(2).
pub fn getsockname(host: &impl Host, fd: usize, addr: usize, len_addr: usize) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, _)| {
        put_sized(host, addr, len_addr, &address::encode(socket.local_addr()))?;
        Ok(0)
    }))
}

/// getpeername(2).
pub fn getpeername(host: &impl Host, fd: usize, addr: usize, len_addr: usize) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, _)| {
        put_sized(host, addr, len_addr, &address::encode(socket.peer_addr()?))?;
        Ok(0)
    }))
}

/// setsockopt(2).
pub fn setsockopt(
    host: &impl Host,
    fd: usize,
    level: usize,
    name: usize,
    value: usize,
    len: usize,
) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, _)| {
        let len = usize::try_from(low32(len).cast_signed()).map_err(|_| EINVAL)?;
        socket.set_option(low32(level), low32(name), host.bytes(value, len.min(64))?)?;
        Ok(0)
    }))
}

/// getsockopt(2).
pub fn getsockopt(
    host: &impl Host,
    fd: usize,
    level: usize,
    name: usize,
    value: usize,
    len_addr: usize,
) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, _)| {
        let bytes = socket.option(low32(level), low32(name))?;
        put_sized(host, value, len_addr, &bytes)?;
        Ok(0)
    }))
}

/// shutdown(2).
pub fn shutdown(host: &impl Host, fd: usize, how: usize) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, _)| {
        socket.shutdown(low32(how))?;
        Ok(0)
    }))
}

/// recvfrom(2) (recv(2)): `MSG_PEEK` and `MSG_DONTWAIT` are honoured;
/// the source address, if asked for, is the peer's.
pub fn recvfrom(
    host: &impl Host,
    fd: usize,
    buf: usize,
    len: usize,
    flags: usize,
    addr: usize,
    len_addr: usize,
) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, nonblocking)| {
        let buf = host.bytes_mut(buf, len.min(MAX_RW_COUNT))?;
        let object = Object::Socket(Rc::clone(&socket));
        let peek = flags & MSG_PEEK != 0;
        let nonblocking = nonblocking || flags & MSG_DONTWAIT != 0;
        let count = blocking(host, &object, nonblocking, || socket.recv(buf, peek))?;
        if addr != 0 {
            if let Ok(peer) = socket.peer_addr() {
                put_sized(host, addr, len_addr, &address::encode(peer))?;
            }
        }
        Ok(count)
    }))
}

/// sendto(2) (send(2)): a connected socket's destination is its peer,
/// so an address given is ignored, as Linux does for TCP.
pub fn sendto(host: &impl Host, fd: usize, buf: usize, len: usize, flags: usize) -> isize {
    answer(socket_of(host, fd).and_then(|(socket, nonblocking)| {
        let bytes = host.bytes(buf, len.min(MAX_RW_COUNT))?;
        let named = Named {
            object: Object::Socket(socket),
            nonblocking: nonblocking || flags & MSG_DONTWAIT != 0,
        };
        blocking::write(host, &named, bytes)
    }))
}
