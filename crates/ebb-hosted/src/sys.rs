//! Thin, checked wrappers over the Linux calls the platform makes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Turns a `-1` return into the thread's `errno`.
fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// A close-on-exec eventfd in blocking mode: io_uring returns EAGAIN for
/// reads of non-blocking files instead of waiting, and the epoll driver
/// reads it only once it is readable.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; a non-negative result is a new fd
    // that we own.
    let fd = check(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds 1 to an eventfd's counter (wakes its reader). Never blocks: the
/// counter cannot overflow in practice, and EAGAIN would mean it is
/// already non-zero, i.e. the reader is already woken.
pub fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live local to an fd; a bad fd only
    // returns an error.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Resets a readable eventfd's (or timerfd's) counter; returns the count.
pub fn eventfd_drain(fd: RawFd) -> u64 {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live local.
    let read = unsafe { libc::read(fd, (&mut count as *mut u64).cast(), 8) };
    if read == 8 {
        count
    } else {
        0
    }
}

/// The CPU time this process has used: user, then system
/// (`getrusage(RUSAGE_SELF)`); zero if the call fails.
pub fn cpu_time() -> (std::time::Duration, std::time::Duration) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` into the live local it points
    // to; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return Default::default();
    }
    // SAFETY: the call succeeded, so it filled the struct (which was
    // zeroed before, so every byte is initialised either way).
    let usage = unsafe { usage.assume_init() };
    let duration = |time: libc::timeval| {
        std::time::Duration::new(
            u64::try_from(time.tv_sec).unwrap_or(0),
            u32::try_from(time.tv_usec).unwrap_or(0) * 1000,
        )
    };
    (duration(usage.ru_utime), duration(usage.ru_stime))
}

/// How many times the calling thread has been switched out because it
/// blocked (`ru_nvcsw` of `getrusage(RUSAGE_THREAD)`); 0 if the call
/// fails.
pub fn thread_sleeps() -> u64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` into the live local it points
    // to; RUSAGE_THREAD is valid on Linux since 2.6.26.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) } != 0 {
        return 0;
    }
    // SAFETY: zeroed before the call, so every byte is initialised whether
    // or not the kernel filled it.
    let usage = unsafe { usage.assume_init() };
    u64::try_from(usage.ru_nvcsw).unwrap_or(0)
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into a live local; CLOCK_MONOTONIC always
    // exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    u64::try_from(now.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(now.tv_nsec).unwrap_or(0)
}

/// A `timespec` for `ns` nanoseconds.
pub fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        // `time_t` is 64 bits on x86_64 with glibc and with musl ≥ 1.2 (whose
        // libc crate marks the alias deprecated while it moves).
        tv_sec: i64::try_from(ns / 1_000_000_000).unwrap_or(i64::MAX),
        tv_nsec: libc::c_long::try_from(ns % 1_000_000_000).unwrap_or(0),
    }
}

// CPU pinning is the testbed's (one implementation for the platform,
// the load generator and the benchmarks).
pub use ebb_testbed::pin::{allowed_cpus, pin_current_thread as pin_to_cpu};

/// A signal set holding `signals`.
pub fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: an all-zero sigset_t is valid storage for sigemptyset.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: initialises a live sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    for &signal in signals {
        // SAFETY: adds a valid signal number to a live, initialised set.
        unsafe { libc::sigaddset(&mut set, signal) };
    }
    set
}

/// Sets the calling thread's signal mask (`how` = SIG_BLOCK, SIG_SETMASK,
/// ...) and returns the previous one.
pub fn thread_sigmask(how: libc::c_int, set: &libc::sigset_t) -> io::Result<libc::sigset_t> {
    // SAFETY: an all-zero sigset_t is valid storage for the old mask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live sigset_t values.
    let error = unsafe { libc::pthread_sigmask(how, set, &mut old) };
    if error != 0 {
        return Err(io::Error::from_raw_os_error(error));
    }
    Ok(old)
}

/// A non-blocking signalfd for `set` (which must be blocked).
pub fn signalfd(set: &libc::sigset_t) -> io::Result<OwnedFd> {
    // SAFETY: `set` is a live sigset_t; a non-negative result is a new fd.
    let fd = check(unsafe { libc::signalfd(-1, set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads one pending signal number from a signalfd, if any.
pub fn read_signal(fd: &OwnedFd) -> Option<u32> {
    // SAFETY: an all-zero signalfd_siginfo is valid storage.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: reads at most `size` bytes into a live signalfd_siginfo.
    let read = unsafe {
        libc::read(
            fd.as_raw_fd(),
            (&mut info as *mut libc::signalfd_siginfo).cast(),
            size,
        )
    };
    (usize::try_from(read).ok() == Some(size)).then_some(info.ssi_signo)
}

/// Waits until one of `fds` is readable; returns which are.
pub fn poll_readable(fds: &[RawFd]) -> io::Result<Vec<bool>> {
    let mut polls: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        let count = libc::nfds_t::try_from(polls.len()).unwrap_or(0);
        // SAFETY: `polls` is a live array of `count` pollfd structures.
        match check(unsafe { libc::poll(polls.as_mut_ptr(), count, -1) }) {
            Ok(_) => {
                return Ok(polls
                    .iter()
                    .map(|p| p.revents & libc::POLLIN != 0)
                    .collect())
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        }
    }
}

/// An epoll instance.
pub fn epoll_create() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; a non-negative result is a new fd.
    let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Watches `fd` for input on `epoll`, tagged with `token`.
pub fn epoll_add(epoll: &OwnedFd, fd: RawFd, token: u64) -> io::Result<()> {
    let mut event = libc::epoll_event {
        events: u32::try_from(libc::EPOLLIN).unwrap_or(1),
        u64: token,
    };
    // SAFETY: `event` is a live epoll_event; fds are valid or produce errors.
    check(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) })?;
    Ok(())
}

/// Waits on `epoll` for up to `timeout_ms` (-1: forever); returns the
/// tokens of ready fds.
pub fn epoll_wait(epoll: &OwnedFd, timeout_ms: libc::c_int) -> io::Result<Vec<u64>> {
    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
    let capacity = libc::c_int::try_from(events.len()).unwrap_or(1);
    // SAFETY: `events` is a live array of `capacity` epoll_event structures.
    match check(unsafe {
        libc::epoll_wait(epoll.as_raw_fd(), events.as_mut_ptr(), capacity, timeout_ms)
    }) {
        Ok(ready) => Ok(events[..usize::try_from(ready).unwrap_or(0)]
            .iter()
            .map(|event| event.u64)
            .collect()),
        Err(error) if error.kind() == io::ErrorKind::Interrupted => Ok(Vec::new()),
        Err(error) => Err(error),
    }
}

/// A non-blocking CLOCK_MONOTONIC timerfd.
pub fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: no pointers; a non-negative result is a new fd.
    let fd = check(unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Arms a timerfd to fire once at the absolute monotonic time `at_ns`
/// (or disarms it with `None`).
pub fn timerfd_set(fd: &OwnedFd, at_ns: Option<u64>) -> io::Result<()> {
    let spec = libc::itimerspec {
        it_interval: timespec(0),
        // An all-zero it_value disarms; an absolute time of 0 would too, so
        // clamp a past deadline to 1 ns (fires at once).
        it_value: timespec(at_ns.map_or(0, |ns| ns.max(1))),
    };
    // SAFETY: `spec` is a live itimerspec; the old value is not requested.
    check(unsafe {
        libc::timerfd_settime(
            fd.as_raw_fd(),
            libc::TFD_TIMER_ABSTIME,
            &spec,
            std::ptr::null_mut(),
        )
    })?;
    Ok(())
}

/// An iovec count as `msghdr.msg_iovlen` takes it: `size_t` with glibc,
/// `int` with musl (the user-space stack's POSIX personality builds this
/// crate for musl). Counts here are a chain's segments, far below both.
pub fn iov_count<T: TryFrom<usize> + Default>(count: usize) -> T {
    T::try_from(count).unwrap_or_default()
}
