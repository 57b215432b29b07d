//! The native backend: each call this slice provides, by number; `None`
//! for the rest, which the dispatcher answers `ENOSYS` with a log line.

use ebb_posix::errno::EINVAL;
use ebb_posix::sysno::nr;
use ebb_posix::{Backend, Group, SysCall};

use super::{clock, console, memory, process};

/// Ebbflow natively.
pub struct Native;

impl Backend for Native {
    fn serve(&self, call: &SysCall, _group: Group) -> Option<isize> {
        let [a, b, c, d, _e, _f] = call.args;
        let result = match call.number {
            // memory
            nr::BRK => memory::brk(a),
            nr::MMAP => memory::mmap(b, d),
            nr::MUNMAP => memory::munmap(a, b),
            nr::MREMAP => memory::mremap(a, b, c, d),
            nr::MADVISE => memory::madvise(a, b, c),
            nr::MPROTECT => memory::mprotect(a),
            // time
            nr::CLOCK_GETTIME => clock::clock_gettime(a, b),
            nr::CLOCK_GETRES => clock::clock_getres(a, b),
            nr::GETTIMEOFDAY => clock::gettimeofday(a),
            nr::TIME => clock::time(a),
            nr::NANOSLEEP => clock::nanosleep(a),
            nr::CLOCK_NANOSLEEP => clock::clock_nanosleep(a, b, c),
            // standard streams
            nr::WRITE => console::write(a, b, c),
            nr::WRITEV => console::writev(a, b, c),
            nr::READ => console::read(a),
            nr::IOCTL => console::ioctl(a),
            nr::LSEEK => console::lseek(a),
            nr::CLOSE => console::close(a)?,
            // process
            nr::GETPID | nr::GETTID => process::PID,
            nr::GETPPID | nr::GETUID | nr::GETEUID | nr::GETGID | nr::GETEGID => 0,
            nr::UNAME => process::uname(a),
            nr::GETRANDOM => process::getrandom(a, b)?,
            nr::GETRLIMIT => process::getrlimit(a, b),
            nr::PRLIMIT64 => process::prlimit64(a, b, c, d),
            nr::GETRUSAGE => process::getrusage(b),
            nr::EXIT | nr::EXIT_GROUP => exit(a),
            // threads, single-threaded: the main thread's id, no robust
            // futexes to clean up, no signals to block
            nr::SET_TID_ADDRESS => process::PID,
            nr::SET_ROBUST_LIST => {
                if b == 24 {
                    0
                } else {
                    -EINVAL
                }
            }
            nr::ARCH_PRCTL => process::arch_prctl(a, b),
            nr::RT_SIGPROCMASK => process::rt_sigprocmask(c, d),
            nr::SCHED_YIELD => 0,
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
fn exit(code: usize) -> ! {
    // Linux keeps the low 8 bits (exit(3): `status & 0377`).
    ebb_native::exit(i32::from(code.to_le_bytes()[0]))
}
