//! The native backend: each call this slice provides, by number; `None`
//! for the rest, which the dispatcher answers `ENOSYS` with a log line.

use ebb_posix::errno::EINVAL;
use ebb_posix::sysno::nr;
use ebb_posix::{Backend, Group, SysCall};

use ebb_posix_objects::calls::{events, sockets};

use super::objects::NativeHost;
use super::{clock, files, memory, process, signals, threads};

/// `AT_FDCWD` as the raw argument the `*at` calls get.
const AT_FDCWD: usize = usize::MAX - 99;
/// unlinkat's flag for rmdir.
const AT_REMOVEDIR: usize = 0x200;

/// Ebbflow natively.
pub struct Native;

impl Backend for Native {
    fn serve(&self, call: &SysCall, _group: Group) -> Option<isize> {
        let [a, b, c, d, e, f] = call.args;
        let result = match call.number {
            // memory
            nr::BRK => memory::brk(a),
            nr::MMAP => memory::mmap(b, c, d),
            nr::MUNMAP => memory::munmap(a, b),
            nr::MREMAP => memory::mremap(a, b, c, d),
            nr::MADVISE => memory::madvise(a, b, c),
            nr::MPROTECT => memory::mprotect(a, b, c),
            // time
            nr::CLOCK_GETTIME => clock::clock_gettime(a, b),
            nr::CLOCK_GETRES => clock::clock_getres(a, b),
            nr::GETTIMEOFDAY => clock::gettimeofday(a),
            nr::TIME => clock::time(a),
            nr::NANOSLEEP => clock::nanosleep(a),
            nr::CLOCK_NANOSLEEP => clock::clock_nanosleep(a, b, c),
            // files and standard streams
            nr::READ => files::read(a, b, c),
            nr::WRITE => files::write(a, b, c),
            nr::READV => files::readv(a, b, c),
            nr::WRITEV => files::writev(a, b, c),
            nr::PREAD64 => files::pread(a, b, c, d),
            nr::PWRITE64 => files::pwrite(a, b, c, d),
            nr::LSEEK => files::lseek(a, b, c),
            nr::IOCTL => files::ioctl(a),
            nr::OPEN => files::open(AT_FDCWD, a, b, c),
            nr::OPENAT => files::open(a, b, c, d),
            nr::CLOSE => files::close(a),
            nr::FSTAT => files::fstat(a, b),
            nr::STAT | nr::LSTAT => files::stat_at(AT_FDCWD, a, b, 0),
            nr::NEWFSTATAT => files::stat_at(a, b, c, d),
            nr::ACCESS => files::access(AT_FDCWD, a),
            nr::FACCESSAT => files::access(a, b),
            nr::FTRUNCATE => files::ftruncate(a, b),
            nr::FSYNC | nr::FDATASYNC => files::fsync(a),
            nr::FCHOWN | nr::FCHMOD => files::fchange(a),
            nr::MKDIR => files::mkdir(AT_FDCWD, a, b),
            nr::MKDIRAT => files::mkdir(a, b, c),
            nr::UNLINK => files::unlink(AT_FDCWD, a, 0),
            nr::RMDIR => files::unlink(AT_FDCWD, a, AT_REMOVEDIR),
            nr::UNLINKAT => files::unlink(a, b, c),
            nr::RENAME => files::rename(AT_FDCWD, a, AT_FDCWD, b),
            nr::RENAMEAT => files::rename(a, b, c, d),
            nr::GETDENTS64 => files::getdents(a, b, c),
            nr::GETCWD => files::getcwd(a, b),
            nr::CHDIR => files::chdir(a),
            nr::DUP => files::dup(a),
            nr::DUP2 => files::dup2(a, b),
            nr::DUP3 => files::dup3(a, b, c),
            nr::FCNTL => files::fcntl(a, b, c),
            nr::UMASK => files::umask(a),
            // sockets: IPv4 TCP on Ebbflow's stack (`ebb_posix_objects::calls`)
            nr::SOCKET => sockets::socket(&NativeHost, a, b, c),
            nr::BIND => sockets::bind(&NativeHost, a, b, c),
            nr::LISTEN => sockets::listen(&NativeHost, a, b),
            nr::ACCEPT => sockets::accept4(&NativeHost, a, b, c, 0),
            nr::ACCEPT4 => sockets::accept4(&NativeHost, a, b, c, d),
            nr::CONNECT => sockets::connect(&NativeHost, a, b, c),
            nr::GETSOCKNAME => sockets::getsockname(&NativeHost, a, b, c),
            nr::GETPEERNAME => sockets::getpeername(&NativeHost, a, b, c),
            nr::SETSOCKOPT => sockets::setsockopt(&NativeHost, a, b, c, d, e),
            nr::GETSOCKOPT => sockets::getsockopt(&NativeHost, a, b, c, d, e),
            nr::SHUTDOWN => sockets::shutdown(&NativeHost, a, b),
            nr::RECVFROM => sockets::recvfrom(&NativeHost, a, b, c, d, e, f),
            nr::SENDTO => sockets::sendto(&NativeHost, a, b, c, d),
            // events: epoll, eventfd, pipes, poll (`ebb_posix_objects::calls`)
            nr::EPOLL_CREATE => events::epoll_create(&NativeHost, a),
            nr::EPOLL_CREATE1 => events::epoll_create1(&NativeHost, a),
            nr::EPOLL_CTL => events::epoll_ctl(&NativeHost, a, b, c, d),
            nr::EPOLL_WAIT | nr::EPOLL_PWAIT => events::epoll_wait(&NativeHost, a, b, c, d),
            nr::EVENTFD => events::eventfd2(&NativeHost, a, 0),
            nr::EVENTFD2 => events::eventfd2(&NativeHost, a, b),
            nr::PIPE => events::pipe2(&NativeHost, a, 0),
            nr::PIPE2 => events::pipe2(&NativeHost, a, b),
            nr::POLL => events::poll_millis(&NativeHost, a, b, c),
            nr::PPOLL => events::ppoll(&NativeHost, a, b, c),
            // process
            nr::GETPID => process::PID,
            nr::GETTID => threads::gettid(),
            nr::GETPPID | nr::GETUID | nr::GETEUID | nr::GETGID | nr::GETEGID => 0,
            nr::UNAME => process::uname(a),
            nr::GETRANDOM => process::getrandom(a, b)?,
            nr::GETRLIMIT => process::getrlimit(a, b),
            nr::PRLIMIT64 => process::prlimit64(a, b, c, d),
            nr::GETRUSAGE => process::getrusage(b),
            nr::EXIT_GROUP => exit(a),
            nr::EXIT => threads::exit_thread(a, None),
            // threads: stackful events (`threads.rs`); no robust futexes
            // to clean up (nothing dies holding one), no signals to block
            nr::FUTEX => threads::futex(a, b, c, d, e, f),
            nr::SET_TID_ADDRESS => threads::set_tid_address(a),
            nr::SET_ROBUST_LIST => {
                if b == 24 {
                    0
                } else {
                    -EINVAL
                }
            }
            nr::ARCH_PRCTL => process::arch_prctl(a, b),
            nr::PRCTL => process::prctl(a, b),
            nr::SYSINFO => process::sysinfo(a),
            // signals: set and read back, never delivered (`signals.rs`)
            nr::RT_SIGPROCMASK => signals::rt_sigprocmask(a, b, c, d),
            nr::RT_SIGACTION => signals::rt_sigaction(a, b, c, d),
            nr::SIGALTSTACK => signals::sigaltstack(a, b),
            nr::SETITIMER => signals::setitimer(a, b, c),
            nr::GETITIMER => signals::getitimer(a, b),
            nr::SCHED_YIELD => threads::sched_yield(),
            nr::SCHED_GETAFFINITY => process::sched_getaffinity(b, c),
            _ => return None,
        };
        Some(result)
    }

    fn log(&self, line: &str) {
        ebb_native::arch::x86_64::console::print(format_args!("{line}\n"));
    }
}

/// exit_group(2) (and exit(2) of the only thread): the program's exit
/// code is the image's, which `./ebb run` exits with. musl has flushed
/// its streams before it calls this.
///
/// QEMU's exit device carries codes 0 to 126 only, and the platform's own
/// failures use 101 to 103 (`ebb_boot_abi::exit`). So a code from 101 up
/// is also said on the console, and one above 126 leaves as 1.
pub(super) fn exit(code: usize) -> ! {
    // Linux keeps the low 8 bits (exit(3): `status & 0377`).
    let code = code.to_le_bytes()[0];
    if ebb_native::runtime::options().verbose {
        Native.log(&alloc::format!(
            "ebb-posix: the program took {} timer interrupts",
            ebb_native::ticks_taken()
        ));
    }
    if code > ebb_boot_abi::EXIT_PANIC - 1 {
        let leaves = if code > ebb_boot_abi::MAX_EXIT_CODE {
            1
        } else {
            code
        };
        Native.log(&alloc::format!(
            "ebb-posix: the program exited with {code} (the image exits with {leaves})"
        ));
        ebb_native::exit(i32::from(leaves));
    }
    ebb_native::exit(i32::from(code))
}
