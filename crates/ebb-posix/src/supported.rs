//! The system calls the personality serves, in the groups issue 18 names
//! them by. Natively each is implemented by the library OS; hosted each
//! passes to Linux. Every other number is answered `ENOSYS`
//! (`dispatch.rs`).
//!
//! Beyond the issue's lists, calls musl itself makes on the paths those
//! programs take are here too, since an `ENOSYS` there would log a line
//! in every program:
//! - `ioctl` (standard streams): musl's `__stdout_write` asks
//!   `TIOCGWINSZ` to choose line buffering for a terminal;
//! - `rt_sigprocmask` (threads): `pthread_create` blocks signals around
//!   `clone`;
//! - `mremap` (memory): musl's `realloc` of a large, mapped block;
//! - `rmdir`, `unlinkat`, `renameat`, `mkdirat`, `faccessat` (files): the
//!   `*at` forms of the listed calls;
//! - `getuid`, `geteuid`, `getgid`, `getegid`, `getppid` (process), and
//!   `fchown`, `fchmod` (files): SQLite's Unix VFS asks `geteuid` and, as
//!   root, gives a new journal the database's owner and mode;
//! - for Redis (issue 19), besides its groups (sockets, events, signals):
//!   `umask` (files), `prctl` (threads: `PR_SET_NAME` names its
//!   background threads), `sysinfo` (process: the machine's memory, for
//!   `maxmemory` warnings), `setitimer`/`getitimer` (signals: its
//!   watchdog, disarmed at start), `kill`, `tkill` and `tgkill` (signals:
//!   its crash report re-raises the signal; musl's `raise`, `abort` and
//!   `pthread_kill` use `tkill`), and `rt_sigreturn`, which musl's
//!   patched `__restore_rt` makes when a handler returns (hosted: from
//!   the frame it passes, `ebb-posix-hosted`'s `raw.rs`).
//!
//! Natively, sockets and events are not served yet (their calls are
//! `ENOSYS`, `backend.rs`), and signals are set and read back but never
//! delivered (`kill`, `tkill` and `tgkill` stay `ENOSYS`: there is no other
//! process, and raising one would deliver nothing); hosted, every call
//! listed here passes to Linux. `fork` and `vfork` stay unserved both ways (issue 19: Redis's
//! BGSAVE then answers with its own error).

use crate::sysno::nr;

/// A group of system calls, as issue 18 lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Group {
    /// brk, anonymous mmap/munmap/mprotect/madvise, mremap.
    Memory,
    /// Clocks and sleeps.
    Time,
    /// Files, directories and file descriptors.
    Files,
    /// clone, futex, TLS and scheduling.
    Threads,
    /// Process identity, limits, randomness and exit.
    Process,
    /// `ioctl` on the standard streams.
    Streams,
    /// Sockets (issue 19): TCP over IPv4 and IPv6, Unix sockets hosted.
    Sockets,
    /// Readiness and wake-ups (issue 19): epoll, eventfd, pipes, poll.
    Events,
    /// Signal handling (issue 19): hosted, Linux's; natively handlers,
    /// masks, the alternate stack and timers are set and read back, and
    /// nothing is ever delivered.
    Signals,
}

/// The group call `number` belongs to, or `None` if the personality does
/// not serve it.
#[must_use]
pub fn group_of(number: usize) -> Option<Group> {
    let group = match number {
        nr::BRK | nr::MMAP | nr::MUNMAP | nr::MPROTECT | nr::MADVISE | nr::MREMAP => Group::Memory,
        nr::CLOCK_GETTIME
        | nr::CLOCK_GETRES
        | nr::GETTIMEOFDAY
        | nr::TIME
        | nr::NANOSLEEP
        | nr::CLOCK_NANOSLEEP => Group::Time,
        nr::OPEN
        | nr::OPENAT
        | nr::CLOSE
        | nr::READ
        | nr::WRITE
        | nr::PREAD64
        | nr::PWRITE64
        | nr::READV
        | nr::WRITEV
        | nr::LSEEK
        | nr::FSTAT
        | nr::STAT
        | nr::LSTAT
        | nr::NEWFSTATAT
        | nr::FSYNC
        | nr::FDATASYNC
        | nr::FTRUNCATE
        | nr::UNLINK
        | nr::UNLINKAT
        | nr::RENAME
        | nr::RENAMEAT
        | nr::MKDIR
        | nr::MKDIRAT
        | nr::RMDIR
        | nr::GETDENTS64
        | nr::FCNTL
        | nr::ACCESS
        | nr::FACCESSAT
        | nr::DUP
        | nr::DUP2
        | nr::DUP3
        | nr::GETCWD
        | nr::CHDIR
        | nr::FCHOWN
        | nr::FCHMOD
        | nr::UMASK => Group::Files,
        nr::CLONE
        | nr::FUTEX
        | nr::SET_TID_ADDRESS
        | nr::SET_ROBUST_LIST
        | nr::ARCH_PRCTL
        | nr::SCHED_YIELD
        | nr::SCHED_GETAFFINITY
        | nr::GETTID
        | nr::EXIT
        | nr::RT_SIGPROCMASK
        | nr::PRCTL => Group::Threads,
        nr::GETPID
        | nr::GETPPID
        | nr::GETUID
        | nr::GETEUID
        | nr::GETGID
        | nr::GETEGID
        | nr::UNAME
        | nr::GETRANDOM
        | nr::GETRLIMIT
        | nr::PRLIMIT64
        | nr::GETRUSAGE
        | nr::SYSINFO
        | nr::EXIT_GROUP => Group::Process,
        nr::IOCTL => Group::Streams,
        nr::SOCKET
        | nr::BIND
        | nr::LISTEN
        | nr::ACCEPT
        | nr::ACCEPT4
        | nr::CONNECT
        | nr::SETSOCKOPT
        | nr::GETSOCKOPT
        | nr::GETSOCKNAME
        | nr::GETPEERNAME
        | nr::SHUTDOWN
        | nr::RECVFROM
        | nr::SENDTO
        | nr::RECVMSG
        | nr::SENDMSG => Group::Sockets,
        nr::EPOLL_CREATE
        | nr::EPOLL_CREATE1
        | nr::EPOLL_CTL
        | nr::EPOLL_WAIT
        | nr::EPOLL_PWAIT
        | nr::EVENTFD2
        | nr::PIPE
        | nr::PIPE2
        | nr::POLL
        | nr::PPOLL => Group::Events,
        nr::RT_SIGACTION
        | nr::RT_SIGRETURN
        | nr::SIGALTSTACK
        | nr::SETITIMER
        | nr::GETITIMER
        | nr::KILL
        | nr::TKILL
        | nr::TGKILL => Group::Signals,
        _ => return None,
    };
    Some(group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sysno;

    #[test]
    fn the_issue_groups_are_served() {
        assert_eq!(group_of(nr::BRK), Some(Group::Memory));
        assert_eq!(group_of(nr::CLOCK_NANOSLEEP), Some(Group::Time));
        assert_eq!(group_of(nr::GETDENTS64), Some(Group::Files));
        assert_eq!(group_of(nr::FUTEX), Some(Group::Threads));
        assert_eq!(group_of(nr::EXIT_GROUP), Some(Group::Process));
        assert_eq!(group_of(nr::IOCTL), Some(Group::Streams));
    }

    #[test]
    fn the_calls_redis_makes_are_served() {
        assert_eq!(group_of(nr::SOCKET), Some(Group::Sockets));
        assert_eq!(group_of(nr::ACCEPT4), Some(Group::Sockets));
        assert_eq!(group_of(nr::EPOLL_WAIT), Some(Group::Events));
        assert_eq!(group_of(nr::PIPE2), Some(Group::Events));
        assert_eq!(group_of(nr::EVENTFD2), Some(Group::Events));
        assert_eq!(group_of(nr::RT_SIGACTION), Some(Group::Signals));
        assert_eq!(group_of(nr::UMASK), Some(Group::Files));
        assert_eq!(
            group_of(nr::TKILL),
            Some(Group::Signals),
            "musl's raise and abort"
        );
    }

    #[test]
    fn new_processes_are_not() {
        for number in [nr::FORK, nr::VFORK, nr::EXECVE, nr::ACCT] {
            assert_eq!(group_of(number), None, "{:?}", sysno::name(number));
        }
        assert_eq!(group_of(335), None);
        assert_eq!(group_of(usize::MAX), None);
    }

    #[test]
    fn every_served_call_has_a_name() {
        let served = (0..512).filter(|&number| group_of(number).is_some());
        for number in served {
            assert!(sysno::name(number).is_some(), "{number}");
        }
    }
}
