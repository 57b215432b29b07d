//! CPU pinning: a thread (the calling one, or another process's such as a
//! QEMU vCPU thread) to one host CPU (sched_setaffinity(2)
//! with pid 0 changes only the calling thread), and the CPUs this process
//! may run on.

use std::io;

/// The number of CPUs a `cpu_set_t` holds (`CPU_SETSIZE`).
const SET_SIZE: usize = 1024;

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: passes the size of, and a pointer to, a live cpu_set_t that
    // the kernel fills; pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..SET_SIZE)
        // SAFETY: CPU_ISSET reads one bit of `set`, at an index below
        // CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect())
}

/// Pins the calling thread to host CPU `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    pin_thread(0, cpu)
}

/// Pins host thread `tid` (any process's, e.g. a QEMU vCPU thread from
/// QMP `query-cpus-fast`; 0 is the calling thread) to host CPU `cpu`.
pub fn pin_thread(tid: u32, cpu: usize) -> io::Result<()> {
    let tid = libc::pid_t::try_from(tid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("no thread {tid}")))?;
    if cpu >= SET_SIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is out of range"),
        ));
    }
    // SAFETY: cpu_set_t is a plain bit array; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit inside `set`; `cpu` is below
    // CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: passes the size of, and a pointer to, a live cpu_set_t; the
    // kernel only reads it, and changes only thread `tid`'s affinity.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pinned_to_an_allowed_cpu_runs_only_there() {
        let allowed = allowed_cpus().expect("affinity");
        assert!(!allowed.is_empty());
        let last = *allowed.last().expect("one CPU");
        let seen = std::thread::spawn(move || {
            pin_current_thread(last).expect("pin");
            allowed_cpus().expect("affinity")
        })
        .join()
        .expect("thread");
        assert_eq!(seen, [last]);
    }

    #[test]
    fn a_cpu_beyond_the_set_is_refused() {
        let err = pin_current_thread(SET_SIZE).expect_err("out of range");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
}
