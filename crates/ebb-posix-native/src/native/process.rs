//! The process group and the per-process part of the threads group
//! natively: ids, uname, getrandom, limits, usage; TLS through the FS
//! base, signal masks, affinity.
//!
//! The program is process 1 and its main thread thread 1, run as root
//! (ids 0): the image is its own machine.

use ebb_posix::errno::{EINVAL, EPERM, ESRCH};
use x86_64::registers::model_specific::FsBase;
use x86_64::VirtAddr;

use spin::Mutex;

use super::{random, threads, user};

/// The program's process id (and its main thread's id).
pub const PID: isize = 1;

/// getrlimit's resources that have a limit here (`asm-generic/resource.h`).
const RLIMIT_STACK: usize = 3;
const RLIMIT_NOFILE: usize = 7;
const RLIM_INFINITY: u64 = u64::MAX;
/// The main thread's stack (`threads.rs`).
const STACK_LIMIT: u64 = threads::MAIN_STACK_BYTES as u64;
/// Descriptors: as many as the file table holds.
const OPEN_FILES_LIMIT: u64 = ebb_posix_files::table::MAX_FDS as u64;

/// arch_prctl's codes (`asm/prctl.h`).
const ARCH_SET_FS: usize = 0x1002;
const ARCH_GET_FS: usize = 0x1003;

fn done(outcome: Result<(), isize>) -> isize {
    match outcome {
        Ok(()) => 0,
        Err(errno) => -errno,
    }
}

/// uname(2): `struct utsname`, six fields of 65 bytes.
pub fn uname(addr: usize) -> isize {
    const FIELD: usize = 65;
    let fields: [&[u8]; 6] = [
        b"Ebbflow",
        b"ebbflow",
        env!("CARGO_PKG_VERSION").as_bytes(),
        b"ebbflow native",
        b"x86_64",
        b"(none)",
    ];
    let buffer = match user::bytes_mut(addr, FIELD * fields.len()) {
        Ok(buffer) => buffer,
        Err(errno) => return -errno,
    };
    buffer.fill(0);
    for (slot, field) in buffer.chunks_mut(FIELD).zip(fields) {
        slot[..field.len()].copy_from_slice(field);
    }
    0
}

/// getrandom(2) from `random.rs`'s sources; without any (no RDRAND and
/// no launcher seed) the call is not provided (`None`: ENOSYS and a log
/// line).
pub fn getrandom(addr: usize, len: usize) -> Option<isize> {
    // Linux returns at most 32 MiB - 1 per call (getrandom(2)).
    let len = len.min((32 << 20) - 1);
    let buffer = match user::bytes_mut(addr, len) {
        Ok(buffer) => buffer,
        Err(errno) => return Some(-errno),
    };
    let filled = random::fill(buffer)?;
    if filled == 0 && len > 0 {
        return Some(-ebb_posix::errno::EAGAIN);
    }
    Some(isize::try_from(filled).unwrap_or(isize::MAX))
}

fn limit_of(resource: usize) -> Option<[u64; 2]> {
    match resource {
        RLIMIT_STACK => Some([STACK_LIMIT, STACK_LIMIT]),
        RLIMIT_NOFILE => Some([OPEN_FILES_LIMIT, OPEN_FILES_LIMIT]),
        // Linux's RLIM_NLIMITS is 16.
        0..=15 => Some([RLIM_INFINITY, RLIM_INFINITY]),
        _ => None,
    }
}

/// Limits the program lowered (prlimit64, setrlimit), by resource.
static LOWERED: Mutex<[Option<[u64; 2]>; 16]> = Mutex::new([None; 16]);

/// `resource`'s limits now: as lowered, else the image's.
fn current_limit(resource: usize) -> Option<[u64; 2]> {
    let lowered = LOWERED.lock().get(resource).copied().flatten();
    lowered.or_else(|| limit_of(resource))
}

/// getrlimit(2).
pub fn getrlimit(resource: usize, addr: usize) -> isize {
    let Some(limit) = current_limit(resource) else {
        return -EINVAL;
    };
    done(user::put(addr, limit))
}

/// prlimit64(2) of this process (setrlimit and getrlimit in musl): a new
/// limit may lower the current ones (soft at most hard, as Linux
/// checks), which getrlimit then reports; nothing enforces them, as
/// nothing here could use more. Raising a hard limit above the image's
/// is `EPERM`: the image cannot give more stack or descriptors than it
/// has.
pub fn prlimit64(pid: usize, resource: usize, new: usize, old: usize) -> isize {
    if pid != 0 && pid != PID.unsigned_abs() {
        return -ESRCH;
    }
    let (Some(limit), Some(ceiling)) = (current_limit(resource), limit_of(resource)) else {
        return -EINVAL;
    };
    // As Linux: the new limit is read and checked first, the old one
    // written only when the call succeeds, and before the new one takes
    // effect (so `new` and `old` may be the same struct).
    let wanted = if new == 0 {
        None
    } else {
        let [soft, hard] = match user::get::<[u64; 2]>(new) {
            Ok(wanted) => wanted,
            Err(errno) => return -errno,
        };
        if soft > hard {
            return -EINVAL;
        }
        if hard > ceiling[1] {
            return -EPERM;
        }
        Some([soft, hard])
    };
    if old != 0 {
        if let Err(errno) = user::put(old, limit) {
            return -errno;
        }
    }
    if let (Some(wanted), Some(slot)) = (wanted, LOWERED.lock().get_mut(resource)) {
        *slot = Some(wanted);
    }
    0
}

/// getrusage(2): `struct rusage` (144 bytes on x86_64), all zero: the
/// image does not account CPU time per program.
pub fn getrusage(addr: usize) -> isize {
    match user::bytes_mut(addr, 144) {
        Ok(usage) => {
            usage.fill(0);
            0
        }
        Err(errno) => -errno,
    }
}

/// arch_prctl(2): the FS base is the C thread pointer (musl's
/// `__set_thread_area`); the platform's own code does not use FS.
pub fn arch_prctl(code: usize, addr: usize) -> isize {
    match code {
        ARCH_SET_FS => {
            // Linux refuses a non-canonical base with EPERM.
            let Ok(base) = VirtAddr::try_new(addr as u64) else {
                return -EPERM;
            };
            FsBase::write(base);
            0
        }
        ARCH_GET_FS => done(user::put(addr, FsBase::read().as_u64())),
        _ => -EINVAL,
    }
}

/// prctl(2)'s options for the thread's name (`linux/prctl.h`).
const PR_SET_NAME: usize = 15;
const PR_GET_NAME: usize = 16;
/// A thread's name: 16 bytes with the terminating NUL (`TASK_COMM_LEN`).
const NAME_BYTES: usize = 16;

/// The name prctl(PR_SET_NAME) gave: one for the program (Linux keeps one
/// per thread; here it is only ever read back, by whoever set it).
static NAME: Mutex<[u8; NAME_BYTES]> = Mutex::new(*b"c-program\0\0\0\0\0\0\0");

/// prctl(2): the thread's name; every other option is `EINVAL`, as Linux
/// answers an option it does not know.
pub fn prctl(option: usize, addr: usize) -> isize {
    match option {
        PR_SET_NAME => {
            // Up to 15 bytes of a NUL-terminated string, cut there as
            // Linux cuts it.
            let mut name = [0u8; NAME_BYTES];
            for (at, slot) in name.iter_mut().take(NAME_BYTES - 1).enumerate() {
                match user::get::<u8>(addr + at) {
                    Ok(0) => break,
                    Ok(byte) => *slot = byte,
                    Err(errno) => return -errno,
                }
            }
            *NAME.lock() = name;
            0
        }
        PR_GET_NAME => done(user::put(addr, *NAME.lock())),
        _ => -EINVAL,
    }
}

/// sysinfo(2): `struct sysinfo` (x86_64: 112 bytes). The memory is the
/// page allocator's (in units of one byte), the uptime the monotonic
/// clock's; one process, no swap, no load.
pub fn sysinfo(addr: usize) -> isize {
    let mut info = [0u8; 112];
    let uptime = ebb_native::monotonic_nanos() / 1_000_000_000;
    let (free, used) = ebb_native::page_allocator_bytes();
    let total = (free + used) as u64;
    let fields: [(usize, &[u8]); 5] = [
        (0, &uptime.to_le_bytes()),
        (32, &total.to_le_bytes()),
        (40, &(free as u64).to_le_bytes()),
        (80, &1u16.to_le_bytes()),
        (104, &1u32.to_le_bytes()),
    ];
    for (at, bytes) in fields {
        info[at..at + bytes.len()].copy_from_slice(bytes);
    }
    done(user::put(addr, info))
}

/// sched_getaffinity(2): the program runs on one CPU; Linux returns the
/// bytes of mask it wrote.
pub fn sched_getaffinity(size: usize, addr: usize) -> isize {
    if size < 8 || !size.is_multiple_of(8) {
        return -EINVAL;
    }
    match user::put(addr, 1u64) {
        Ok(()) => 8,
        Err(errno) => -errno,
    }
}
