//! A running QEMU seen from the host: its process under the wrappers it
//! is launched with (`ip netns exec` and `taskset` exec, `timeout` forks),
//! and its CPU time (all threads: vCPUs and I/O); any process's CPU time.

/// The QEMU process among `pid` and its descendants (up to `depth`
/// levels down), if any.
pub fn find_qemu(pid: u32, depth: u32) -> Option<u32> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim().starts_with("qemu-system") {
        return Some(pid);
    }
    if depth == 0 {
        return None;
    }
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|child| child.parse().ok())
        .find_map(|child| find_qemu(child, depth - 1))
}

/// User + system CPU seconds of QEMU started as (or under) process `pid`:
/// the first process named `qemu-system-*` among `pid` and its
/// descendants, all threads, from `/proc/PID/stat`.
pub fn qemu_cpu_seconds(pid: u32) -> Result<f64, String> {
    let qemu = find_qemu(pid, 4).ok_or_else(|| format!("no QEMU process under pid {pid}"))?;
    process_cpu_seconds(qemu)
}

/// User + system CPU seconds of process `pid`, all threads, from
/// `/proc/PID/stat`.
pub fn process_cpu_seconds(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    let ticks = stat_cpu_ticks(&stat).ok_or_else(|| format!("cannot parse /proc/{pid}/stat"))?;
    // SAFETY: sysconf(3) takes a constant and touches no memory.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    #[allow(clippy::cast_precision_loss)] // CPU ticks stay far below 2^52
    Ok(ticks as f64 / hz.max(1) as f64)
}

/// utime + stime (fields 14 and 15) of a `/proc/PID/stat` line; the
/// command name in parentheses may contain spaces.
pub fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name, field 3 (state) is index 0: utime (14) is index 11.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_fields_14_and_15_even_with_spaces_in_the_name() {
        let stat = "4242 (qemu-system x) S 1 2 3 4 5 6 7 8 9 10 250 40 0 0 20 0 3 0";
        assert_eq!(stat_cpu_ticks(stat), Some(290));
        assert_eq!(stat_cpu_ticks("1 (x) S 1"), None);
    }

    #[test]
    fn this_process_is_not_qemu() {
        assert_eq!(find_qemu(std::process::id(), 0), None);
    }
}
