//! The program's calls: those on Ebbflow's objects are served here (the
//! socket and event groups, and the descriptor calls on an object's
//! number); every other call passes to Linux as the hosted personality
//! passes it (`ebb_posix_hosted::linux`).

use ebb_posix::errno::{EINVAL, ENOTTY, ESPIPE};
use ebb_posix::sysno::nr;
use ebb_posix::{Backend, Group, SysCall};
use ebb_posix_files::layout::{stat_bytes, StatFields};
use ebb_posix_files::table::OBJECT_DEVICE;
use ebb_posix_hosted::linux::Linux;
use ebb_posix_objects::calls::{
    answer, blocking, events, get, get_timespec, get_u32, io, low32, put, sockets, Host, Named,
};

use crate::descriptors::is_object;
use crate::host::{self, UserStackHost};
use crate::linux;

/// ioctl(2) requests any descriptor takes
/// (`include/uapi/asm-generic/ioctls.h`).
const FIONBIO: usize = 0x5421;
const FIONCLEX: usize = 0x5450;
const FIOCLEX: usize = 0x5451;
/// clock_nanosleep(2)'s flag for an absolute time.
const TIMER_ABSTIME: usize = 1;
/// The clocks a relative sleep may name (`CLOCK_REALTIME`,
/// `CLOCK_MONOTONIC`, `CLOCK_BOOTTIME`): a duration on any of them.
const SLEEP_CLOCKS: [usize; 3] = [0, 1, 7];

/// The program's calls: its main function's, and other threads' calls
/// on objects, shipped to core 0 (`remote.rs`).
pub struct Program;

impl Backend for Program {
    fn serve(&self, call: &SysCall, group: Group) -> Option<isize> {
        let host = &UserStackHost;
        let [a, b, c, d, e, f] = call.args;
        let result = match call.number {
            // sockets: every one made is on Ebbflow's stack
            nr::SOCKET => sockets::socket(host, a, b, c),
            nr::BIND if is_object(a) => sockets::bind(host, a, b, c),
            nr::LISTEN if is_object(a) => sockets::listen(host, a, b),
            nr::ACCEPT if is_object(a) => sockets::accept4(host, a, b, c, 0),
            nr::ACCEPT4 if is_object(a) => sockets::accept4(host, a, b, c, d),
            nr::CONNECT if is_object(a) => sockets::connect(host, a, b, c),
            nr::GETSOCKNAME if is_object(a) => sockets::getsockname(host, a, b, c),
            nr::GETPEERNAME if is_object(a) => sockets::getpeername(host, a, b, c),
            nr::SETSOCKOPT if is_object(a) => sockets::setsockopt(host, a, b, c, d, e),
            nr::GETSOCKOPT if is_object(a) => sockets::getsockopt(host, a, b, c, d, e),
            nr::SHUTDOWN if is_object(a) => sockets::shutdown(host, a, b),
            nr::RECVFROM if is_object(a) => sockets::recvfrom(host, a, b, c, d, e, f),
            nr::SENDTO if is_object(a) => sockets::sendto(host, a, b, c, d),
            // events: every epoll set, eventfd and pipe made is ours
            nr::EPOLL_CREATE => events::epoll_create(host, a),
            nr::EPOLL_CREATE1 => events::epoll_create1(host, a),
            nr::EPOLL_CTL => events::epoll_ctl(host, a, b, c, d),
            nr::EPOLL_WAIT | nr::EPOLL_PWAIT => events::epoll_wait(host, a, b, c, d),
            nr::EVENTFD2 => events::eventfd2(host, a, b),
            nr::PIPE => events::pipe2(host, a, 0),
            nr::PIPE2 => events::pipe2(host, a, b),
            nr::POLL if polls_an_object(a, b) => events::poll_millis(host, a, b, c),
            nr::PPOLL if polls_an_object(a, b) => events::ppoll(host, a, b, c),
            // descriptor calls on an object's number
            nr::READ if is_object(a) => read(a, b, c, true),
            nr::WRITE if is_object(a) => write(a, b, c, true),
            nr::READV if is_object(a) => {
                io::vectored(host, b, c, |at, len, wait| read(a, at, len, wait), false)
            }
            nr::WRITEV if is_object(a) => {
                io::vectored(host, b, c, |at, len, wait| write(a, at, len, wait), true)
            }
            nr::CLOSE if is_object(a) => match host::with(|table| table.close(a)) {
                Ok(released) => {
                    host::release(released);
                    0
                }
                Err(errno) => -errno,
            },
            nr::DUP if is_object(a) => answer(host::with(|table| table.duplicate(a, 0, false))),
            nr::DUP2 if a == b && is_object(a) => isize::try_from(a).unwrap_or(isize::MAX),
            nr::DUP2 if is_object(a) || is_object(b) => dup3(a, b, 0),
            nr::DUP3 if is_object(a) || is_object(b) => dup3(a, b, c),
            nr::FCNTL if is_object(a) => fcntl(a, b, c),
            nr::FSTAT if is_object(a) => fstat(a, b),
            nr::IOCTL if is_object(a) => ioctl(a, b, c),
            nr::LSEEK | nr::PREAD64 | nr::PWRITE64 if is_object(a) => -ESPIPE,
            nr::FSYNC | nr::FDATASYNC | nr::FTRUNCATE if is_object(a) => -EINVAL,
            // Linux changes a socket inode's mode and owner, which nothing
            // reads; the placeholder must not pass it to /dev/null.
            nr::FCHMOD | nr::FCHOWN if is_object(a) => 0,
            // Other calls on an object (sendmsg, recvmsg, ...): not
            // provided, as natively.
            nr::SENDMSG | nr::RECVMSG | nr::GETDENTS64 if is_object(a) => return None,
            // A sleep parks the program's main function, so that the
            // stack goes on (ARP, retransmissions, connections) meanwhile.
            nr::NANOSLEEP => match sleep(a) {
                Some(result) => result,
                None => return Linux.serve(call, group),
            },
            nr::CLOCK_NANOSLEEP if b & TIMER_ABSTIME == 0 && SLEEP_CLOCKS.contains(&a) => {
                match sleep(c) {
                    Some(result) => result,
                    None => return Linux.serve(call, group),
                }
            }
            // The program's main function runs on core 0's thread, not
            // the process's first one; to the program it is the main
            // thread, whose id is the process's (gettid(2)). Only the
            // system call answers so: musl's gettid() reads the thread's
            // own record (core 0's id), and tkill(2) with the process id
            // reaches the first thread, not `main`.
            nr::GETTID => {
                let getpid = SysCall {
                    number: nr::GETPID,
                    args: [0; 6],
                };
                return Linux.serve(&getpid, group);
            }
            // The process ends: every connection on our stack is closed
            // first, as Linux closes a process's sockets, so that peers
            // hear of it (a FIN, or a reset for unread data).
            nr::EXIT_GROUP => {
                close_everything();
                return Linux.serve(call, group);
            }
            // A fork's child would share the TAP device and every
            // connection's state with its parent: not provided (fork(2)
            // itself is outside the personality's calls), so Redis's
            // BGSAVE answers its own error, as natively.
            nr::CLONE if ebb_posix_hosted::linux::is_fork_like(a, b) => return None,
            _ => return Linux.serve(call, group),
        };
        Some(result)
    }

    fn log(&self, line: &str) {
        ebb_posix_hosted::linux::write_stderr_line(line);
    }
}

/// nanosleep(2) of the `struct timespec` at `request`, parked on the
/// loop's timers; `None` when the caller cannot park. Never interrupted
/// (a signal's handler runs on another stack), so the time left is not
/// written.
fn sleep(request: usize) -> Option<isize> {
    let nanos = match get_timespec(&UserStackHost, request) {
        Ok(nanos) => nanos,
        Err(errno) => return Some(-errno),
    };
    UserStackHost
        .wait(ebb_event::sleep(core::time::Duration::from_nanos(nanos)))
        .map(|()| 0)
}

/// Releases every object and lets the loop run once, so that the
/// frames their release sends (FINs, resets) leave before the process
/// ends.
fn close_everything() {
    let objects = host::with(crate::descriptors::Descriptors::take_all);
    for object in objects {
        ebb_posix_objects::object::release(&object);
    }
    blocking::yield_to_loop(&UserStackHost);
}

/// Whether the `count` pollfds at `fds` name one of our objects (else
/// Linux polls them all, as it would).
fn polls_an_object(fds: usize, count: usize) -> bool {
    // An array that is no array is Linux's to refuse (EFAULT, EINVAL).
    if count > ebb_posix_files::table::MAX_FDS
        || ebb_posix_objects::calls::check_range(fds, count * events::POLLFD_BYTES).is_err()
    {
        return false;
    }
    (0..count).any(|index| {
        get::<4>(
            &UserStackHost,
            fds.wrapping_add(index * events::POLLFD_BYTES),
        )
        .map(i32::from_ne_bytes)
        .ok()
        .and_then(|fd| usize::try_from(fd).ok())
        .is_some_and(is_object)
    })
}

/// The object `fd` names, non-blocking as well when `may_block` is not.
fn named(fd: usize, may_block: bool) -> Result<Named, isize> {
    let mut named = UserStackHost.named(fd, ebb_posix::errno::EBADF)?;
    named.nonblocking |= !may_block;
    Ok(named)
}

/// read(2) of an object; it waits only if `may_block` (readv(2)'s
/// later buffers take what is there).
fn read(fd: usize, addr: usize, len: usize, may_block: bool) -> isize {
    let host = &UserStackHost;
    answer(named(fd, may_block).and_then(|named| {
        let buf = host.bytes_mut(addr, len.min(ebb_posix_objects::calls::MAX_RW_COUNT))?;
        blocking::read(host, &named, buf)
    }))
}

/// write(2) of an object; it waits only if `may_block`.
fn write(fd: usize, addr: usize, len: usize, may_block: bool) -> isize {
    let host = &UserStackHost;
    answer(named(fd, may_block).and_then(|named| {
        let bytes = host.bytes(addr, len.min(ebb_posix_objects::calls::MAX_RW_COUNT))?;
        blocking::write(host, &named, bytes)
    }))
}

/// dup2(2) and dup3(2) where either number names an object.
fn dup3(old: usize, new: usize, flags: usize) -> isize {
    match host::with(|table| table.dup3(old, new, flags)) {
        Ok(released) => {
            host::release(released);
            isize::try_from(new).unwrap_or(isize::MAX)
        }
        Err(errno) => -errno,
    }
}

/// fcntl(2) of an object's descriptor: status flags here, descriptor
/// flags on the placeholder, duplicates of both.
fn fcntl(fd: usize, command: usize, arg: usize) -> isize {
    let Some(description) = host::with(|table| table.get(fd)) else {
        return -ebb_posix::errno::EBADF;
    };
    match command {
        linux::F_GETFL => isize::try_from(description.status_flags()).unwrap_or(0),
        linux::F_SETFL => {
            description.set_status_flags(low32(arg));
            0
        }
        linux::F_GETFD | linux::F_SETFD => linux::fcntl(fd, command, arg),
        linux::F_DUPFD | linux::F_DUPFD_CLOEXEC => answer(host::with(|table| {
            table.duplicate(fd, arg, command == linux::F_DUPFD_CLOEXEC)
        })),
        _ => -EINVAL,
    }
}

/// fstat(2) of an object's descriptor: its kind's mode, as Linux shows
/// a socket, a pipe or an anonymous inode.
fn fstat(fd: usize, out: usize) -> isize {
    let Some(description) = host::with(|table| table.get(fd)) else {
        return -ebb_posix::errno::EBADF;
    };
    let fields = StatFields {
        dev: OBJECT_DEVICE,
        ino: u64::try_from(description.object.identity()).unwrap_or(0),
        mode: description.object.kind().mode(),
        nlink: 1,
        size: 0,
    };
    answer(put(&UserStackHost, out, &stat_bytes(&fields)).map(|()| 0))
}

/// ioctl(2) of an object's descriptor: `FIONBIO` sets or clears
/// `O_NONBLOCK`, `FIOCLEX`/`FIONCLEX` act on the placeholder (the
/// descriptor's flag); nothing else is a request these objects take.
fn ioctl(fd: usize, request: usize, arg: usize) -> isize {
    let request = low32(request) as usize;
    if request == FIOCLEX || request == FIONCLEX {
        let flag = if request == FIOCLEX {
            linux::FD_CLOEXEC
        } else {
            0
        };
        return linux::fcntl(fd, linux::F_SETFD, flag);
    }
    if request != FIONBIO {
        return -ENOTTY;
    }
    let Some(description) = host::with(|table| table.get(fd)) else {
        return -ebb_posix::errno::EBADF;
    };
    match get_u32(&UserStackHost, arg) {
        Ok(on) => {
            let flags = description.status_flags();
            let nonblock = ebb_posix_files::table::O_NONBLOCK;
            description.set_status_flags(if on != 0 {
                flags | nonblock
            } else {
                flags & !nonblock
            });
            0
        }
        Err(errno) => -errno,
    }
}

/// A descriptor argument of `call` that names one of the main thread's
/// objects (a call from elsewhere that names one is shipped to core 0).
pub fn object_argument(call: &SysCall) -> Option<usize> {
    let [a, b, c, ..] = call.args;
    let candidates: &[usize] = match call.number {
        nr::DUP2 | nr::DUP3 | nr::SENDFILE => &[a, b],
        nr::NEWFSTATAT | nr::FCHMOD | nr::FCHOWN => &[a],
        nr::EPOLL_CTL => &[a, c],
        nr::READ
        | nr::WRITE
        | nr::CLOSE
        | nr::FSTAT
        | nr::LSEEK
        | nr::IOCTL
        | nr::PREAD64
        | nr::PWRITE64
        | nr::READV
        | nr::WRITEV
        | nr::DUP
        | nr::FCNTL
        | nr::FSYNC
        | nr::FDATASYNC
        | nr::FTRUNCATE
        | nr::GETDENTS64
        | nr::SENDTO
        | nr::RECVFROM
        | nr::SENDMSG
        | nr::RECVMSG
        | nr::SHUTDOWN
        | nr::BIND
        | nr::LISTEN
        | nr::ACCEPT
        | nr::ACCEPT4
        | nr::CONNECT
        | nr::GETSOCKNAME
        | nr::GETPEERNAME
        | nr::SETSOCKOPT
        | nr::GETSOCKOPT
        | nr::EPOLL_WAIT
        | nr::EPOLL_PWAIT => &[a],
        _ => &[],
    };
    candidates.iter().copied().find(|&fd| is_object(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host;
    use ebb_posix_files::table::O_RDWR;
    use ebb_posix_objects::eventfd::EventFd;
    use ebb_posix_objects::Object;
    use std::rc::Rc;

    #[test]
    fn another_threads_call_on_an_object_is_found_whichever_argument_names_it() {
        let fd =
            host::with(|table| table.install(Object::EventFd(Rc::new(EventFd::new(0, 0))), O_RDWR))
                .unwrap();
        let call = |number, args| SysCall { number, args };
        assert_eq!(
            object_argument(&call(nr::READ, [fd, 0, 0, 0, 0, 0])),
            Some(fd)
        );
        assert_eq!(
            object_argument(&call(nr::DUP2, [0, fd, 0, 0, 0, 0])),
            Some(fd)
        );
        assert_eq!(
            object_argument(&call(nr::EPOLL_CTL, [1, 1, fd, 0, 0, 0])),
            Some(fd)
        );
        assert_eq!(
            object_argument(&call(nr::GETPID, [fd, 0, 0, 0, 0, 0])),
            None
        );
        assert_eq!(object_argument(&call(nr::READ, [0, fd, 0, 0, 0, 0])), None);
        let released = host::with(|table| table.close(fd)).unwrap();
        assert!(released.is_some());
        assert_eq!(object_argument(&call(nr::READ, [fd, 0, 0, 0, 0, 0])), None);
    }
}
