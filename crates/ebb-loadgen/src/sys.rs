//! The few Linux calls the generator makes directly: epoll, CPU affinity,
//! per-thread CPU time and timer slack.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `Err(last OS error)` when `ret` is negative.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Readable.
pub const IN: u32 = libc::EPOLLIN as u32;
/// Writable.
pub const OUT: u32 = libc::EPOLLOUT as u32;
/// Error or hang-up.
pub const ERR_HUP: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

/// Whether `epoll_pwait2` (nanosecond timeouts, Linux 5.11+) is missing.
static NO_PWAIT2: AtomicBool = AtomicBool::new(false);

/// An epoll instance (level-triggered).
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// An empty event array entry.
pub fn empty_event() -> libc::epoll_event {
    libc::epoll_event { events: 0, u64: 0 }
}

impl Epoll {
    /// A new epoll instance.
    pub fn new() -> io::Result<Self> {
        // SAFETY: no pointers; the returned descriptor is checked and owned.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, events: u32) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: token };
        // SAFETY: `event` is a live epoll_event for the duration of the call.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut event) })?;
        Ok(())
    }

    /// Watches `fd` for `events`, reporting `token`.
    pub fn add(&self, fd: &impl AsRawFd, token: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd.as_raw_fd(), token, events)
    }

    /// Changes the events watched on `fd`.
    pub fn modify(&self, fd: &impl AsRawFd, token: u64, events: u32) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd.as_raw_fd(), token, events)
    }

    /// Stops watching `fd`.
    pub fn delete(&self, fd: &impl AsRawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd.as_raw_fd(), 0, 0)
    }

    /// Waits at most `timeout` for events; returns how many were stored in
    /// `events` (0 on timeout or signal). Uses `epoll_pwait2` for a
    /// nanosecond timeout, else `epoll_wait` rounded up to milliseconds.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout: Duration) -> io::Result<usize> {
        let max = libc::c_int::try_from(events.len()).unwrap_or(libc::c_int::MAX);
        let ret = if NO_PWAIT2.load(Ordering::Relaxed) {
            -1
        } else {
            let ts = libc::timespec {
                tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
                tv_nsec: libc::c_long::from(timeout.subsec_nanos()),
            };
            // SAFETY: `events` is a live, writable array of `max` entries;
            // `ts` lives across the call; a null sigmask means "unchanged".
            let ret = unsafe {
                libc::epoll_pwait2(
                    self.fd.as_raw_fd(),
                    events.as_mut_ptr(),
                    max,
                    &ts,
                    std::ptr::null(),
                )
            };
            if ret < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
                NO_PWAIT2.store(true, Ordering::Relaxed);
            } else if ret >= 0 {
                return Ok(usize::try_from(ret).unwrap_or(0));
            }
            ret
        };
        let ret = if NO_PWAIT2.load(Ordering::Relaxed) {
            let ms = timeout.as_nanos().div_ceil(1_000_000);
            let ms = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
            // SAFETY: `events` is a live, writable array of `max` entries.
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, ms) }
        } else {
            ret
        };
        match check(ret) {
            Ok(n) => Ok(usize::try_from(n).unwrap_or(0)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }
}

// CPU pinning is the testbed's.
pub use ebb_testbed::pin::pin_current_thread as pin_to_cpu;

/// Sets the calling thread's timer slack to 1 ns, so that timed waits in
/// open-loop mode wake when asked rather than up to 50 µs later.
pub fn tight_timer_slack() {
    let slack: libc::c_ulong = 1;
    // SAFETY: PR_SET_TIMERSLACK takes an integer and touches no memory.
    let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack) };
}

/// CPU time used so far, split into user and system time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTime {
    /// User time in seconds.
    pub user: f64,
    /// System time in seconds.
    pub sys: f64,
}

impl CpuTime {
    /// `self - earlier`.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user: (self.user - earlier.user).max(0.0),
            sys: (self.sys - earlier.sys).max(0.0),
        }
    }

    /// User + system seconds.
    pub fn total(self) -> f64 {
        self.user + self.sys
    }
}

fn timeval_secs(tv: libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

fn rusage(who: libc::c_int) -> CpuTime {
    // SAFETY: an all-zero rusage is valid storage for getrusage to fill.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a live, writable rusage.
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return CpuTime::default();
    }
    CpuTime {
        user: timeval_secs(ru.ru_utime),
        sys: timeval_secs(ru.ru_stime),
    }
}

/// CPU time of the calling thread (`getrusage(RUSAGE_THREAD)`).
pub fn thread_cpu() -> CpuTime {
    rusage(libc::RUSAGE_THREAD)
}

/// CPU time of the whole process (`getrusage(RUSAGE_SELF)`).
pub fn process_cpu() -> CpuTime {
    rusage(libc::RUSAGE_SELF)
}

// The privilege check is the testbed's.
pub use ebb_testbed::need::is_root;

/// Parses a CPU list such as `0,2-3`.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("'{s}' is not a CPU list (e.g. 0,2-3)");
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let a: usize = a.trim().parse().map_err(|_| bad())?;
            let b: usize = b.trim().parse().map_err(|_| bad())?;
            if a > b || b >= 1024 {
                return Err(bad());
            }
            cpus.extend(a..=b);
        } else {
            let c: usize = part.parse().map_err(|_| bad())?;
            if c >= 1024 {
                return Err(bad());
            }
            cpus.push(c);
        }
    }
    if cpus.is_empty() {
        return Err(bad());
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(parse_cpu_list("0,2-4"), Ok(vec![0, 2, 3, 4]));
        assert!(matches!(parse_cpu_list(""), Err(e) if e.contains("is not a CPU list")));
        assert!(matches!(parse_cpu_list("3-1"), Err(e) if e.contains("is not a CPU list")));
        assert!(matches!(parse_cpu_list("x"), Err(e) if e.contains("is not a CPU list")));
    }

    #[test]
    fn thread_cpu_grows_with_work() {
        // Spins until this thread's CPU time grows by 20 ms (bounded).
        let a = thread_cpu();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while thread_cpu().since(a).total() < 0.02 && start.elapsed() < Duration::from_secs(20) {
            for _ in 0..10_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
        }
        assert!(x > 0);
        assert!(thread_cpu().since(a).total() >= 0.02);
        assert!(process_cpu().total() >= 0.02);
    }

    #[test]
    fn epoll_times_out() {
        let ep = Epoll::new().expect("epoll");
        let mut ev = [empty_event(); 4];
        let start = std::time::Instant::now();
        assert_eq!(
            ep.wait(&mut ev, Duration::from_millis(20)).expect("wait"),
            0
        );
        assert!(start.elapsed() >= Duration::from_millis(19));
    }
}
